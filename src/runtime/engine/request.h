// A request to the engine loop: prompt tokens, its own sampling parameters and seed, stop rules,
// sinks for streamed text and tokens; and the handle its submitter keeps (cancel from any thread,
// wait for the result). The one decision: the handle and the loop share one small state object
// (a mutex, a condition variable, the cancel flag and the result), so a handle may outlive the
// loop and cancel() never touches the loop's own bookkeeping.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runtime/grammar/token_tables.h"
#include "runtime/sampler.h"

namespace cera::runtime {

using RequestId = uint64_t;

enum class RequestState : uint8_t {
  kWaiting,    // queued, holds no KV
  kRunning,    // holds KV blocks; computed tokens catch up with its tokens step by step
  kPreempted,  // its KV was freed for older requests; waits at the front of the queue
  kFinished,
};
const char* request_state_name(RequestState state);

enum class FinishReason : uint8_t {
  kEndOfGeneration,  // an end-of-generation token (not part of the output)
  kMaxTokens,
  kStopString,   // the output ends before the stop string
  kCancelled,    // RequestHandle::cancel, or EngineLoop::shutdown(kCancel)
  kContextFull,  // prompt + output reached the context of one request
  kError,        // RequestResult::status says what failed
};
const char* finish_reason_name(FinishReason reason);

// Called on the engine loop's thread, in order; they must return quickly and must not call into
// the loop (RequestHandle::cancel is fine). Text comes as whole UTF-8 characters and never past a
// stop string; tokens as sampled (a token whose text completes a stop string is still reported).
using RequestTextSink = std::function<void(std::string_view)>;
using RequestTokenSink = std::function<void(int32_t)>;

// Log-probabilities are those of the model's own distribution: the log-softmax of the raw logits
// (after the model's final softcap, which is part of the model), BEFORE logit_bias, penalties,
// temperature and the top-k / top-p / min-p cuts. That is what OpenAI's logprobs and vLLM's
// default (raw) logprobs report, and it keeps them comparable between requests whatever each
// one's sampling options are. A token forced by a bias therefore shows its unbiased logprob.
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;  // <= 0
};
struct TokenLogprobs {
  TokenLogprob chosen;            // the generated token
  std::vector<TokenLogprob> top;  // the top_logprobs most likely tokens, descending (ties: lower id first)
};
// Called right after on_token for the same token (requests with logprobs only).
using RequestLogprobsSink = std::function<void(const TokenLogprobs&)>;
struct RequestResult;
// Called once when the request ends, after its last on_text and before its handle reports it done,
// with the result the handle will hold (a server wakes its stream on it instead of polling).
using RequestFinishSink = std::function<void(const RequestResult&)>;

inline constexpr int32_t kMaxTopLogprobs = 20;     // OpenAI's limit
inline constexpr float kMaxAbsLogitBias = 1e30f;  // so that logit + bias stays finite

// What a request does when its tokens fill the context of one request (EngineLoop's n_ctx).
struct ContextShift {
  // false: the request ends with kContextFull. true: it goes on after a shift as Session does it
  // (llama.cpp's rule): the first n_keep tokens stay, half of the rest is dropped, the K/V after
  // it moves down in place and is re-rotated (KvCache::shift). A request whose kept blocks are
  // shared with another one cannot move them and ends with kContextFull instead.
  bool enabled = false;
  int32_t n_keep = 0;  // >= 0; at most the context minus one is kept
};

// Constrained decoding: each generated token must continue a sentence of the grammar, and an
// end-of-generation token is allowed only where the sentence may end. The tables are the
// grammar's over the model's vocabulary (grammar::token_tables_for with the tokenizer's
// VocabIndex; precompute_all() before submitting keeps the first steps fast); the loop keeps a
// TokenMatcher per request and masks its row on the device before sampling.
struct GrammarConstraint {
  std::shared_ptr<const grammar::TokenTables> tables;  // null: no constraint
  // Empty: the grammar constrains from the first generated token. Else the output is free until
  // one of these tokens is generated (a tool-call marker), and the grammar constrains what
  // follows it ("lazy" constraint).
  std::vector<int32_t> trigger_tokens;
  // With trigger tokens: bytes the grammar's sentence starts with, consumed when it starts (the
  // trigger's text, when the grammar spells out the marker the model wrote as one token).
  std::string trigger_text;
};

struct RequestParams {
  std::vector<int32_t> prompt;  // [n_prompt] ids, BOS included when wanted; not empty
  SamplingParams sampling;      // its seed starts this request's own RNG stream
  int32_t max_tokens = 128;     // >= 0; 0 finishes at once with kMaxTokens
  std::vector<std::string> stop;
  bool stop_at_end_of_generation = true;
  RequestTextSink on_text;
  RequestTokenSink on_token;
  // Control tokens' texts appear in the text (a tool-call marker such as [TOOL_CALLS] that an
  // output parser must see); off: they decode to nothing. End-of-generation tokens never appear.
  bool render_special_tokens = false;
  // Token id -> added to its raw logit before the whole sampling chain (penalties too); ids in
  // the vocabulary, values finite with |bias| <= kMaxAbsLogitBias. A large positive bias forces
  // a token, -1e9 forbids it.
  std::map<int32_t, float> logit_bias;
  bool logprobs = false;     // RequestResult::logprobs and on_logprobs, one entry per generated token
  int32_t top_logprobs = 0;  // alternatives per token, 0..kMaxTopLogprobs; > 0 needs logprobs
  RequestLogprobsSink on_logprobs;
  RequestFinishSink on_finish;
  // Extra key of the prefix cache: requests share cached blocks only under the same value (a
  // LoRA adapter, a per-user salt so that timing cannot reveal another user's prompt).
  uint64_t cache_salt = 0;
  ContextShift context_shift;
  // With a grammar, reaching its end finishes the request with kEndOfGeneration even under
  // stop_at_end_of_generation = false (nothing may follow a complete sentence but the end).
  GrammarConstraint grammar;
};

struct RequestResult {
  Status status;  // not ok only with FinishReason::kError
  FinishReason reason = FinishReason::kMaxTokens;
  std::vector<int32_t> tokens;  // generated ids (without a final end-of-generation token)
  std::string text;             // everything handed to on_text
  int32_t n_prompt = 0;
  int32_t n_preemptions = 0;    // times its KV was freed and recomputed
  int32_t n_cached_tokens = 0;  // prompt tokens its first admission took from the prefix cache
  std::vector<TokenLogprobs> logprobs;  // [tokens.size()] with RequestParams::logprobs, else empty
  int32_t n_context_shifts = 0;
  // Its tokens at the end: prompt + output minus what context shifts dropped (a conversation's
  // history to continue from). A final end-of-generation token is not among them.
  std::vector<int32_t> context;
  // Seconds from submit to the first generated token (queueing and the prompt), and from it to the end.
  double seconds_to_first_token = 0;
  double seconds_generating = 0;
};

namespace detail {
// Shared between a RequestHandle and the engine loop.
struct RequestShared {
  RequestId id = 0;
  std::atomic<bool> cancelled{false};
  std::mutex mu;
  std::condition_variable done_cv;
  bool done = false;     // guarded by mu
  RequestResult result;  // guarded by mu; written once, by the loop, before done
};
}  // namespace detail

// What submit() returns. Copyable; every copy refers to the same request. Thread-safe.
class RequestHandle {
 public:
  RequestHandle() = default;
  explicit RequestHandle(std::shared_ptr<detail::RequestShared> shared) : shared_(std::move(shared)) {}

  RequestId id() const { return shared_->id; }
  // The request leaves its batch at the loop's next step, finishing with kCancelled (unless it
  // finished already). Any thread; never blocks.
  void cancel() const { shared_->cancelled.store(true); }
  bool done() const {
    std::lock_guard lock(shared_->mu);
    return shared_->done;
  }
  // Waits at most `timeout`; true when the request has finished. Not from a sink either.
  bool wait_for(std::chrono::milliseconds timeout) const {
    std::unique_lock lock(shared_->mu);
    return shared_->done_cv.wait_for(lock, timeout, [&] { return shared_->done; });
  }
  // Blocks until the request finishes. Must not be called from a sink (the loop's thread).
  const RequestResult& wait() const {
    std::unique_lock lock(shared_->mu);
    shared_->done_cv.wait(lock, [&] { return shared_->done; });
    return shared_->result;
  }

 private:
  std::shared_ptr<detail::RequestShared> shared_;
};

}  // namespace cera::runtime
