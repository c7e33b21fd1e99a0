// Sampling every output row of one forward: ONE Backend::top_k over all rows (k = the largest any
// row needs), one read back of the candidates, then each row drawn by its own Sampler (its own RNG
// stream) from its candidates, with its logit bias and log-probabilities. A row reads its whole
// logits row back only when its chain needs every logit (penalties, a top-p / min-p cut the
// candidates cannot decide, a bias on a chain without a top-k cut). The one decision: a row only
// ever looks at the first k_row candidates it asked for, never at the step's larger k, so what it
// draws cannot depend on the other rows of its batch.
// Grammar masks (SampleRow::allowed) are applied on the device before anything else
// (Backend::mask_logits), so every later stage sees forbidden tokens at -inf: candidates, the
// log-sum-exp (log-probabilities are then those of the distribution over the allowed tokens,
// as vLLM reports them under structured output), a row read back whole, a bias.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/status.h"
#include "ops/backend.h"
#include "runtime/engine/request.h"
#include "runtime/sampler.h"

namespace cera::runtime {

// One output row to sample. Pointers are borrowed for the call.
struct SampleRow {
  Sampler* sampler = nullptr;
  std::span<const int32_t> history;  // prompt + output so far (the penalties read it)
  const std::map<int32_t, float>* logit_bias = nullptr;  // null or empty: none
  bool logprobs = false;
  int32_t top_logprobs = 0;  // <= kMaxTopLogprobs
  // The tokens this row may draw: ceil(n_vocab / 32) words, bit id % 32 of word id / 32; empty:
  // every token. At least one bit must be set.
  std::span<const uint32_t> allowed;
};

struct SampledToken {
  int32_t token = 0;
  std::optional<TokenLogprobs> logprobs;  // set with SampleRow::logprobs
};

struct BatchSamplerStats {
  int64_t n_top_k_calls = 0;     // one per sample() that needed candidates
  int64_t n_rows_read_back = 0;  // rows whose whole [n_vocab] logits came to the host
  int64_t n_gathers = 0;         // single-logit gathers (biased tokens, chosen tokens outside the candidates)
};

class BatchSampler {
 public:
  // Device buffers for up to max_rows rows of a vocabulary of n_vocab; allocated here so that
  // sampling allocates nothing on the device.
  static Result<BatchSampler> create(ops::Backend& backend, int32_t n_vocab, int32_t max_rows);

  // Samples rows[r] from logits column r: logits [n_vocab, rows.size()] F32 on the backend's device,
  // packed, before `softcap` (applied as Backend::top_k applies it). Loop thread only; the logits
  // must stay valid for the call. out gets one entry per row.
  void sample(const TensorView& logits, float softcap, std::span<const SampleRow> rows, std::vector<SampledToken>& out);

  // Pipelined greedy decode: the argmax of every column of `logits` into id slot `slot` (0 or 1)
  // on the device, its read back queued without waiting. The returned view (I32 [n_rows], on the
  // device) can feed the next forward (ForwardBatch::token_ids) before the host has the ids;
  // wait_argmax(slot) redeems them. Each queued slot must be waited for exactly once.
  TensorView queue_argmax(const TensorView& logits, float softcap, int slot);
  std::span<const int32_t> wait_argmax(int slot);

  const BatchSamplerStats& stats() const { return stats_; }

 private:
  BatchSampler(ops::Backend& backend, int32_t n_vocab, int32_t max_rows) : backend_(&backend), n_vocab_(n_vocab), max_rows_(max_rows) {}
  struct Plan;  // batch_sampler.cpp
  // Raw (softcapped) logits at flat indices row * n_vocab + id of `logits`, in one gather.
  void gather(const TensorView& logits, float softcap, std::span<const int32_t> flat, std::vector<float>& out);
  // Row r's whole logits, softcapped, into row_.
  void read_row(const TensorView& logits, float softcap, int64_t r);

  ops::Backend* backend_;
  int32_t n_vocab_;
  int32_t max_rows_;
  std::unique_ptr<ops::Buffer> pick_buffer_;    // ids [k, rows] I32, values [k, rows] F32, lse [rows] F32
  std::unique_ptr<ops::Buffer> gather_buffer_;  // [max_rows * kMaxTopK] F32
  // Two argmax slots: ids [max_rows] I32, values [max_rows] F32, lse [max_rows] F32 each.
  std::unique_ptr<ops::Buffer> argmax_buffer_;
  struct ArgmaxSlot {
    std::vector<int32_t> host;  // [max_rows]; never reallocated while a read back is queued
    int64_t n_rows = 0;
    std::optional<ops::Readback> in_flight;
  };
  ArgmaxSlot argmax_[2];
  std::vector<int32_t> pick_host_;              // what top_k wrote, read back
  std::vector<uint32_t> masks_;                 // the step's masks, [n_masked][words], and their rows
  std::vector<int32_t> mask_rows_;
  std::vector<float> row_;                      // one whole row, softcapped
  std::vector<float> work_;                     // row_ with the bias
  BatchSamplerStats stats_;
};

}  // namespace cera::runtime
