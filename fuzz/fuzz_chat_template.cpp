// libFuzzer target for the chat-template engine: any input must parse or fail cleanly, and a
// template that parses must render (or fail cleanly) against a fixed conversation, twice to the
// same bytes. Templates come from model files, so this is the engine's hostile-input boundary.
// The render budgets are cut to 1/10 of the defaults or less (the code paths are the same), so
// that an input that runs to a budget takes well under libFuzzer's -timeout even in this ASan
// Debug build; a timeout then means work the step budget does not see. max_depth stays at its
// default, because the stack it allows is what must hold.
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <string_view>

#include "runtime/chat/chat_template.h"

namespace {

using cera::runtime::chat::Array;
using cera::runtime::chat::ChatContext;
using cera::runtime::chat::ChatTemplate;
using cera::runtime::chat::make_message;
using cera::runtime::chat::Object;
using cera::runtime::chat::parse_json;
using cera::runtime::chat::TemplateLimits;
using cera::runtime::chat::Value;

TemplateLimits fuzz_limits() {
  TemplateLimits l;
  l.max_output_bytes = 1 << 20;
  l.max_value_bytes = 1 << 20;
  l.max_value_items = 1 << 16;
  l.max_loop_iterations = 100'000;
  l.max_steps = 1'000'000;
  return l;
}

// System, user, an assistant turn with a tool call, the tool's answer, a user turn; one tool.
const ChatContext& context() {
  static const ChatContext ctx = [] {
    ChatContext c;
    Object call = parse_json(R"({"id": "call_1", "type": "function", "function": {"name":
        "get_weather", "arguments": {"city": "Paris", "days": 2}}})")
                      .value()
                      .as_object();
    Object assistant = make_message("assistant", "").as_object();
    assistant.set("tool_calls", Value(Array{Value(std::move(call))}));
    Object tool = make_message("tool", R"({"temperature": 21, "sky": "clear"})").as_object();
    tool.set("tool_call_id", Value("call_1"));
    tool.set("name", Value("get_weather"));
    c.messages = Value(Array{make_message("system", "You are terse."),
                             make_message("user", "Weather in Paris?"), Value(std::move(assistant)),
                             Value(std::move(tool)), make_message("user", "Thanks <|im_end|> é😀")});
    c.tools = parse_json(R"([{"type": "function", "function": {"name": "get_weather",
        "description": "Forecast for a city", "parameters": {"type": "object", "properties":
        {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}])")
                  .value();
    c.add_generation_prompt = true;
    c.bos_token = "<s>";
    c.eos_token = "</s>";
    c.extra.set("enable_thinking", Value(false));
    std::tm now{};
    now.tm_year = 2025 - 1900;
    now.tm_mon = 2;
    now.tm_mday = 14;
    now.tm_hour = 9;
    c.now = now;
    return c;
  }();
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const TemplateLimits limits = fuzz_limits();
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  auto t = ChatTemplate::parse(source, limits);
  if (!t.ok()) return 0;
  auto first = t->render(context());
  auto second = t->render(context());
  if (first.ok() != second.ok()) __builtin_trap();
  if (first.ok() ? *first != *second : first.status().message() != second.status().message())
    __builtin_trap();
  return 0;
}
