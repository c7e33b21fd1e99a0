// Response bodies of the generation routes in OpenAI's shapes: whole responses, streamed chunks,
// usage and log-probabilities, for chat completions and legacy completions alike. The one
// decision: a logprob's token text is its decoded bytes (`bytes` exact; `token` with U+FFFD in
// place of a partial UTF-8 character), as OpenAI reports tokens that split a character.
#pragma once

#include <string>
#include <vector>

#include "openai_request.h"
#include "request_json.h"
#include "runtime/engine/request.h"
#include "served_model.h"

namespace cera::server {

// The identity every chunk of one response repeats.
struct ResponseId {
  std::string id;  // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;
  std::string model;
};
ResponseId new_response_id(Endpoint endpoint, const ServedModel& model);

// "stop" or "length" ("tool_calls" when the choice made calls and stopped); null for a
// cancelled or failed choice.
Json finish_reason_json(runtime::FinishReason reason, bool made_tool_calls = false);

// Chat deltas for parsed output pieces: consecutive content (or reasoning) fragments merged into
// one {"content"} ({"reasoning_content"}), each tool call its own {"tool_calls": [{index, id,
// type, function: {name, arguments}}]}, in output order.
std::vector<Json> chat_deltas(const std::vector<runtime::chat::OutputDelta>& deltas);
Json usage_json(int32_t n_prompt, int64_t n_completion, int32_t n_cached);

// Chat: {"content": [{token, logprob, bytes, top_logprobs}]}.
Json chat_logprobs(const std::vector<runtime::TokenLogprobs>& logprobs, const tokenizer::Tokenizer& tokenizer);
// Completions: {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}; offsets
// start at `text_offset` (bytes of the choice's text before these tokens).
Json completion_logprobs(const std::vector<runtime::TokenLogprobs>& logprobs, const tokenizer::Tokenizer& tokenizer,
                         size_t text_offset);

// The whole non-streamed response for the choices' results ([n]).
Json full_response(const CompletionJob& job, const ResponseId& id, const std::vector<runtime::RequestResult>& results,
                   const tokenizer::Tokenizer& tokenizer);

// One streamed chunk for choice `index`: its new text (and logprobs), its role on the first chat
// chunk, its finish reason on the last. `text_offset`: completions' logprob offsets.
struct ChunkContent {
  int32_t index = 0;
  bool first = false;  // chat: the delta carries the role
  std::string text;
  const std::vector<runtime::TokenLogprobs>* logprobs = nullptr;  // with logprobs requested
  size_t text_offset = 0;
  const runtime::RequestResult* result = nullptr;  // the last chunk
  const Json* delta = nullptr;  // chat: this delta (chat_deltas) instead of {"content": text}
  bool made_tool_calls = false;  // with result: the choice's finish reason is "tool_calls"
};
Json stream_chunk(const CompletionJob& job, const ResponseId& id, const ChunkContent& content,
                  const tokenizer::Tokenizer& tokenizer);
// The usage chunk (stream_options.include_usage): no choices.
Json usage_chunk(const CompletionJob& job, const ResponseId& id, int64_t n_completion, int32_t n_cached);

}  // namespace cera::server
