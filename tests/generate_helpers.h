// The tests' single-sequence reference decode: a plain loop over Session's evaluation API, the
// independent path that the engine loop and LoopSession are compared against (their batching,
// scheduling, pipelining and prefix cache are not in it). It follows the loop's documented rules:
// the end of generation is not part of the output, a stop string ends the text before it (the
// earliest match wins, runtime/stop_strings.h holds back what could still become one), and a
// token that would not fit the context shifts the history (Session's append does) or, without
// context shifts, ends generation with kContextFull.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/session.h"
#include "runtime/stop_strings.h"

namespace cera::test {

struct ReferenceRun {
  runtime::GenerateResult result;
  std::vector<int32_t> tokens;  // every generated id, as RequestResult::tokens (no end-of-generation token)
  // The last id when it was sampled but not evaluated (the token limit, a full context): a
  // conversation that goes on appends it first, as the loop's context already holds it.
  std::optional<int32_t> pending;
};

// Samples from `session`'s last logits with the options' Sampler, appends each token and stops as
// the engine loop does. `sink` receives the text as it becomes final.
inline Result<ReferenceRun> reference_generate(runtime::Session& session, const runtime::GenerateOptions& gen,
                                               const runtime::TextSink& sink = {}) {
  runtime::Sampler sampler(gen.sampling);
  tokenizer::StreamDecoder decoder(session.tokenizer());
  ReferenceRun run;
  runtime::GenerateResult& r = run.result;
  std::string held;  // decoded, not yet final
  auto emit = [&](size_t n) {
    if (n == 0) return;
    if (sink) sink(std::string_view(held.data(), n));
    r.text.append(held, 0, n);
    held.erase(0, n);
  };
  r.reason = runtime::StopReason::kMaxTokens;
  while (r.n_generated < gen.max_tokens) {
    const int32_t token = session.sample_next(sampler);
    if (gen.stop_at_end_of_generation && session.tokenizer().is_end_of_generation(token)) {
      r.reason = runtime::StopReason::kEndOfGeneration;
      break;
    }
    ++r.n_generated;
    run.tokens.push_back(token);
    decoder.push(token, held);
    size_t stop_at = std::string::npos;
    for (const std::string& stop : gen.stop) {
      if (stop.empty()) continue;
      stop_at = std::min(stop_at, held.find(stop));
    }
    if (stop_at != std::string::npos) {
      held.resize(stop_at);
      emit(held.size());
      r.reason = runtime::StopReason::kStopString;
      return run;
    }
    emit(held.size() - runtime::held_suffix(held, gen.stop));
    if (r.n_generated >= gen.max_tokens) {
      run.pending = token;
      break;
    }
    if (!session.options().context_shift && static_cast<int32_t>(session.tokens().size()) + 1 > session.n_ctx()) {
      run.pending = token;
      r.reason = runtime::StopReason::kContextFull;
      break;
    }
    CERA_RETURN_IF_ERROR(session.append_tokens(std::span(&token, 1)));
  }
  decoder.finish(held);
  emit(held.size());
  return run;
}

// Sampled generation that runs past the end of generation, so that a small context shifts
// several times (the context-shift tests).
inline Result<ReferenceRun> generate_through_shifts(runtime::Session& session, int32_t max_tokens = 100) {
  return reference_generate(session, {.max_tokens = max_tokens,
                                      .sampling = {.temperature = 0.9f, .seed = 3},
                                      .stop_at_end_of_generation = false});
}

}  // namespace cera::test
