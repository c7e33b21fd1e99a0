// A Session is one conversation with a model: its token history, its KV cache sequence and the
// logits after the last evaluated token. Text goes in (append), text streams out (generate)
// through a sink; cancel() may be called from any thread. One thread drives a Session.
// Greedy decode on a device is pipelined: step N+1 is queued, reading token N's id on the device,
// before the host has read token N back; a token that ends generation rolls that step back.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/model.h"
#include "runtime/decode_pipeline.h"
#include "runtime/kv_cache.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace cera::runtime {

struct SessionOptions {
  int32_t n_ctx = 0;           // 0: the model's training context
  int32_t n_batch = 512;       // tokens per forward() while processing a prompt
  int32_t n_keep = 0;          // tokens kept at the start on a context shift (-1: the whole first append)
  bool context_shift = true;   // false: a full context ends generation with kContextFull
  // A first prompt longer than the context: false refuses it (the error says the lengths);
  // true keeps its first n_keep tokens (at least BOS) and its last (n_ctx - those) / 2 tokens,
  // dropping the middle as llama-server does, so half the context is left for generation.
  bool truncate_long_prompt = false;
  int32_t kv_block_size = 16;
  DType kv_type = DType::kF32;  // KV cache rows, F32 or F16 (api::Engine::new_session sets its own)
  DecodePipeline pipeline = DecodePipeline::kAuto;  // only for samplers with Sampler::argmax_only
};

enum class StopReason { kEndOfGeneration, kMaxTokens, kStopString, kCancelled, kContextFull };
const char* stop_reason_name(StopReason reason);

struct GenerateOptions {
  int32_t max_tokens = 128;
  SamplingParams sampling;
  std::vector<std::string> stop;  // generation ends before any of these strings is emitted
  bool stop_at_end_of_generation = true;
};

// Counters since the session was created (prompt = tokens evaluated by append and by context
// shifts' absence; generation = sampled tokens).
struct SessionStats {
  int64_t n_prompt_tokens = 0;
  double prompt_seconds = 0;
  int64_t n_generated_tokens = 0;
  double generation_seconds = 0;
  int64_t n_context_shifts = 0;
  int64_t n_prompt_tokens_dropped = 0;  // by truncate_long_prompt
};

struct GenerateResult {
  StopReason reason = StopReason::kMaxTokens;
  int32_t n_generated = 0;
  std::string text;  // everything streamed to the sink
};

// Receives generated text as it becomes final (whole UTF-8 characters, never past a stop string).
using TextSink = std::function<void(std::string_view)>;

class Session {
 public:
  // Sessions are not movable (cancel() may be called from another thread), hence unique_ptr.
  static Result<std::unique_ptr<Session>> create(model::Model& model, const tokenizer::Tokenizer& tokenizer,
                                                 const SessionOptions& options);

  // Tokenizes and evaluates text. BOS is added when add_bos and the history is empty;
  // parse_special makes special-token texts in `text` into their ids.
  Status append_text(std::string_view text, bool add_bos, bool parse_special = false);
  // Same with the tokenizer's options (e.g. plain ranges of a rendered chat prompt); add_special
  // applies only while the history is empty.
  Status append_text(std::string_view text, const tokenizer::EncodeOptions& options);
  // Evaluates tokens. With all_logits, logits of every position are kept ([n_vocab] each) and
  // returned by all_logits(); otherwise only the last position's.
  Status append_tokens(std::span<const int32_t> tokens, bool all_logits = false);

  // Samples, streams and evaluates tokens until a stop. Everything observable (tokens, text,
  // reason, stats, the session's state after) is the same whether the decode is pipelined or not.
  Result<GenerateResult> generate(const GenerateOptions& options, const TextSink& sink);
  void cancel() { cancelled_.store(true); }

  // The token after the history, drawn by `sampler` from the last position's logits; on a device
  // backend through Backend::top_k when the sampler's chain allows (a few bytes read back).
  // Precondition: something was evaluated (append_*) since the last reset.
  int32_t sample_next(Sampler& sampler);

  // The last position's logits ([n_vocab]; read back from the device on first use).
  std::span<const float> last_logits() const;
  std::span<const float> all_logits() const { return all_logits_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int32_t n_ctx() const { return n_ctx_; }
  const SessionStats& stats() const { return stats_; }
  KvBytes kv_bytes() const { return cache_.bytes(); }
  const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }
  // Forgets everything: history, cache, logits (not the stats).
  void reset();

 private:
  Session(model::Model& model, tokenizer::Tokenizer tokenizer, KvCache cache, SessionOptions options, int32_t n_ctx);
  Status evaluate(std::span<const int32_t> tokens, bool all_logits);
  // One forward of at most n_batch tokens after the cache's current length (making room first).
  // token_ids: the ids on the device (tokens then gives only the count). Logits: every
  // position's into all_logits_ with all_logits, else the last position's into device_logits_[row]
  // when `last`. Does not touch tokens_.
  struct Chunk {
    std::span<const int32_t> tokens;
    const TensorView* token_ids = nullptr;
    bool all_logits = false;
    bool last = true;
    int row = 0;
  };
  Status forward_chunk(const Chunk& chunk);
  Status flush_pending();
  Status make_room(int32_t n_tokens);
  // One context shift: drops history entries [keep, keep + discard) from the cache and tokens_.
  Status shift_history(int32_t keep, int32_t discard);
  // Makes room for a whole append before any of it is evaluated (one context shift, or the
  // truncation of a long first prompt), so that the outcome never depends on n_batch. Returns
  // the tokens to evaluate: `tokens`, or a truncated copy held in `storage`.
  Result<std::span<const int32_t>> fit_append(std::span<const int32_t> tokens, bool all_logits,
                                              std::vector<int32_t>& storage);

  // Generation's loop; `pipelined`: greedy steps are queued ahead (SessionOptions::pipeline).
  Status generate_loop(const GenerateOptions& options, Sampler& sampler, bool pipelined, GenerateResult& result,
                       const TextSink& sink);
  bool pipelines(const Sampler& sampler) const;
  // Pipelined decode. Top_k (k = 1) of device_logits_[row] into pick slot `row`, its id read back
  // asynchronously into picked_[row]; wait_argmax redeems it.
  void queue_argmax(int row);
  int32_t wait_argmax(int row);
  // Whether the step after sampling the next token is certain to be evaluated unless that token
  // ends generation, without a context shift; n_generated counts that token.
  bool can_speculate(int32_t n_generated, int32_t max_tokens) const;
  // Appends one cache entry and forwards the token whose id pick slot cur_ holds (not yet read
  // back); its logits go to the other row. tokens_ is untouched until commit_speculation.
  Status speculate();
  void commit_speculation(int32_t token);
  void roll_back_speculation();  // the state is again the one before speculate()
  void drain_readbacks();        // waits for every readback still in flight
  // Runs Backend::top_k with k candidates on the current device logits; spans into pick_host_.
  struct Picked {
    std::span<const int32_t> ids;
    std::span<const float> values;
    float lse;
  };
  Picked pick_candidates(int32_t k);
  // The device views of top_k's outputs for k candidates in slot `slot` of pick_buffer_: ids [k],
  // values [k] and lse [1], contiguous (one readback covers them).
  struct PickViews {
    TensorView ids, values, lse;
  };
  PickViews pick_views(int slot, int32_t k) const;
  // Copies the model's last logits row into device_logits_[row] (after a forward).
  void keep_device_logits(int row);

  model::Model* model_;
  tokenizer::Tokenizer tokenizer_;
  KvCache cache_;
  SeqId seq_;
  SessionOptions options_;
  int32_t n_ctx_;
  int32_t n_keep_ = 0;
  std::vector<int32_t> tokens_;       // evaluated history (+ pending_ at the end when set)
  std::optional<int32_t> pending_;    // sampled but not yet evaluated
  bool has_logits_ = false;           // something was evaluated since the last reset
  mutable bool logits_on_device_ = false;  // logits_ not yet read back from device_logits_
  std::unique_ptr<ops::Buffer> logits_buffer_;  // two rows of [n_vocab]: the current one and the next
  TensorView device_logits_[2];                 // [n_vocab] each in logits_buffer_
  int cur_ = 0;                                 // which row holds the last evaluated token's logits
  float logits_softcap_ = 0.0f;                 // still to apply to device_logits_
  mutable std::vector<float> logits_;  // [n_vocab] after the last evaluated token, once read back
  // Two slots of top_k outputs, one per logits row: ids [k], values [k], lse (k <= kMaxTopK).
  std::unique_ptr<ops::Buffer> pick_buffer_;
  std::vector<int32_t> pick_host_;
  // Pipelined decode: the argmax of each row as read back, the readbacks in flight, and the
  // cache length before a step queued ahead (-1: none queued).
  int32_t picked_[2] = {0, 0};
  std::optional<ops::Readback> in_flight_[2];
  int32_t speculated_from_ = -1;
  std::vector<float> all_logits_;     // [n_vocab * n] when asked
  std::atomic<bool> cancelled_{false};
  SessionStats stats_;
  // Batch assembly buffers, reused.
  std::vector<int32_t> positions_, token_seq_, slots_, outputs_, table_offset_, ring_slots_, ring_offset_;
};

}  // namespace cera::runtime
