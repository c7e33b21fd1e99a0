// Tests (`x is name`), methods of str and dict, and the global functions. Strings follow
// Python's str methods (whitespace = ASCII whitespace; templates only strip '\n' and spaces).
#include "runtime/chat/builtins.h"

#include <array>
#include <cctype>

namespace cera::runtime::chat {
namespace {

constexpr std::string_view kWhitespace = " \t\n\r\f\v";

std::string strip(const std::string& s, const Value& chars, bool left, bool right) {
  const std::string set = chars.is_string() ? chars.as_string() : std::string(kWhitespace);
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && set.find(s[b]) != std::string::npos) ++b;
  if (right)
    while (e > b && set.find(s[e - 1]) != std::string::npos) --e;
  return s.substr(b, e - b);
}

Status too_many_parts(const TemplateLimits& limits) {
  return limit_error("a split into more parts", limits.max_value_items, "items", "max_value_items");
}

// A string of n bytes splits into up to n + 1 parts of ~100 bytes each: split and splitlines
// stop at limits.max_value_items parts rather than build them.
Result<Value> split(const std::string& s, const Value& sep, const Value& maxsplit_v,
                    const TemplateLimits& limits) {
  const int64_t maxsplit = maxsplit_v.kind() == ValueKind::kInt ? maxsplit_v.as_int() : -1;
  Array out;
  if (sep.is_string()) {
    const std::string& d = sep.as_string();
    if (d.empty()) return invalid_argument("empty separator");
    size_t pos = 0;
    int64_t n = 0;
    while (maxsplit < 0 || n < maxsplit) {
      const size_t hit = s.find(d, pos);
      if (hit == std::string::npos) break;
      if (out.size() >= limits.max_value_items) return too_many_parts(limits);
      out.emplace_back(s.substr(pos, hit - pos));
      pos = hit + d.size();
      ++n;
    }
    out.emplace_back(s.substr(pos));
    return Value(std::move(out));
  }
  // No separator: runs of whitespace split, leading/trailing whitespace ignored.
  size_t pos = s.find_first_not_of(kWhitespace);
  int64_t n = 0;
  while (pos != std::string::npos) {
    if (maxsplit >= 0 && n >= maxsplit) {
      out.emplace_back(strip(s.substr(pos), Value(), false, true));
      break;
    }
    const size_t end = s.find_first_of(kWhitespace, pos);
    if (out.size() >= limits.max_value_items) return too_many_parts(limits);
    out.emplace_back(s.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
    ++n;
    pos = end == std::string::npos ? end : s.find_first_not_of(kWhitespace, end);
  }
  return Value(std::move(out));
}

// startswith/endswith take a string or a tuple of strings.
Result<Value> affix_test(const std::string& s, const Value& what, bool prefix) {
  Array options = what.is_array() ? what.as_array() : Array{what};
  for (const Value& o : options) {
    if (!o.is_string()) return invalid_argument("startswith/endswith need strings");
    const std::string& a = o.as_string();
    if (a.size() > s.size()) continue;
    if (prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0)
      return Value(true);
  }
  return Value(false);
}

constexpr std::array kStringMethods = {"strip",      "lstrip",  "rstrip", "split",   "startswith",
                                       "endswith",   "upper",   "lower",  "replace", "title",
                                       "capitalize", "find",    "count",  "join",    "splitlines",
                                       "isdigit",    "isalpha", "isspace"};
constexpr std::array kDictMethods = {"get", "items", "keys", "values"};

}  // namespace

bool has_method(const Value& object, std::string_view name) {
  if (object.is_string()) {
    for (std::string_view m : kStringMethods)
      if (m == name) return true;
  }
  if (object.is_object() && !object.as_object().is_namespace) {
    for (std::string_view m : kDictMethods)
      if (m == name) return true;
  }
  return false;
}

Result<Value> call_method(const Value& object, std::string_view name, const CallArgs& args,
                          const TemplateLimits& limits) {
  if (object.is_object()) {
    const Object& o = object.as_object();
    if (name == "get") {
      const Value key = args.arg(0, "key");
      const Value* v = key.is_string() ? o.find(key.as_string()) : nullptr;
      return v != nullptr ? *v : args.arg(1, "default", Value::none());
    }
    Array out;
    for (const auto& [k, v] : o.entries) {
      if (name == "items")
        out.emplace_back(Array{Value(k), v});
      else if (name == "keys")
        out.emplace_back(k);
      else
        out.push_back(v);
    }
    return Value(std::move(out));
  }
  const std::string& s = object.as_string();
  if (name == "strip") return Value(strip(s, args.arg(0, "chars"), true, true));
  if (name == "lstrip") return Value(strip(s, args.arg(0, "chars"), true, false));
  if (name == "rstrip") return Value(strip(s, args.arg(0, "chars"), false, true));
  if (name == "split")
    return split(s, args.arg(0, "sep", Value::none()), args.arg(1, "maxsplit"), limits);
  if (name == "startswith") return affix_test(s, args.arg(0, "prefix"), true);
  if (name == "endswith") return affix_test(s, args.arg(0, "suffix"), false);
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize")
    return apply_filter(name, object, {}, limits);
  if (name == "replace") return apply_filter("replace", object, args, limits);
  if (name == "find" || name == "count") {
    const Value sub = args.arg(0, "sub");
    if (!sub.is_string()) return invalid_argument(std::string(name) + " needs a string");
    if (name == "find") {
      const size_t hit = s.find(sub.as_string());
      if (hit == std::string::npos) return Value(int64_t{-1});
      return Value(static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, hit))));
    }
    if (sub.as_string().empty()) return Value(static_cast<int64_t>(utf8_length(s) + 1));
    int64_t n = 0;
    for (size_t p = s.find(sub.as_string()); p != std::string::npos;
         p = s.find(sub.as_string(), p + sub.as_string().size()))
      ++n;
    return Value(n);
  }
  if (name == "join") {
    CERA_ASSIGN_OR_RETURN(Array items, iterate(args.arg(0, "iterable"), limits));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) return invalid_argument("str.join needs strings");
      const std::string& item = items[i].as_string();
      if (!fits(out.size(), (i > 0 ? s.size() : 0) + item.size(), limits.max_value_bytes))
        return limit_error("a joined string longer", limits.max_value_bytes, "bytes",
                           "max_value_bytes");
      if (i > 0) out += s;
      out += item;
    }
    return Value(std::move(out));
  }
  if (name == "splitlines") {
    Array out;
    size_t start = 0;
    while (start < s.size()) {
      const size_t nl = s.find('\n', start);
      std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (out.size() >= limits.max_value_items) return too_many_parts(limits);
      out.emplace_back(std::move(line));
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
    return Value(std::move(out));
  }
  const auto all_of = [&](int (*pred)(int)) {
    if (s.empty()) return false;
    for (unsigned char c : s)
      if (!pred(c)) return false;
    return true;
  };
  if (name == "isdigit") return Value(all_of(std::isdigit));
  if (name == "isalpha") return Value(all_of(std::isalpha));
  if (name == "isspace") return Value(all_of(std::isspace));
  return unsupported("unsupported method '" + std::string(name) + "'");
}

Result<bool> apply_test(std::string_view name, const Value& v, const CallArgs& args) {
  const Value other = args.arg(0, "other");
  const ValueKind k = v.kind();
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return k == ValueKind::kBool;
  if (name == "true") return k == ValueKind::kBool && v.as_bool();
  if (name == "false") return k == ValueKind::kBool && !v.as_bool();
  if (name == "integer") return k == ValueKind::kInt;
  if (name == "float") return k == ValueKind::kFloat;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_object();
  // Python: str, list, dict and jinja2's Undefined are iterable; sequences support len().
  if (name == "iterable") return v.is_string() || v.is_array() || v.is_object() || v.is_undefined();
  if (name == "sequence") return v.is_string() || v.is_array() || v.is_object();
  if (name == "callable") return k == ValueKind::kFunction;
  if (name == "sameas") return v.kind() == other.kind() && v.equals(other);
  if (name == "equalto" || name == "eq" || name == "==") return v.equals(other);
  if (name == "ne" || name == "!=") return !v.equals(other);
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    for (unsigned char c : v.as_string())
      if (name == "lower" ? std::isupper(c) : std::islower(c)) return false;
    return true;
  }
  if (name == "in") {
    if (other.is_string())
      return v.is_string() && other.as_string().find(v.as_string()) != std::string::npos;
    if (other.is_object()) return v.is_string() && other.as_object().find(v.as_string()) != nullptr;
    if (other.is_array()) {
      for (const Value& e : other.as_array())
        if (e.equals(v)) return true;
      return false;
    }
    return invalid_argument("test 'in' needs a container");
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (k != ValueKind::kInt)
      return invalid_argument("test '" + std::string(name) + "' needs an integer");
    if (name == "odd") return v.as_int() % 2 != 0;
    if (name == "even") return v.as_int() % 2 == 0;
    if (other.kind() != ValueKind::kInt || other.as_int() == 0)
      return invalid_argument("divisibleby needs a non-zero int");
    return v.as_int() % other.as_int() == 0;
  }
  if (name == "lt" || name == "le" || name == "gt" || name == "ge" || name == "<" || name == "<=" ||
      name == ">" || name == ">=") {
    if (!v.is_number() || !other.is_number())
      return invalid_argument("comparison test needs numbers");
    const double a = v.as_double(), b = other.as_double();
    if (name == "lt" || name == "<") return a < b;
    if (name == "le" || name == "<=") return a <= b;
    if (name == "gt" || name == ">") return a > b;
    return a >= b;
  }
  return unsupported("unsupported test '" + std::string(name) + "'");
}

// namespace() objects may not hold namespaces (directly or inside a list or dict): it keeps
// cycles and unbounded chains of mutable objects out of values (see ValueSize).
Status check_namespace_value(const Value& v) {
  if (v.size().has_namespace) return unsupported("a namespace inside a namespace");
  return ok_status();
}

Object make_globals(const std::tm& now, const TemplateLimits& limits) {
  Object g;
  g.set("raise_exception", Value::function([](const CallArgs& args) -> Result<Value> {
          return invalid_argument("raise_exception: " + to_display_string(args.arg(0, "message")));
        }));
  g.set("strftime_now", Value::function([now](const CallArgs& args) -> Result<Value> {
          const Value fmt = args.arg(0, "format");
          if (!fmt.is_string()) return invalid_argument("strftime_now needs a format string");
          // Formats are a few conversions; a long one would be scanned on every call.
          if (fmt.as_string().size() > 256)
            return invalid_argument("strftime_now: format too long");
          char buf[256];
          const size_t n = std::strftime(buf, sizeof buf, fmt.as_string().c_str(), &now);
          return Value(std::string(buf, n));
        }));
  // namespace() and dict(): dicts given positionally, then keyword arguments.
  const auto gather = [](const CallArgs& args, const char* who,
                         bool is_namespace) -> Result<std::vector<std::pair<std::string, Value>>> {
    std::vector<std::pair<std::string, Value>> entries;
    for (const Value& p : args.positional) {
      if (!p.is_object())
        return invalid_argument(std::string(who) + "() takes a dict or keyword arguments");
      for (const auto& [k, v] : p.as_object().entries) entries.emplace_back(k, v);
    }
    for (const auto& [k, v] : args.keyword) entries.emplace_back(k, v);
    if (is_namespace)
      for (const auto& [k, v] : entries) CERA_RETURN_IF_ERROR(check_namespace_value(v));
    return entries;
  };
  g.set("namespace", Value::function([gather](const CallArgs& args) -> Result<Value> {
          CERA_ASSIGN_OR_RETURN(auto entries, gather(args, "namespace", true));
          Object ns = make_object(std::move(entries));
          ns.is_namespace = true;
          return Value(std::move(ns));
        }));
  g.set("dict", Value::function([gather](const CallArgs& args) -> Result<Value> {
          CERA_ASSIGN_OR_RETURN(auto entries, gather(args, "dict", false));
          return Value(make_object(std::move(entries)));
        }));
  g.set("range", Value::function([limits](const CallArgs& args) -> Result<Value> {
          for (const Value& p : args.positional)
            if (p.kind() != ValueKind::kInt) return invalid_argument("range() needs integers");
          int64_t start = 0, stop = 0, step = 1;
          if (args.positional.size() == 1) {
            stop = args.positional[0].as_int();
          } else if (args.positional.size() >= 2) {
            start = args.positional[0].as_int();
            stop = args.positional[1].as_int();
            if (args.positional.size() >= 3) step = args.positional[2].as_int();
          } else {
            return invalid_argument("range() needs 1 to 3 arguments");
          }
          if (step == 0) return invalid_argument("range() step must not be zero");
          // The length first, in unsigned arithmetic (stop - start can overflow int64).
          const bool up = step > 0;
          const uint64_t span = up ? static_cast<uint64_t>(stop) - static_cast<uint64_t>(start)
                                   : static_cast<uint64_t>(start) - static_cast<uint64_t>(stop);
          const uint64_t stride =
              up ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
          const uint64_t n = (up ? start < stop : start > stop) ? (span - 1) / stride + 1 : 0;
          if (n > limits.max_value_items)
            return limit_error("range() of " + std::to_string(n) + " items: more",
                               limits.max_value_items, "items", "max_value_items");
          Array out;
          out.reserve(n);
          for (uint64_t k = 0; k < n; ++k)  // wraps modulo 2^64 and lands in range
            out.emplace_back(static_cast<int64_t>(static_cast<uint64_t>(start) +
                                                  k * static_cast<uint64_t>(step)));
          return Value(std::move(out));
        }));
  return g;
}

}  // namespace cera::runtime::chat

namespace cera::runtime::chat {

namespace {

uint64_t product(uint64_t a, uint64_t b) {
  return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

uint64_t arg_bytes(const CallArgs& args) {
  uint64_t n = 0;
  for (const Value& a : args.positional) n += a.size().bytes;
  for (const auto& [k, a] : args.keyword) n += a.size().bytes;
  return n;
}

bool is_one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  for (std::string_view n : names)
    if (n == name) return true;
  return false;
}

}  // namespace

uint64_t filter_search_bytes(std::string_view name, const Value& input, const CallArgs& args) {
  if (is_one_of(name, {"replace", "trim"})) return product(input.size().bytes, arg_bytes(args));
  if (!is_one_of(name, {"map", "select", "reject", "selectattr", "rejectattr"})) return 0;
  // Every element meets every argument (an attribute path walked, a test argument compared);
  // a searching test or filter also searches each element's bytes.
  const uint64_t elements = input.is_array()    ? input.as_array().size()
                            : input.is_object() ? input.as_object().entries.size()
                            : input.is_string() ? input.as_string().size()
                                                : 0;
  bool searches = false;
  for (const Value& a : args.positional)
    searches = searches || (a.is_string() && is_one_of(a.as_string(), {"in", "replace", "trim"}));
  return product(elements + (searches ? input.size().bytes : 0), arg_bytes(args));
}

uint64_t method_search_bytes(std::string_view name, const Value& object, const CallArgs& args) {
  if (!object.is_string() ||
      !is_one_of(name, {"find", "count", "split", "replace", "strip", "lstrip", "rstrip"}))
    return 0;
  return product(object.as_string().size(), arg_bytes(args));
}

uint64_t test_search_bytes(std::string_view name, const Value& input, const CallArgs& args) {
  if (name != "in" || args.positional.empty() || !args.positional[0].is_string()) return 0;
  return product(input.size().bytes, args.positional[0].as_string().size());
}

bool is_filter_name(std::string_view name) {
  static constexpr std::array kNames = {
      "safe",       "string", "trim",    "upper",  "lower",  "capitalize", "title",  "replace",
      "length",     "count",  "default", "d",      "tojson", "first",      "last",   "join",
      "items",      "list",   "reverse", "unique", "map",    "select",     "reject", "selectattr",
      "rejectattr", "int",    "float",   "abs",    "sum",    "indent"};
  for (std::string_view n : kNames)
    if (n == name) return true;
  return false;
}

bool is_test_name(std::string_view name) {
  static constexpr std::array kNames = {
      "defined", "undefined", "none",        "boolean", "true",     "false",    "integer",
      "float",   "number",    "string",      "mapping", "iterable", "sequence", "callable",
      "sameas",  "equalto",   "eq",          "ne",      "lower",    "upper",    "in",
      "odd",     "even",      "divisibleby", "lt",      "le",       "gt",       "ge"};
  for (std::string_view n : kNames)
    if (n == name) return true;
  return false;
}

}  // namespace cera::runtime::chat
