#include "runtime/engine/loop_session.h"

#include <algorithm>
#include <chrono>

#include "runtime/prompt_truncation.h"

namespace cera::runtime {
namespace {

StopReason stop_reason_of(FinishReason r) {
  switch (r) {
    case FinishReason::kEndOfGeneration: return StopReason::kEndOfGeneration;
    case FinishReason::kMaxTokens: return StopReason::kMaxTokens;
    case FinishReason::kStopString: return StopReason::kStopString;
    case FinishReason::kCancelled: return StopReason::kCancelled;
    case FinishReason::kContextFull: return StopReason::kContextFull;
    case FinishReason::kError: break;  // generate() returns the status instead
  }
  return StopReason::kCancelled;
}

}  // namespace

LoopSession::LoopSession(EngineLoop& loop, const tokenizer::Tokenizer& tokenizer, const LoopSessionOptions& options)
    : loop_(&loop), tokenizer_(&tokenizer), options_(options) {}

Status LoopSession::append_text(std::string_view text, const tokenizer::EncodeOptions& options) {
  tokenizer::EncodeOptions enc = options;
  enc.add_special = options.add_special && tokens_.empty();
  const std::vector<int32_t> ids = tokenizer_->encode(text, enc);
  return append_tokens(ids);
}

Status LoopSession::append_tokens(std::span<const int32_t> tokens) {
  const bool first = tokens_.empty();
  std::vector<int32_t> storage;
  CERA_ASSIGN_OR_RETURN(const std::span<const int32_t> fitted, fit(tokens, storage));
  tokens_.insert(tokens_.end(), fitted.begin(), fitted.end());
  if (first) {
    const int32_t half = n_ctx() / 2;
    n_keep_ = options_.n_keep < 0 ? std::min<int32_t>(static_cast<int32_t>(tokens_.size()), half)
                                  : std::min<int32_t>(options_.n_keep, half);
  }
  return {};
}

Result<std::span<const int32_t>> LoopSession::fit(std::span<const int32_t> tokens, std::vector<int32_t>& storage) {
  const int64_t n_ctx = this->n_ctx();
  const auto len = static_cast<int64_t>(tokens_.size());
  const auto n = static_cast<int64_t>(tokens.size());
  if (len + n <= n_ctx) return tokens;
  const int64_t keep = std::min<int64_t>(n_keep_, len);
  const std::string sizes = std::to_string(n) + " tokens";
  if (len > 0 && n <= n_ctx - keep) {
    if (!options_.context_shift) {
      return out_of_range("context is full: the " + std::to_string(len) + " tokens in it and " + sizes +
                          " more exceed the context size of " + std::to_string(n_ctx) +
                          " tokens; use a larger context or allow context shifts");
    }
    // One shift for the whole append: llama.cpp's half of the unkept history, or more if needed.
    const int64_t discard = std::max((len - keep) / 2, len + n - n_ctx);
    tokens_.erase(tokens_.begin() + keep, tokens_.begin() + keep + discard);
    ++stats_.n_context_shifts;
    return tokens;
  }
  std::string why = (len == 0 ? "the prompt is " + sizes : "the new text is " + sizes + " (with " + std::to_string(keep) +
                                                               " kept tokens of the conversation)") +
                    ", longer than the context of " + std::to_string(n_ctx) + " tokens";
  if (len > 0 || !options_.truncate_long_prompt) {
    return out_of_range(why + ": use a larger context" +
                        (len > 0 ? std::string() : std::string(", or let long prompts be truncated")) +
                        ", or shorten the text");
  }
  stats_.n_prompt_tokens_dropped += truncate_long_prompt(tokens, n_ctx, options_.n_keep, tokenizer_->bos(), storage);
  return std::span<const int32_t>(storage);
}

Result<GenerateResult> LoopSession::generate(const GenerateOptions& options, const TextSink& sink) {
  if (tokens_.empty()) return invalid_argument("nothing to continue from: append a prompt (or BOS) first");
  // A reply that ended on the full context (by its token limit, or kContextFull) left one token
  // more than the context holds: make room as an append of nothing would (a shift, or the error).
  std::vector<int32_t> unused;
  CERA_RETURN_IF_ERROR(fit({}, unused).status());
  RequestParams p{.prompt = tokens_,
                  .sampling = options.sampling,
                  .max_tokens = options.max_tokens,
                  .stop = options.stop,
                  .stop_at_end_of_generation = options.stop_at_end_of_generation};
  if (sink) p.on_text = [&sink](std::string_view text) { sink(text); };
  p.grammar.tables = options.grammar;
  p.context_shift = {.enabled = options_.context_shift, .n_keep = n_keep_};
  cancel_requested_.store(false);
  CERA_ASSIGN_OR_RETURN(const RequestHandle h, loop_->submit(std::move(p)));
  // cancel() may come from a signal handler, which may only store a flag: the request is
  // cancelled from here, polled while it runs.
  while (!h.wait_for(std::chrono::milliseconds(20))) {
    if (cancel_requested_.load()) h.cancel();
  }
  const RequestResult& r = h.wait();
  CERA_RETURN_IF_ERROR(r.status);
  GenerateResult out{.reason = stop_reason_of(r.reason), .n_generated = static_cast<int32_t>(r.tokens.size()), .text = r.text};
  stats_.n_prompt_tokens += r.n_prompt - r.n_cached_tokens;
  stats_.prompt_seconds += r.seconds_to_first_token;
  stats_.n_generated_tokens += out.n_generated;
  stats_.generation_seconds += r.seconds_generating;
  stats_.n_context_shifts += r.n_context_shifts;
  tokens_ = r.context;
  return out;
}

void LoopSession::cancel() { cancel_requested_.store(true); }

void LoopSession::reset() { tokens_.clear(); }

}  // namespace cera::runtime
