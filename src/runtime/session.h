// A Session is one conversation with a model: its token history, its KV cache sequence and the
// logits after the last evaluated token. Text goes in (append), text streams out (generate)
// through a sink; cancel() may be called from any thread. One thread drives a Session.
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
#include "runtime/kv_cache.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace cera::runtime {

struct SessionOptions {
  int32_t n_ctx = 0;           // 0: the model's training context
  int32_t n_batch = 512;       // tokens per forward() while processing a prompt
  int32_t n_keep = 0;          // tokens kept at the start on a context shift (-1: the whole first append)
  bool context_shift = true;   // false: a full context ends generation with kContextFull
  int32_t kv_block_size = 16;
  DType kv_type = DType::kF32;  // KV cache rows, F32 or F16 (api::Engine::new_session sets its own)
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
  // Evaluates tokens. With all_logits, logits of every position are kept ([n_vocab] each) and
  // returned by all_logits(); otherwise only the last position's.
  Status append_tokens(std::span<const int32_t> tokens, bool all_logits = false);

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
  Status flush_pending();
  Status make_room(int32_t n_tokens);
  // Runs Backend::top_k with k candidates on the device logits; spans into pick_host_.
  struct Picked {
    std::span<const int32_t> ids;
    std::span<const float> values;
    float lse;
  };
  Picked pick_candidates(int32_t k);
  // Copies the model's last logits row into this session's device buffer (after a forward).
  void keep_device_logits();

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
  std::unique_ptr<ops::Buffer> logits_buffer_;  // this session's copy of the last logits row ([n_vocab])
  TensorView device_logits_;                    // [n_vocab] in logits_buffer_
  float logits_softcap_ = 0.0f;                 // still to apply to device_logits_
  mutable std::vector<float> logits_;  // [n_vocab] after the last evaluated token, once read back
  std::unique_ptr<ops::Buffer> pick_buffer_;  // top_k outputs: ids [k], values [k], lse (k <= kMaxTopK)
  std::vector<int32_t> pick_host_;
  std::vector<float> all_logits_;     // [n_vocab * n] when asked
  std::atomic<bool> cancelled_{false};
  SessionStats stats_;
  // Batch assembly buffers, reused.
  std::vector<int32_t> positions_, token_seq_, slots_, outputs_, table_offset_, ring_slots_, ring_offset_;
};

}  // namespace cera::runtime
