// The two generation routes' request bodies (OpenAI's chat completions and legacy completions)
// read into a CompletionJob: the prompt's token ids and the engine loop's RequestParams, every
// field type- and range-checked with errors naming it. The one decision: a chat prompt is the
// model's own template rendered as `cera chat` renders it, and text inside messages stays text:
// control-token texts in it are tokenized as characters unless the server allows them
// (ChatTemplate::render_prompt's plain ranges), so a user cannot forge another role's turn.
#pragma once

#include <cstdint>
#include <variant>
#include <vector>

#include "api_error.h"
#include "chat_tools.h"
#include "request_json.h"
#include "runtime/chat/tool_calls.h"
#include "runtime/engine/request.h"
#include "served_model.h"

namespace cera::server {

enum class Endpoint : uint8_t { kChat, kCompletion };

inline constexpr int32_t kMaxChoices = 16;      // n
inline constexpr int32_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopBytes = 1024;

struct CompletionJob {
  Endpoint endpoint = Endpoint::kChat;
  // Every choice's request: prompt, sampling, limits; choice i draws with seed + i.
  runtime::RequestParams params;
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Chat: the output is split into content, reasoning_content and tool_calls (chat_tools.h)
  // when `output.tools` or `output.reasoning`; else it is all content.
  runtime::chat::OutputParserOptions output;
  bool parses_output() const { return endpoint == Endpoint::kChat && (output.tools || output.reasoning); }
};

std::variant<CompletionJob, ApiError> read_completion_job(Endpoint endpoint, const Json& body, const ServedModel& model);

// The token ids of a chat prompt exactly as /v1/chat/completions builds them (`messages` in
// OpenAI's shape, with the request's tools and template variables), for /tokenize too. Errors go
// to `reader`; empty on error. `prompt_text`: the rendered prompt, when wanted.
std::vector<int32_t> chat_prompt_tokens(const Json& messages, const ServedModel& model, FieldReader& reader,
                                        const ChatTools& tools = {}, std::string* prompt_text = nullptr);

}  // namespace cera::server
