// What a generation is asked and what it reports, shared by every front end's conversation
// (LoopSession over the engine loop) and by the CLI: options, the reason it stopped, counters, and
// the sink its text streams to. Plain data only, so that these do not depend on who generates.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/sampler.h"

namespace cera::runtime {

namespace grammar {
class TokenTables;
}

enum class StopReason { kEndOfGeneration, kMaxTokens, kStopString, kCancelled, kContextFull };

inline const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::kEndOfGeneration: return "end of generation";
    case StopReason::kMaxTokens: return "token limit";
    case StopReason::kStopString: return "stop string";
    case StopReason::kCancelled: return "cancelled";
    case StopReason::kContextFull: return "context full";
  }
  return "?";
}

struct GenerateOptions {
  int32_t max_tokens = 128;
  SamplingParams sampling;
  std::vector<std::string> stop;  // generation ends before any of these strings is emitted
  bool stop_at_end_of_generation = true;
  // Constrains the reply to the grammar (RequestParams::grammar: grammar/prepare.h makes them for
  // a tokenizer); null: free text.
  std::shared_ptr<const grammar::TokenTables> grammar;
};

// Counters since a conversation was created (prompt = tokens evaluated; generation = sampled
// tokens, counted by whoever generates: LoopSession; a Session only evaluates).
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

}  // namespace cera::runtime
