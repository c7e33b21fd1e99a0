// A LoopSession is one conversation whose generation runs through the engine loop, the one
// generation path every front end shares (`cera run`, `cera chat`, `cera bench`). It holds the
// conversation's token history and nothing of the model: each generate() submits the whole
// history as one request (RequestParams::context_shift set from its n_keep) and takes the
// request's final context back as the history. The KV of earlier turns is not recomputed: the
// prefix cache hands the history's full blocks to the next request, so a turn computes its new
// tokens and at most one block more. The non-obvious decision: text appended to a full history
// shifts it here, at the token level (Session's rule: keep n_keep, drop half the rest, or more if
// the new text needs it), and the loop then recomputes what follows the kept tokens: a shifted
// history has no cached blocks past them, so the result is the same as for a fresh conversation
// with that history (Session shifted the cached K/V in place instead).
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/engine/engine_loop.h"
#include "runtime/generate_types.h"
#include "tokenizer/tokenizer.h"

namespace cera::runtime {

struct LoopSessionOptions {
  int32_t n_keep = 0;          // tokens kept at the start on a context shift (-1: the whole first append)
  bool context_shift = true;   // false: a full context ends generation with kContextFull
  // A first prompt longer than the context: false refuses it (the error says the lengths); true
  // keeps its first n_keep tokens (at least BOS) and its last (n_ctx - those) / 2 tokens.
  bool truncate_long_prompt = false;
};

class LoopSession {
 public:
  // The loop and tokenizer must outlive the session. Several sessions may share one loop.
  LoopSession(EngineLoop& loop, const tokenizer::Tokenizer& tokenizer, const LoopSessionOptions& options);

  // Tokenizes text and appends it to the history (nothing is evaluated before generate()). BOS
  // and other add_special tokens only while the history is empty. Errors: the text can never fit
  // the context (naming both lengths), unless a first prompt may be truncated.
  Status append_text(std::string_view text, const tokenizer::EncodeOptions& options);
  Status append_tokens(std::span<const int32_t> tokens);

  // Submits the history and streams the reply through sink until a stop. Any thread but the loop's.
  Result<GenerateResult> generate(const GenerateOptions& options, const TextSink& sink);
  // Stops a generate() in progress at the loop's next step (any thread; async-signal-safe: it
  // only stores a flag, which generate() polls).
  void cancel();

  const std::vector<int32_t>& tokens() const { return tokens_; }
  int32_t n_ctx() const { return loop_->n_ctx(); }
  const SessionStats& stats() const { return stats_; }
  void reset();  // forgets the history (not the stats)

 private:
  // Makes room for n more tokens: a history shift, or the truncation of a first prompt (into
  // `storage`). Returns the tokens to append.
  Result<std::span<const int32_t>> fit(std::span<const int32_t> tokens, std::vector<int32_t>& storage);

  EngineLoop* loop_;
  const tokenizer::Tokenizer* tokenizer_;
  LoopSessionOptions options_;
  int32_t n_keep_ = 0;  // resolved at the first append
  std::vector<int32_t> tokens_;
  SessionStats stats_;
  std::atomic<bool> cancel_requested_{false};
};

}  // namespace cera::runtime
