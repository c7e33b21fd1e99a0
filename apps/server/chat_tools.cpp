#include "chat_tools.h"

#include <fmt/format.h>

#include <cctype>

#include "runtime/grammar/prepare.h"

namespace cera::server {
namespace {

namespace chat = runtime::chat;

constexpr size_t kMaxTools = 128;

// OpenAI's rule for function names: 1-64 of a-z, A-Z, 0-9, _ and -.
bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

std::optional<chat::Value> to_value(const Json& json, const std::string& where, FieldReader& reader) {
  auto v = chat::parse_json(json.dump());
  if (!v.ok()) {
    reader.fail(bad_request(fmt::format("'{}' cannot be passed to the chat template: {}", where, v.status().message()),
                            where));
    return std::nullopt;
  }
  return std::move(v).value();
}

}  // namespace

std::variant<ChatTools, ApiError> read_chat_tools(const Json& body, const ServedModel& model) {
  FieldReader r(body);
  ChatTools t;
  if (const Json* kw = r.get("chat_template_kwargs"); kw != nullptr) {
    if (!kw->is_object()) {
      return bad_request(fmt::format("'chat_template_kwargs' must be an object of template variables (such as "
                                     "{{\"enable_thinking\": false}}), not {}",
                                     json_type_name(*kw)),
                         "chat_template_kwargs");
    }
    for (const auto& [key, value] : kw->items()) {
      auto v = to_value(value, "chat_template_kwargs." + key, r);
      if (!v) return *r.error();
      t.template_kwargs.set(key, std::move(*v));
    }
  }
  const Json* tools = r.get("tools");
  if (tools != nullptr && !tools->is_array()) {
    return bad_request(fmt::format("'tools' must be an array of tools, not {}", json_type_name(*tools)), "tools");
  }
  if (tools != nullptr && tools->size() > kMaxTools) {
    return bad_request(fmt::format("'tools' lists {} tools, more than the {} allowed", tools->size(), kMaxTools), "tools");
  }
  if (tools != nullptr) {
    for (size_t i = 0; i < tools->size(); ++i) {
      const Json& tool = (*tools)[i];
      const std::string where = fmt::format("tools[{}]", i);
      if (!tool.is_object()) return bad_request(fmt::format("'{}' must be an object, not {}", where, json_type_name(tool)), where);
      FieldReader tr(tool, where + ".");
      const std::optional<std::string> type = tr.string("type");
      if (tr.ok() && type != "function") {
        tr.fail("type", fmt::format("'{}.type' must be \"function\" (the only kind of tool)", where));
      }
      const Json* fn = tr.get("function");
      if (tr.ok() && (fn == nullptr || !fn->is_object())) {
        tr.fail("function", fmt::format("'{}.function' must be an object {{\"name\": ..., \"parameters\": {{...}}}}", where));
      }
      if (!tr.ok()) return *tr.error();
      FieldReader fr(*fn, where + ".function.");
      const std::optional<std::string> name = fr.string("name", 64);
      fr.string("description");
      fr.boolean("strict");
      if (fr.ok() && (!name || !valid_function_name(*name))) {
        fr.fail("name", fmt::format("'{}.function.name' must be 1 to 64 letters, digits, _ or -", where));
      }
      const Json* params = fr.get("parameters");
      if (fr.ok() && params != nullptr && !params->is_object()) {
        fr.fail("parameters", fmt::format("'{}.function.parameters' must be a JSON Schema object, not {}", where,
                                          json_type_name(*params)));
      }
      if (!fr.ok()) return *fr.error();
      for (const chat::ToolSpec& s : t.specs) {
        if (s.name == *name) return bad_request(fmt::format("'{}': a second tool named '{}'", where, *name), where);
      }
      t.specs.push_back({.name = *name, .parameters = params != nullptr ? params->dump() : ""});
    }
    if (!t.specs.empty()) {
      auto v = to_value(*tools, "tools", r);
      if (!v) return *r.error();
      t.for_template = std::move(*v);
    }
  }
  t.choice = t.specs.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  if (const Json* choice = r.get("tool_choice"); choice != nullptr) {
    if (choice->is_string()) {
      const auto& s = choice->get_ref<const std::string&>();
      if (s == "none") t.choice = ToolChoice::kNone;
      else if (s == "auto") t.choice = ToolChoice::kAuto;
      else if (s == "required") t.choice = ToolChoice::kRequired;
      else {
        return bad_request(fmt::format("'tool_choice' is '{}': it must be none, auto, required or "
                                       "{{\"type\": \"function\", \"function\": {{\"name\": ...}}}}",
                                       s.substr(0, 40)),
                           "tool_choice");
      }
    } else if (choice->is_object()) {
      const Json* fn = choice->contains("function") ? &(*choice)["function"] : nullptr;
      if (fn == nullptr || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string()) {
        return bad_request("'tool_choice' must name a function: {\"type\": \"function\", \"function\": {\"name\": ...}}",
                           "tool_choice");
      }
      t.choice = ToolChoice::kNamed;
      t.named = (*fn)["name"].get<std::string>();
      bool offered = false;
      for (const chat::ToolSpec& s : t.specs) offered = offered || s.name == t.named;
      if (!offered) {
        return bad_request(fmt::format("'tool_choice' names '{}', which is not among 'tools'", t.named.substr(0, 64)),
                           "tool_choice");
      }
    } else {
      return bad_request(fmt::format("'tool_choice' must be a string or an object, not {}", json_type_name(*choice)),
                         "tool_choice");
    }
    if (t.choice != ToolChoice::kNone && t.specs.empty()) {
      return bad_request("'tool_choice' asks for a tool call but 'tools' offers none", "tool_choice");
    }
  }
  t.parallel = r.boolean("parallel_tool_calls").value_or(true);
  if (!r.ok()) return *r.error();
  if (t.choice != ToolChoice::kNone && model.chat_template &&
      chat::tool_call_format_of(model.chat_template->source()) == chat::ToolCallFormat::kNone) {
    return bad_request("this model's chat template writes no tool calls cera can parse (families: Hermes/Qwen "
                       "<tool_call>, Llama 3 JSON, LFM2, Mistral [TOOL_CALLS], Granite): start the server with "
                       "--chat-template-file to give it one that does, or send tool_choice \"none\"",
                       "tools", "tools_unsupported");
  }
  return t;
}

std::optional<chat::Value> template_tool_calls(const Json& calls, const std::string& where, FieldReader& reader) {
  if (!calls.is_array()) {
    reader.fail(bad_request(fmt::format("'{}' must be an array of tool calls, not {}", where, json_type_name(calls)), where));
    return std::nullopt;
  }
  chat::Array out;
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string at = fmt::format("{}[{}]", where, i);
    const Json& call = calls[i];
    const Json* fn = call.is_object() && call.contains("function") ? &call["function"] : nullptr;
    if (fn == nullptr || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string()) {
      reader.fail(bad_request(fmt::format("'{}' must be {{\"id\": ..., \"type\": \"function\", \"function\": "
                                          "{{\"name\": ..., \"arguments\": \"{{...}}\"}}}}",
                                          at),
                              at));
      return std::nullopt;
    }
    chat::Value arguments = chat::Object{};
    if (fn->contains("arguments") && !(*fn)["arguments"].is_null()) {
      const Json& a = (*fn)["arguments"];
      // OpenAI sends a JSON string; a client may also send the object itself.
      auto parsed = a.is_string() ? chat::parse_json(a.get_ref<const std::string&>()) : chat::parse_json(a.dump());
      if (!parsed.ok() || !parsed->is_object()) {
        reader.fail(bad_request(fmt::format("'{}.function.arguments' must be a JSON object (as a string){}", at,
                                            parsed.ok() ? "" : ": " + parsed.status().message()),
                                at + ".function.arguments"));
        return std::nullopt;
      }
      arguments = std::move(parsed).value();
    }
    chat::Object f;
    f.set("name", chat::Value((*fn)["name"].get<std::string>()));
    f.set("arguments", std::move(arguments));
    chat::Object c;
    if (call.contains("id") && call["id"].is_string()) c.set("id", chat::Value(call["id"].get<std::string>()));
    c.set("type", chat::Value("function"));
    c.set("function", chat::Value(std::move(f)));
    out.push_back(chat::Value(std::move(c)));
  }
  return chat::Value(std::move(out));
}

std::optional<ApiError> prepare_tool_output(const ChatTools& tools, const ServedModel& model,
                                            const std::string& prompt_text, runtime::RequestParams& params,
                                            chat::OutputParserOptions& parser) {
  if (!model.chat_template) return std::nullopt;
  const std::string& source = model.chat_template->source();
  parser.reasoning = source.find("<think>") != std::string::npos && source.find("</think>") != std::string::npos;
  if (parser.reasoning) {
    std::string_view tail = prompt_text;
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.remove_suffix(1);
    parser.prompt_opened_think = tail.ends_with("<think>");
  }
  if (tools.choice == ToolChoice::kNone) return std::nullopt;
  parser.format = chat::tool_call_format_of(source);
  parser.tools = true;
  params.render_special_tokens = true;  // the markers of calls are control tokens in most families
  if (params.grammar.tables != nullptr) {
    return bad_request("'response_format' cannot be combined with tool calls: send tool_choice \"none\" or no "
                       "response_format",
                       "response_format");
  }
  const chat::ToolConstraint constraint{
      .name = tools.choice == ToolChoice::kNamed ? std::optional<std::string>(tools.named) : std::nullopt,
      .parallel = tools.parallel};
  std::vector<int32_t> trigger_tokens;
  const std::string trigger(chat::tool_call_trigger(parser.format));
  if (tools.choice == ToolChoice::kAuto) {
    if (trigger.empty() || chat::tool_call_trigger_only_at_start(parser.format)) return std::nullopt;
    trigger_tokens = model.tokenizer().encode(trigger, {.parse_special = true});
    if (trigger_tokens.size() != 1) return std::nullopt;  // not one token: parsed, not constrained
  }
  auto gbnf = chat::tool_call_gbnf(parser.format, tools.specs, constraint);
  if (!gbnf.ok()) return bad_request("'tools' cannot be enforced: " + gbnf.status().message(), "tools", "invalid_tool_schema");
  auto prepared = runtime::grammar::prepare_grammar(runtime::grammar::GrammarSyntax::kGbnf, *gbnf, model.vocab);
  if (!prepared.ok()) {
    return bad_request("'tools' cannot be enforced: " + prepared.status().message(), "tools", "invalid_tool_schema");
  }
  params.grammar.tables = prepared->tables;
  if (!trigger_tokens.empty()) {
    params.grammar.trigger_tokens = std::move(trigger_tokens);
    params.grammar.trigger_text = trigger;
  }
  return std::nullopt;
}

}  // namespace cera::server
