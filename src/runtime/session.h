// A Session evaluates one sequence on a model: its token history, its KV cache sequence and the
// logits after the last evaluated token (`cera logits`, the tests' reference decodes). Text goes
// in (append), the next token comes out of sample_next; generation itself runs in the engine loop
// (runtime/engine: LoopSession is the conversation over it). One thread drives a Session.
// The one decision: an append that does not fit shifts the history first (context shift) or
// truncates a long first prompt, whole, so that the outcome never depends on n_batch.
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "model/model.h"
#include "runtime/generate_types.h"
#include "runtime/kv_cache.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace cera::runtime {

struct SessionOptions {
  int32_t n_ctx = 0;           // 0: the model's training context
  int32_t n_batch = 512;       // tokens per forward() while processing a prompt
  int32_t n_keep = 0;          // tokens kept at the start on a context shift (-1: the whole first append)
  bool context_shift = true;   // false: an append that does not fit is an error (kOutOfRange)
  // A first prompt longer than the context: false refuses it (the error says the lengths);
  // true keeps its first n_keep tokens (at least BOS) and its last (n_ctx - those) / 2 tokens,
  // dropping the middle as llama-server does, so half the context is left for generation.
  bool truncate_long_prompt = false;
  int32_t kv_block_size = 16;
  DType kv_type = DType::kF32;  // KV cache rows, F32 or F16 (api::Engine::new_session sets its own)
};

class Session {
 public:
  // Checks the options against the model and allocates the cache and the device buffers.
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

  // The token after the history, drawn by `sampler` from the last position's logits; on a device
  // backend through Backend::top_k when the sampler's chain allows (a few bytes read back).
  // Precondition: something was evaluated (append_*) since the last reset.
  int32_t sample_next(Sampler& sampler);

  // The last position's logits ([n_vocab]; read back from the device on first use).
  std::span<const float> last_logits() const;
  std::span<const float> all_logits() const { return all_logits_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int32_t n_ctx() const { return n_ctx_; }
  const SessionOptions& options() const { return options_; }
  const SessionStats& stats() const { return stats_; }
  KvBytes kv_bytes() const { return cache_.bytes(); }
  const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }
  // Forgets everything: history, cache, logits (not the stats).
  void reset();

 private:
  Session(model::Model& model, tokenizer::Tokenizer tokenizer, KvCache cache, SessionOptions options, int32_t n_ctx);
  Status evaluate(std::span<const int32_t> tokens, bool all_logits);
  // One forward of at most n_batch tokens after the cache's current length (making room first).
  // Logits: every position's into all_logits_ with all_logits, else the last position's into
  // device_logits_ when `last`. Does not touch tokens_.
  Status forward_chunk(std::span<const int32_t> tokens, bool all_logits, bool last);
  Status make_room(int32_t n_tokens);
  // One context shift: drops history entries [keep, keep + discard) from the cache and tokens_.
  Status shift_history(int32_t keep, int32_t discard);
  // Makes room for a whole append before any of it is evaluated (one context shift, or the
  // truncation of a long first prompt), so that the outcome never depends on n_batch. Returns
  // the tokens to evaluate: `tokens`, or a truncated copy held in `storage`.
  Result<std::span<const int32_t>> fit_append(std::span<const int32_t> tokens, bool all_logits,
                                              std::vector<int32_t>& storage);

  // Runs Backend::top_k with k candidates on the device logits; spans into pick_host_.
  struct Picked {
    std::span<const int32_t> ids;
    std::span<const float> values;
    float lse;
  };
  Picked pick_candidates(int32_t k);
  // Copies the model's last logits row into device_logits_ (after a forward).
  void keep_device_logits();

  model::Model* model_;
  tokenizer::Tokenizer tokenizer_;
  KvCache cache_;
  SeqId seq_;
  SessionOptions options_;
  int32_t n_ctx_;
  int32_t n_keep_ = 0;
  std::vector<int32_t> tokens_;       // evaluated history
  bool has_logits_ = false;           // something was evaluated since the last reset
  mutable bool logits_on_device_ = false;  // logits_ not yet read back from device_logits_
  std::unique_ptr<ops::Buffer> logits_buffer_;  // [n_vocab]: the last evaluated token's logits
  TensorView device_logits_;                    // [n_vocab] in logits_buffer_
  float logits_softcap_ = 0.0f;                 // still to apply to device_logits_
  mutable std::vector<float> logits_;  // [n_vocab] after the last evaluated token, once read back
  // top_k's outputs, contiguous (one readback): ids [k], values [k], lse (k <= kMaxTopK).
  std::unique_ptr<ops::Buffer> pick_buffer_;
  std::vector<int32_t> pick_host_;
  std::vector<float> all_logits_;     // [n_vocab * n] when asked
  SessionStats stats_;
  // Batch assembly buffers, reused.
  std::vector<int32_t> positions_, token_seq_, slots_, outputs_, table_offset_, ring_slots_, ring_offset_;
};

}  // namespace cera::runtime
