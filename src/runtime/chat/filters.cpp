// Filters (`value | name(args)`) with jinja2's semantics, and `tojson` as transformers defines
// it (json.dumps with ensure_ascii=False, key order kept, optional indent). Each filter checks
// its input type and says what it got instead of guessing. Filters whose output can outgrow
// their input (join, replace, indent, tojson) stop at limits.max_value_bytes while building.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <unordered_set>

#include "runtime/chat/builtins.h"

namespace cera::runtime::chat {
namespace {

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
      size_t i = 0;
      const auto r = std::from_chars(part.data(), part.data() + part.size(), i);
      cur = r.ec == std::errc() && i < cur.as_array().size() ? cur.as_array()[i] : Value();
    } else {
      return Value();
    }
    start = dot + 1;
  }
  return cur;
}

// select/reject/selectattr/rejectattr share this: keep items whose test (or truthiness) == keep.
Result<Value> filter_items(const Value& input, const CallArgs& args, bool by_attribute, bool keep,
                           const TemplateLimits& limits) {
  CERA_ASSIGN_OR_RETURN(Array items, iterate(input, limits));
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

Status string_too_large(const TemplateLimits& limits) {
  return limit_error("a string longer", limits.max_value_bytes, "bytes", "max_value_bytes");
}

// Appends `piece` to `out` unless that would pass limits.max_value_bytes.
Status append_capped(std::string& out, std::string_view piece, const TemplateLimits& limits) {
  if (!fits(out.size(), piece.size(), limits.max_value_bytes)) return string_too_large(limits);
  out += piece;
  return ok_status();
}

Result<std::string> replace_all(const std::string& s, const std::string& from,
                                const std::string& to, int64_t count,
                                const TemplateLimits& limits) {
  std::string out;
  if (from.empty()) {  // Python inserts `to` around every character: the size is known first
    const uint64_t slots = utf8_length(s) + 1;
    const uint64_t inserts = count < 0 ? slots : std::min<uint64_t>(slots, count);
    if (to.size() != 0 &&
        inserts > (limits.max_value_bytes - std::min<uint64_t>(s.size(), limits.max_value_bytes)) /
                      to.size())
      return string_too_large(limits);
    out.reserve(s.size() + inserts * to.size());
    uint64_t done = 0;
    for (size_t i = 0; i < s.size();) {
      if (done++ < inserts) out += to;
      const size_t next = utf8_next(s, i);
      out.append(s, i, next - i);
      i = next;
    }
    if (done < inserts) out += to;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    CERA_RETURN_IF_ERROR(append_capped(out, std::string_view(s).substr(pos, hit - pos), limits));
    CERA_RETURN_IF_ERROR(append_capped(out, to, limits));
    pos = hit + from.size();
    ++done;
  }
  CERA_RETURN_IF_ERROR(append_capped(out, std::string_view(s).substr(pos), limits));
  return out;
}

// Python's set() semantics for `unique`: 1, 1.0 and True are one key; lists and dicts are
// unhashable. Hashing keeps it linear (comparing every pair made 1M items take hours).
struct ScalarHash {
  size_t operator()(const Value* v) const {
    if (v->is_string()) return std::hash<std::string>()(v->as_string());
    if (v->is_none()) return 0x9e3779b9u;
    if (v->kind() != ValueKind::kFloat) return std::hash<int64_t>()(v->as_int());
    const double d = v->as_double();  // an integral float hashes as the int it equals
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18)
      return std::hash<int64_t>()(static_cast<int64_t>(d));
    return std::hash<double>()(d);
  }
};
struct ScalarEq {
  bool operator()(const Value* a, const Value* b) const { return a->equals(*b); }
};

Result<Value> unique(const Value& input, const TemplateLimits& limits) {
  CERA_ASSIGN_OR_RETURN(Array items, iterate(input, limits));
  std::unordered_set<const Value*, ScalarHash, ScalarEq> seen;
  Array out;
  for (const Value& v : items) {
    const ValueKind k = v.kind();
    if (k != ValueKind::kNone && k != ValueKind::kBool && k != ValueKind::kInt &&
        k != ValueKind::kFloat && k != ValueKind::kString)
      return invalid_argument(std::string("unique: unhashable type: '") + v.type_name() + "'");
    if (seen.insert(&v).second) out.push_back(v);
  }
  return Value(std::move(out));
}

// The first or last element without copying the input (a string's code point, a dict's key).
Value first_or_last(const Value& input, bool first) {
  if (input.is_array()) {
    const Array& a = input.as_array();
    if (a.empty()) return Value();
    return first ? a.front() : a.back();
  }
  if (input.is_object()) {
    const auto& e = input.as_object().entries;
    if (e.empty()) return Value();
    return Value(first ? e.front().first : e.back().first);
  }
  const std::string& s = input.as_string();
  if (s.empty()) return Value();
  size_t start = 0;
  if (!first)
    for (size_t i = 0; i < s.size(); i = utf8_next(s, i)) start = i;
  return Value(s.substr(start, utf8_next(s, start) - start));
}

// The code points of `s` in reverse order, written from the end (no per-character strings).
std::string reverse_string(const std::string& s) {
  std::string out(s.size(), '\0');
  for (size_t i = 0; i < s.size();) {
    const size_t next = utf8_next(s, i);
    std::copy(s.begin() + static_cast<std::ptrdiff_t>(i),
              s.begin() + static_cast<std::ptrdiff_t>(next),
              out.end() - static_cast<std::ptrdiff_t>(next));
    i = next;
  }
  return out;
}

}  // namespace

Result<Array> iterate(const Value& v, const TemplateLimits& limits) {
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
      // One element per code point: check the count before building ~100 bytes per byte.
      const std::string& s = v.as_string();
      const size_t n = utf8_length(s);
      if (n > limits.max_value_items)
        return limit_error("iterating a string of " + std::to_string(n) + " characters: more items",
                           limits.max_value_items, "items", "max_value_items");
      Array chars;
      chars.reserve(n);
      for (size_t i = 0; i < s.size();) {
        const size_t next = utf8_next(s, i);
        chars.emplace_back(s.substr(i, next - i));
        i = next;
      }
      return chars;
    }
    default:
      return invalid_argument(std::string("'") + v.type_name() + "' object is not iterable");
  }
}

bool is_constant_time_filter(std::string_view name, const Value& input) {
  for (std::string_view n : {"safe", "default", "d", "first", "abs"})
    if (n == name) return true;
  // Of a string, these walk or copy it; of a list, dict or number they do not.
  for (std::string_view n : {"length", "count", "last", "int", "float"})
    if (n == name) return !input.is_string();
  return false;
}

Result<Value> apply_filter(std::string_view name, const Value& input, const CallArgs& args,
                           const TemplateLimits& limits) {
  const auto need_string = [&]() -> Status {
    return input.is_string() ? ok_status() : type_error(name, input);
  };
  if (name == "safe") return input;
  if (name == "string") return Value(to_display_string(input));
  if (name == "trim") {
    CERA_RETURN_IF_ERROR(need_string());
    const Value chars = args.arg(0, "chars");
    if (chars.is_string()) {
      CallArgs strip_args;
      strip_args.positional.push_back(chars);
      return call_method(input, "strip", strip_args, limits);
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
    const Value from = args.arg(0, "old"), to = args.arg(1, "new"),
                count = args.arg(2, "count", Value::none());
    if (!from.is_string() || !to.is_string()) return invalid_argument("replace needs two strings");
    CERA_ASSIGN_OR_RETURN(std::string out,
                          replace_all(input.as_string(), from.as_string(), to.as_string(),
                                      count.is_none() ? -1 : count.as_int(), limits));
    return Value(std::move(out));
  }
  if (name == "length" || name == "count") {
    if (input.is_string()) return Value(static_cast<int64_t>(utf8_length(input.as_string())));
    if (input.is_array()) return Value(static_cast<int64_t>(input.as_array().size()));
    if (input.is_object()) return Value(static_cast<int64_t>(input.as_object().entries.size()));
    if (input.is_undefined()) return Value(int64_t{0});
    return type_error(name, input);
  }
  if (name == "default" || name == "d") {
    const bool boolean = args.arg(1, "boolean", Value(false)).truthy();
    if (input.is_undefined() || (boolean && !input.truthy()))
      return args.arg(0, "default_value", Value(""));
    return input;
  }
  if (name == "tojson") {
    const Value indent = args.arg(0, "indent", Value::none());
    if (!indent.is_none() && indent.kind() != ValueKind::kInt)
      return invalid_argument("tojson: indent must be an int");
    // Each line of the output holds at least the indent: a wider one cannot fit.
    const int64_t width = indent.is_none() ? -1 : std::max<int64_t>(indent.as_int(), 0);
    if (width > static_cast<int64_t>(std::min<uint64_t>(limits.max_value_bytes, INT32_MAX)))
      return string_too_large(limits);
    CERA_ASSIGN_OR_RETURN(std::string json,
                          to_json(input, static_cast<int>(width), limits.max_value_bytes));
    return Value(std::move(json));
  }
  if (name == "first" || name == "last") {
    if (!input.is_array() && !input.is_object() && !input.is_string()) {
      auto items = iterate(input, limits);  // undefined is empty, other types an error
      if (!items.ok()) return items.status();
      return Value();
    }
    return first_or_last(input, name == "first");
  }
  if (name == "join") {
    CERA_ASSIGN_OR_RETURN(Array items, iterate(input, limits));
    const std::string sep = to_display_string(args.arg(0, "d", Value("")));
    const Value attribute = args.arg(1, "attribute", Value::none());
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) CERA_RETURN_IF_ERROR(append_capped(out, sep, limits));
      CERA_RETURN_IF_ERROR(append_capped(
          out,
          to_display_string(attribute.is_string() ? get_path(items[i], attribute.as_string())
                                                  : items[i]),
          limits));
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
    CERA_ASSIGN_OR_RETURN(Array items, iterate(input, limits));
    return Value(std::move(items));
  }
  if (name == "reverse") {
    if (input.is_string()) return Value(reverse_string(input.as_string()));
    CERA_ASSIGN_OR_RETURN(Array items, iterate(input, limits));
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "unique") return unique(input, limits);
  if (name == "map") {
    CERA_ASSIGN_OR_RETURN(Array items, iterate(input, limits));
    Array out;
    if (const Value* attribute = args.keyword_arg("attribute")) {
      const Value fallback = args.arg(99, "default");
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
    // Each result is within the limits, but together they could hold any number of them.
    ValueSize total;
    for (const Value& v : items) {
      CERA_ASSIGN_OR_RETURN(Value mapped,
                            apply_filter(args.positional[0].as_string(), v, rest, limits));
      const ValueSize size = mapped.size();
      total.items += size.items + 1;
      total.bytes += size.bytes;
      if (total.bytes > limits.max_value_bytes)
        return limit_error("map() results larger", limits.max_value_bytes, "bytes",
                           "max_value_bytes");
      if (total.items > limits.max_value_items)
        return limit_error("map() results with more", limits.max_value_items, "items",
                           "max_value_items");
      out.push_back(std::move(mapped));
    }
    return Value(std::move(out));
  }
  if (name == "select") return filter_items(input, args, false, true, limits);
  if (name == "reject") return filter_items(input, args, false, false, limits);
  if (name == "selectattr") return filter_items(input, args, true, true, limits);
  if (name == "rejectattr") return filter_items(input, args, true, false, limits);
  if (name == "int") {
    const Value fallback = args.arg(0, "default", Value(int64_t{0}));
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
    const Value fallback = args.arg(0, "default", Value(0.0));
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
    CERA_ASSIGN_OR_RETURN(Array items, iterate(input, limits));
    const Value attribute = args.arg(0, "attribute", Value::none());
    Value total = args.arg(1, "start", Value(int64_t{0}));
    for (const Value& v0 : items) {
      const Value v = attribute.is_string() ? get_path(v0, attribute.as_string()) : v0;
      if (!v.is_number() || !total.is_number()) return invalid_argument("sum needs numbers");
      if (v.kind() == ValueKind::kFloat || total.kind() == ValueKind::kFloat)
        total = Value(total.as_double() + v.as_double());
      else if (int64_t t = 0; !__builtin_add_overflow(total.as_int(), v.as_int(), &t))
        total = Value(t);
      else
        return out_of_range("sum: integer overflow");
    }
    return total;
  }
  if (name == "indent") {
    CERA_RETURN_IF_ERROR(need_string());
    const Value width = args.arg(0, "width", Value(int64_t{4}));
    const bool first = args.arg(1, "first", Value(false)).truthy();
    const bool blank = args.arg(2, "blank", Value(false)).truthy();
    if (!width.is_string() && !width.is_number())
      return invalid_argument("indent: width must be an int or a string");
    const int64_t spaces = width.is_string() ? 0 : std::max<int64_t>(width.as_int(), 0);
    if (static_cast<uint64_t>(spaces) > limits.max_value_bytes) return string_too_large(limits);
    const std::string pad =
        width.is_string() ? width.as_string() : std::string(static_cast<size_t>(spaces), ' ');
    std::string out;
    const std::string& s = input.as_string();
    size_t start = 0;
    bool first_line = true;
    while (start <= s.size()) {
      const size_t nl = s.find('\n', start);
      const std::string line =
          s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      if (!first_line) CERA_RETURN_IF_ERROR(append_capped(out, "\n", limits));
      if ((first_line ? first : true) && (blank || !python_strip(line).empty()))
        CERA_RETURN_IF_ERROR(append_capped(out, pad, limits));
      CERA_RETURN_IF_ERROR(append_capped(out, line, limits));
      first_line = false;
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
    return Value(std::move(out));
  }
  return unsupported("unsupported filter '" + std::string(name) + "'");
}

}  // namespace cera::runtime::chat
