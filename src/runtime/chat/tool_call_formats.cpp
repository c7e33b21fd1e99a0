// The JSON tool-call families: a complete call block read into calls with nlohmann json (the
// project's one JSON library). Arguments are re-serialized compactly from ordered_json, so the
// model's key order survives; only whitespace between tokens changes.
#include <nlohmann/json.hpp>

#include "runtime/chat/tool_call_parts.h"

namespace cera::runtime::chat::tool_call {
namespace {

using Json = nlohmann::ordered_json;

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

Result<Json> parse_json(std::string_view text) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument("not valid JSON");
  return j;
}

std::string dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// {"name": "f", <args_key>: {...}} (also "arguments"/"parameters" either way, and arguments
// given as a string holding a JSON object, as some fine-tunes write them).
Result<Call> call_of(const Json& j, bool with_id) {
  if (!j.is_object()) return invalid_argument("a call is not a JSON object");
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get_ref<const std::string&>().empty())
    return invalid_argument("a call has no \"name\" string");
  Call c{.name = name->get<std::string>()};
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  if (args == j.end()) {
    c.arguments = "{}";
  } else if (args->is_object()) {
    c.arguments = dump(*args);
  } else if (args->is_string()) {
    auto inner = parse_json(args->get_ref<const std::string&>());
    if (!inner.ok() || !inner->is_object())
      return invalid_argument("the arguments of '" + c.name +
                              "' are a string but not a JSON object");
    c.arguments = dump(*inner);
  } else {
    return invalid_argument("the arguments of '" + c.name + "' are not a JSON object");
  }
  if (with_id) {
    if (auto id = j.find("id"); id != j.end()) {
      if (!id->is_string()) return invalid_argument("the id of '" + c.name + "' is not a string");
      c.id = id->get<std::string>();
    }
  }
  return c;
}

Result<std::vector<Call>> calls_of_array(const Json& j, bool with_id) {
  std::vector<Call> out;
  if (j.is_object()) {  // a single call without the list brackets
    CERA_ASSIGN_OR_RETURN(Call c, call_of(j, with_id));
    out.push_back(std::move(c));
    return out;
  }
  if (!j.is_array() || j.empty()) return invalid_argument("not a non-empty JSON array of calls");
  for (const Json& e : j) {
    CERA_ASSIGN_OR_RETURN(Call c, call_of(e, with_id));
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

size_t JsonEnd::scan(std::string_view s) {
  for (; pos_ < s.size(); ++pos_) {
    const char c = s[pos_];
    if (in_string_) {
      if (escape_)
        escape_ = false;
      else if (c == '\\')
        escape_ = true;
      else if (c == '"')
        in_string_ = false;
      continue;
    }
    if (c == '"')
      in_string_ = true;
    else if (c == '{' || c == '[')
      ++depth_;
    else if ((c == '}' || c == ']') && --depth_ == 0)
      return ++pos_;
  }
  return std::string_view::npos;
}

Result<std::vector<Call>> parse_block(ToolCallFormat format, std::string_view block) {
  if (format == ToolCallFormat::kLfm2) return parse_pythonic(block);
  auto j = parse_json(trim(block));
  if (!j.ok()) return j.status();
  switch (format) {
    case ToolCallFormat::kHermes:
    case ToolCallFormat::kLlama3: {
      CERA_ASSIGN_OR_RETURN(Call c, call_of(*j, /*with_id=*/false));
      return std::vector<Call>{std::move(c)};
    }
    case ToolCallFormat::kMistral:
      return calls_of_array(*j, /*with_id=*/true);
    case ToolCallFormat::kGranite:
      return calls_of_array(*j, /*with_id=*/false);
    default:
      return invalid_argument("no tool-call format");
  }
}

}  // namespace cera::runtime::chat::tool_call
