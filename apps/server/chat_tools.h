// OpenAI's tool calling for /v1/chat/completions: `tools`, `tool_choice`, `parallel_tool_calls`
// and `chat_template_kwargs` read and checked; the grammar a tool choice implies; and the output
// parser options (runtime/chat/tool_calls.h) that turn the model's text into content,
// reasoning_content and tool_calls. The decisions:
// - tool_choice "required" or a named function constrains generation from the first token to
//   well-formed calls of the offered tools (tool_call_gbnf); "auto" constrains lazily: free text
//   until the model writes its family's call marker as one token, the grammar after it. Where
//   the marker is not one token of the vocabulary (or the family has none, as Llama 3), "auto"
//   is parsed but not constrained.
// - Tools are refused unless the chat template renders calls cera can parse (a family of
//   tool_call_format_of); `cera serve --chat-template-file` can supply such a template.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "api_error.h"
#include "request_json.h"
#include "runtime/chat/tool_calls.h"
#include "runtime/chat/value.h"
#include "runtime/engine/request.h"
#include "served_model.h"

namespace cera::server {

enum class ToolChoice : uint8_t { kNone, kAuto, kRequired, kNamed };

struct ChatTools {
  std::vector<runtime::chat::ToolSpec> specs;                           // empty: no tools
  runtime::chat::Value for_template = runtime::chat::Value::none();     // `tools` as the template reads it
  ToolChoice choice = ToolChoice::kNone;
  std::string named;     // kNamed: the function
  bool parallel = true;  // parallel_tool_calls
  runtime::chat::Object template_kwargs;  // chat_template_kwargs (enable_thinking, ...)
};

// The request's tools and template variables; errors (400) name the field.
std::variant<ChatTools, ApiError> read_chat_tools(const Json& body, const ServedModel& model);

// A message's `tool_calls` (OpenAI's shape, arguments as a JSON string) as templates read them:
// [{"id", "type": "function", "function": {"name", "arguments": {...}}}] with the arguments
// parsed (transformers' convention). Errors go to `reader` under `where`.
std::optional<runtime::chat::Value> template_tool_calls(const Json& calls, const std::string& where, FieldReader& reader);

// What generation and the response need: the parser options (tools and reasoning), and on
// `params` the grammar of the tool choice and rendered control tokens. `prompt_text`: the
// rendered prompt (whether it opened a <think> block).
std::optional<ApiError> prepare_tool_output(const ChatTools& tools, const ServedModel& model,
                                            const std::string& prompt_text, runtime::RequestParams& params,
                                            runtime::chat::OutputParserOptions& parser);

}  // namespace cera::server
