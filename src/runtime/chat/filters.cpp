// Filters (`value | name(args)`) with jinja2's semantics, and `tojson` as transformers defines
// it (json.dumps with ensure_ascii=False, key order kept, optional indent). Each filter checks
// its input type and says what it got instead of guessing.
#include <algorithm>
#include <cctype>
#include <cmath>

#include "runtime/chat/builtins.h"

namespace cera::runtime::chat {
namespace {

// The argument at `index` or named `name`, else `fallback`.
Value arg(const CallArgs& args, size_t index, std::string_view name, Value fallback = Value()) {
  if (index < args.positional.size()) return args.positional[index];
  if (const Value* v = args.keyword_arg(name)) return *v;
  return fallback;
}

Status type_error(std::string_view filter, const Value& input) {
  return invalid_argument("filter '" + std::string(filter) + "' cannot take a " +
                          input.type_name());
}

std::string ascii_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Attribute path "a.b" of a value (map/selectattr/join/sort's `attribute=`).
Value get_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = std::min(path.find('.', start), path.size());
    const std::string part = path.substr(start, dot - start);
    if (cur.is_object()) {
      const Value* next = cur.as_object().find(part);
      cur = next != nullptr ? *next : Value();
    } else if (cur.is_array() && !part.empty() &&
               std::isdigit(static_cast<unsigned char>(part[0]))) {
      const size_t i = std::stoul(part);
      cur = i < cur.as_array().size() ? cur.as_array()[i] : Value();
    } else {
      return Value();
    }
    start = dot + 1;
  }
  return cur;
}

// select/reject/selectattr/rejectattr share this: keep items whose test (or truthiness) == keep.
Result<Value> filter_items(const Value& input, const CallArgs& args, bool by_attribute, bool keep) {
  CERA_ASSIGN_OR_RETURN(Array items, iterate(input));
  size_t first = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty() || !args.positional[0].is_string())
      return invalid_argument("selectattr/rejectattr need an attribute name");
    attribute = args.positional[0].as_string();
    first = 1;
  }
  std::string test;
  CallArgs test_args;
  if (args.positional.size() > first) {
    if (!args.positional[first].is_string())
      return invalid_argument("the test name must be a string");
    test = args.positional[first].as_string();
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(first + 1),
                                args.positional.end());
  }
  Array out;
  for (const Value& item : items) {
    const Value subject = by_attribute ? get_path(item, attribute) : item;
    bool pass = false;
    if (test.empty()) {
      pass = subject.truthy();
    } else {
      CERA_ASSIGN_OR_RETURN(pass, apply_test(test, subject, test_args));
    }
    if (pass == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

std::string python_strip(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to,
                        int64_t count) {
  std::string out;
  if (from.empty()) {  // Python inserts `to` around every character
    const auto chars = utf8_chars(s);
    int64_t done = 0;
    for (const std::string& c : chars) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      out += c;
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

}  // namespace

Result<Array> iterate(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return Array{};
    case ValueKind::kArray:
      return v.as_array();
    case ValueKind::kObject: {
      Array keys;
      for (const auto& [k, e] : v.as_object().entries) keys.emplace_back(k);
      return keys;
    }
    case ValueKind::kString: {
      Array chars;
      for (std::string& c : utf8_chars(v.as_string())) chars.emplace_back(std::move(c));
      return chars;
    }
    default:
      return invalid_argument(std::string("'") + v.type_name() + "' object is not iterable");
  }
}

Result<Value> apply_filter(std::string_view name, const Value& input, const CallArgs& args) {
  const auto need_string = [&]() -> Status {
    return input.is_string() ? ok_status() : type_error(name, input);
  };
  if (name == "safe") return input;
  if (name == "string") return Value(to_display_string(input));
  if (name == "trim") {
    CERA_RETURN_IF_ERROR(need_string());
    const Value chars = arg(args, 0, "chars");
    if (chars.is_string()) {
      CallArgs strip_args;
      strip_args.positional.push_back(chars);
      return call_method(input, "strip", strip_args);
    }
    return Value(python_strip(input.as_string()));
  }
  if (name == "upper")
    return need_string().ok() ? Value(ascii_upper(input.as_string()))
                              : Result<Value>(type_error(name, input));
  if (name == "lower")
    return need_string().ok() ? Value(ascii_lower(input.as_string()))
                              : Result<Value>(type_error(name, input));
  if (name == "capitalize") {
    CERA_RETURN_IF_ERROR(need_string());
    std::string s = ascii_lower(input.as_string());
    if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
    return Value(std::move(s));
  }
  if (name == "title") {
    CERA_RETURN_IF_ERROR(need_string());
    std::string s = input.as_string();
    bool start = true;
    for (char& c : s) {
      const auto u = static_cast<unsigned char>(c);
      c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
      start =
          std::isspace(u) || c == '-' || c == '(' || c == '[' || c == '{' || c == '<' || c == '_';
    }
    return Value(std::move(s));
  }
  if (name == "replace") {
    CERA_RETURN_IF_ERROR(need_string());
    const Value from = arg(args, 0, "old"), to = arg(args, 1, "new"),
                count = arg(args, 2, "count", Value::none());
    if (!from.is_string() || !to.is_string()) return invalid_argument("replace needs two strings");
    return Value(replace_all(input.as_string(), from.as_string(), to.as_string(),
                             count.is_none() ? -1 : count.as_int()));
  }
  if (name == "length" || name == "count") {
    if (input.is_string()) return Value(static_cast<int64_t>(utf8_chars(input.as_string()).size()));
    if (input.is_array()) return Value(static_cast<int64_t>(input.as_array().size()));
    if (input.is_object()) return Value(static_cast<int64_t>(input.as_object().entries.size()));
    if (input.is_undefined()) return Value(int64_t{0});
    return type_error(name, input);
  }
  if (name == "default" || name == "d") {
    const bool boolean = arg(args, 1, "boolean", Value(false)).truthy();
    if (input.is_undefined() || (boolean && !input.truthy()))
      return arg(args, 0, "default_value", Value(""));
    return input;
  }
  if (name == "tojson") {
    const Value indent = arg(args, 0, "indent", Value::none());
    if (!indent.is_none() && indent.kind() != ValueKind::kInt)
      return invalid_argument("tojson: indent must be an int");
    CERA_ASSIGN_OR_RETURN(
        std::string json,
        to_json(input, indent.is_none() ? -1 : static_cast<int>(indent.as_int())));
    return Value(std::move(json));
  }
  if (name == "first" || name == "last") {
    CERA_ASSIGN_OR_RETURN(Array items, iterate(input));
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "join") {
    CERA_ASSIGN_OR_RETURN(Array items, iterate(input));
    const Value sep = arg(args, 0, "d", Value(""));
    const Value attribute = arg(args, 1, "attribute", Value::none());
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += to_display_string(sep);
      out += to_display_string(attribute.is_string() ? get_path(items[i], attribute.as_string())
                                                     : items[i]);
    }
    return Value(std::move(out));
  }
  if (name == "items") {
    if (input.is_undefined()) return Value(Array{});
    if (!input.is_object()) return type_error(name, input);
    Array out;
    for (const auto& [k, v] : input.as_object().entries) out.emplace_back(Array{Value(k), v});
    return Value(std::move(out));
  }
  if (name == "list") {
    CERA_ASSIGN_OR_RETURN(Array items, iterate(input));
    return Value(std::move(items));
  }
  if (name == "reverse") {
    if (input.is_string()) {
      auto chars = utf8_chars(input.as_string());
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
      return Value(std::move(out));
    }
    CERA_ASSIGN_OR_RETURN(Array items, iterate(input));
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "unique") {
    CERA_ASSIGN_OR_RETURN(Array items, iterate(input));
    Array out;
    for (const Value& v : items)
      if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return o.equals(v); }))
        out.push_back(v);
    return Value(std::move(out));
  }
  if (name == "map") {
    CERA_ASSIGN_OR_RETURN(Array items, iterate(input));
    Array out;
    if (const Value* attribute = args.keyword_arg("attribute")) {
      const Value fallback = arg(args, 99, "default");
      for (const Value& v : items) {
        Value got = get_path(v, to_display_string(*attribute));
        out.push_back(got.is_undefined() ? fallback : got);
      }
      return Value(std::move(out));
    }
    if (args.positional.empty() || !args.positional[0].is_string())
      return invalid_argument("map needs a filter name or attribute=");
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keyword = args.keyword;
    for (const Value& v : items) {
      CERA_ASSIGN_OR_RETURN(Value mapped, apply_filter(args.positional[0].as_string(), v, rest));
      out.push_back(std::move(mapped));
    }
    return Value(std::move(out));
  }
  if (name == "select") return filter_items(input, args, false, true);
  if (name == "reject") return filter_items(input, args, false, false);
  if (name == "selectattr") return filter_items(input, args, true, true);
  if (name == "rejectattr") return filter_items(input, args, true, false);
  if (name == "int") {
    const Value fallback = arg(args, 0, "default", Value(int64_t{0}));
    if (input.is_number()) return Value(input.as_int());
    if (input.is_string()) {
      try {
        size_t used = 0;
        const std::string s = python_strip(input.as_string());
        const long long v = std::stoll(s, &used);
        if (used == s.size()) return Value(static_cast<int64_t>(v));
        const double d = std::stod(s, &used);
        if (used == s.size()) return Value(static_cast<int64_t>(d));
      } catch (...) {  // not a number: the default, as jinja2 does
      }
    }
    return fallback;
  }
  if (name == "float") {
    const Value fallback = arg(args, 0, "default", Value(0.0));
    if (input.is_number()) return Value(input.as_double());
    if (input.is_string()) {
      try {
        size_t used = 0;
        const std::string s = python_strip(input.as_string());
        const double d = std::stod(s, &used);
        if (used == s.size()) return Value(d);
      } catch (...) {  // not a number: the default
      }
    }
    return fallback;
  }
  if (name == "abs") {
    if (input.kind() == ValueKind::kFloat) return Value(std::fabs(input.as_double()));
    if (input.is_number()) return Value(input.as_int() < 0 ? -input.as_int() : input.as_int());
    return type_error(name, input);
  }
  if (name == "sum") {
    CERA_ASSIGN_OR_RETURN(Array items, iterate(input));
    const Value attribute = arg(args, 0, "attribute", Value::none());
    Value total = arg(args, 1, "start", Value(int64_t{0}));
    for (const Value& v0 : items) {
      const Value v = attribute.is_string() ? get_path(v0, attribute.as_string()) : v0;
      if (!v.is_number() || !total.is_number()) return invalid_argument("sum needs numbers");
      if (v.kind() == ValueKind::kFloat || total.kind() == ValueKind::kFloat)
        total = Value(total.as_double() + v.as_double());
      else
        total = Value(total.as_int() + v.as_int());
    }
    return total;
  }
  if (name == "indent") {
    CERA_RETURN_IF_ERROR(need_string());
    const Value width = arg(args, 0, "width", Value(int64_t{4}));
    const bool first = arg(args, 1, "first", Value(false)).truthy();
    const bool blank = arg(args, 2, "blank", Value(false)).truthy();
    const std::string pad = width.is_string()
                                ? width.as_string()
                                : std::string(static_cast<size_t>(width.as_int()), ' ');
    std::string out;
    const std::string& s = input.as_string();
    size_t start = 0;
    bool first_line = true;
    while (start <= s.size()) {
      const size_t nl = s.find('\n', start);
      const std::string line =
          s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      if (!first_line) out += '\n';
      if ((first_line ? first : true) && (blank || !python_strip(line).empty())) out += pad;
      out += line;
      first_line = false;
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
    return Value(std::move(out));
  }
  return unsupported("unsupported filter '" + std::string(name) + "'");
}

}  // namespace cera::runtime::chat
