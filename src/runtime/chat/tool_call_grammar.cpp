// tool_call_gbnf: one grammar for "a call of one of these tools" in a family's syntax. Each
// tool's arguments come from grammar::json_schema_to_gbnf, whose output names its rules freely
// (root, value, string, r0, ...); so several schemas can share one grammar, every rule name in
// a tool's converted text is prefixed with "t<index>-" (a small GBNF lexer that leaves string
// literals, character classes and repetition counts alone). The converter has no prefix hook.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "runtime/chat/tool_call_parts.h"

namespace cera::runtime::chat {
namespace {

using Json = nlohmann::ordered_json;

bool is_name_char(char c) {  // GBNF rule-name characters (gbnf_parser.cpp)
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

// `gbnf` with every rule name (definitions and references) prefixed.
std::string prefix_rules(std::string_view gbnf, std::string_view prefix) {
  std::string out;
  for (size_t i = 0; i < gbnf.size();) {
    const char c = gbnf[i];
    if (c == '"' || c == '[') {  // literal or class: copy through its closing quote/bracket
      const char close = c == '"' ? '"' : ']';
      size_t j = i + 1;
      while (j < gbnf.size() && gbnf[j] != close) j += gbnf[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, gbnf.size());
      out.append(gbnf.substr(i, j - i));
      i = j;
    } else if (c == '{' || c == '#') {  // repetition count / comment
      const size_t j = std::min(gbnf.find(c == '{' ? '}' : '\n', i), gbnf.size());
      out.append(gbnf.substr(i, j - i));
      i = j;
    } else if (is_name_char(c)) {
      size_t j = i;
      while (j < gbnf.size() && is_name_char(gbnf[j])) ++j;
      out.append(prefix).append(gbnf.substr(i, j - i));
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

// A GBNF string literal matching exactly `bytes`.
std::string literal(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\')
      out += '\\', out += static_cast<char>(c);
    else if (c < 0x20 || c == 0x7F)
      out += "\\x", out += kHex[c >> 4], out += kHex[c & 15];
    else
      out += static_cast<char>(c);
  }
  return out + "\"";
}

std::string json_string_literal(std::string_view s) {
  return literal(Json(std::string(s)).dump());
}

const char* kPythonRules =
    "py-value ::= py-string | py-number | \"True\" | \"False\" | \"None\" | py-list | py-tuple | "
    "py-dict\n"
    "py-string ::= \"\\\"\" ( [^\"\\\\\\n] | \"\\\\\" [^\\n] )* \"\\\"\" | \"'\" ( [^'\\\\\\n] | "
    "\"\\\\\" [^\\n] )* \"'\"\n"
    "py-integer ::= \"-\"? ( \"0\" | [1-9] [0-9]* )\n"
    "py-number ::= py-integer ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]+ )?\n"
    "py-list ::= \"[\" tc-ws ( py-value ( tc-ws \",\" tc-ws py-value )* )? tc-ws \"]\"\n"
    "py-tuple ::= \"(\" tc-ws ( py-value ( tc-ws \",\" tc-ws py-value )* )? tc-ws \")\"\n"
    "py-dict ::= \"{\" tc-ws ( py-string tc-ws \":\" tc-ws py-value ( tc-ws \",\" tc-ws py-string "
    "tc-ws \":\" tc-ws py-value )* )? tc-ws \"}\"\n";

// The Python value rule for one property's schema (see tool_calls.h for what is checked).
std::string python_value(const Json& schema) {
  if (!schema.is_object()) return "py-value";
  if (auto e = schema.find("enum"); e != schema.end() && e->is_array() && !e->empty()) {
    std::string alts;
    for (const Json& v : *e) {
      if (!v.is_string()) return "py-value";
      const std::string& s = v.get_ref<const std::string&>();
      if (s.find_first_of("\"'\\\n") != std::string::npos) return "py-string";
      alts +=
          (alts.empty() ? "" : " | ") + literal("\"" + s + "\"") + " | " + literal("'" + s + "'");
    }
    return "( " + alts + " )";
  }
  auto type = schema.find("type");
  if (type == schema.end()) return "py-value";
  std::vector<std::string> names;
  if (type->is_string())
    names.push_back(type->get<std::string>());
  else if (type->is_array())
    for (const Json& t : *type) names.push_back(t.is_string() ? t.get<std::string>() : "");
  std::string alts;
  for (const std::string& n : names) {
    std::string r = n == "string"    ? "py-string"
                    : n == "integer" ? "py-integer"
                    : n == "number"  ? "py-number"
                    : n == "boolean" ? "( \"True\" | \"False\" )"
                    : n == "null"    ? "\"None\""
                                     : "";
    if (r.empty()) return "py-value";  // objects, arrays, unknown types: any literal
    alts += (alts.empty() ? "" : " | ") + r;
  }
  return alts.empty() ? "py-value" : "( " + alts + " )";
}

// LFM2: `name(k=v, ...)` with the schema's properties in order, required ones present.
// first-k: nothing written yet; next-k: a property was written, so the next needs a comma.
Result<std::string> python_call_rules(const Json& schema, const std::string& p,
                                      std::string_view name) {
  std::vector<std::pair<std::string, std::string>> props;  // name, value rule
  std::vector<bool> required;
  if (auto ps = schema.find("properties"); ps != schema.end() && ps->is_object())
    for (const auto& [k, v] : ps->items()) props.emplace_back(k, python_value(v));
  auto req = schema.find("required");
  for (const auto& [k, v] : props)
    required.push_back(req != schema.end() && req->is_array() &&
                       std::find(req->begin(), req->end(), k) != req->end());
  std::string rules;
  const size_t n = props.size();
  for (size_t k = n + 1; k-- > 0;) {
    const std::string f = p + "first-" + std::to_string(k), x = p + "next-" + std::to_string(k);
    if (k == n) {
      rules += f + " ::= \"\"\n" + x + " ::= \"\"\n";
      continue;
    }
    const std::string prop = literal(props[k].first) + " tc-ws \"=\" tc-ws " + props[k].second;
    const std::string nx = p + "next-" + std::to_string(k + 1),
                      nf = p + "first-" + std::to_string(k + 1);
    const std::string with = "tc-ws \",\" tc-ws " + prop + " " + nx;
    rules += x + " ::= " + (required[k] ? with : "( " + with + " ) | " + nx) + "\n";
    rules += f + " ::= " + (required[k] ? prop + " " + nx : "( " + prop + " " + nx + " ) | " + nf) +
             "\n";
  }
  rules += p + "call ::= " + literal(name) + " tc-ws \"(\" tc-ws " + p + "first-0 tc-ws \")\"\n";
  return rules;
}

// `{"name": NAME, <key>: ARGS[, "id": "<9 alphanumerics>"]}` as GBNF.
std::string json_call(std::string_view name, std::string_view args_key,
                      const std::string& args_rule, bool id) {
  auto key = [](std::string_view k) {
    return literal("\"" + std::string(k) + "\"") + " tc-ws \":\" tc-ws ";
  };
  std::string s = "\"{\" tc-ws " + key("name") + json_string_literal(name) + " tc-ws \",\" tc-ws " +
                  key(args_key) + args_rule;
  if (id) s += " tc-ws \",\" tc-ws " + key("id") + "\"\\\"\" [a-zA-Z0-9]{9} \"\\\"\"";
  return s + " tc-ws \"}\"";
}

}  // namespace

Result<std::string> tool_call_gbnf(ToolCallFormat format, const std::vector<ToolSpec>& tools,
                                   const ToolConstraint& constraint) {
  if (format == ToolCallFormat::kNone)
    return invalid_argument("tool_call_gbnf: the template has no tool-call format");
  std::vector<const ToolSpec*> chosen;
  for (const ToolSpec& t : tools)
    if (!constraint.name || t.name == *constraint.name) chosen.push_back(&t);
  if (chosen.empty()) {
    return invalid_argument(constraint.name
                                ? "tool_call_gbnf: no tool named '" + *constraint.name + "'"
                                : std::string("tool_call_gbnf: no tools"));
  }
  const int max_ws = constraint.json.whitespace == grammar::JsonWhitespace::kCompact
                         ? 0
                         : constraint.json.max_whitespace;
  std::string rules = "tc-ws ::= [ \\t\\n]{0," + std::to_string(max_ws) + "}\n";
  std::string alts;
  for (size_t i = 0; i < chosen.size(); ++i) {
    const ToolSpec& t = *chosen[i];
    const std::string p = "t" + std::to_string(i) + "-";
    // No schema: any object (an absent additionalProperties would mean "no properties").
    const std::string schema =
        t.parameters.empty() ? R"({"type":"object","additionalProperties":true})" : t.parameters;
    std::string call;
    if (format == ToolCallFormat::kLfm2) {
      Json j = Json::parse(schema, nullptr, false);
      if (j.is_discarded() || !j.is_object())
        return invalid_argument("tool_call_gbnf: the parameters of '" + t.name +
                                "' are not a JSON object");
      CERA_ASSIGN_OR_RETURN(std::string r, python_call_rules(j, p, t.name));
      rules += r;
      call = p + "call";
    } else {
      auto args = grammar::json_schema_to_gbnf(schema, constraint.json);
      if (!args.ok())
        return args.status().with_context("tool_call_gbnf: the parameters of '" + t.name + "'");
      rules += prefix_rules(*args, p);
      const bool llama = format == ToolCallFormat::kLlama3;
      rules += p + "call ::= " +
               json_call(t.name, llama ? "parameters" : "arguments", p + "root",
                         format == ToolCallFormat::kMistral) +
               "\n";
      call = p + "call";
    }
    alts += (alts.empty() ? "" : " | ") + call;
  }
  rules += "tc-call ::= " + alts + "\n";
  if (format == ToolCallFormat::kLfm2) rules += kPythonRules;

  // With parallel_tool_calls, `x` followed by any number of (separator, x).
  auto many = [&](const std::string& x, const std::string& sep) {
    return constraint.parallel ? x + " ( " + sep + " " + x + " )*" : x;
  };
  std::string root;
  switch (format) {
    case ToolCallFormat::kHermes:
      rules += "tc-block ::= \"<tool_call>\" tc-ws tc-call tc-ws \"</tool_call>\"\n";
      root = many("tc-block", "tc-ws");
      break;
    case ToolCallFormat::kLlama3:
      root = "\"<|python_tag|>\"? " + many("tc-call", "tc-ws \";\" tc-ws");
      break;
    case ToolCallFormat::kLfm2:
      root =
          "\"<|tool_call_start|>[\" " + many("tc-call", "\",\" tc-ws") + " \"]<|tool_call_end|>\"";
      break;
    case ToolCallFormat::kMistral:
    case ToolCallFormat::kGranite:
      root = literal(format == ToolCallFormat::kMistral ? "[TOOL_CALLS]" : "<|tool_call|>") +
             " tc-ws \"[\" tc-ws " + many("tc-call", "tc-ws \",\" tc-ws") + " tc-ws \"]\"";
      break;
    case ToolCallFormat::kNone:
      break;
  }
  return "root ::= " + root + "\n" + rules;
}

std::string_view tool_call_trigger(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return "<tool_call>";
    case ToolCallFormat::kLlama3:
      return "{";
    case ToolCallFormat::kLfm2:
      return "<|tool_call_start|>";
    case ToolCallFormat::kMistral:
      return "[TOOL_CALLS]";
    case ToolCallFormat::kGranite:
      return "<|tool_call|>";
    case ToolCallFormat::kNone:
      return "";
  }
  return "";
}

bool tool_call_trigger_only_at_start(ToolCallFormat format) {
  return format == ToolCallFormat::kLlama3;
}

}  // namespace cera::runtime::chat
