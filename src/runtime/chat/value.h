// Value: the small dynamic type chat templates compute with (Python/JSON-like: undefined, none,
// bool, int, float, string, list, ordered dict, callable). Lists and dicts are shared by
// reference like Python's, which is what makes `namespace()` attribute assignment visible.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace cera::runtime::chat {

class Value;

enum class ValueKind {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kArray,
  kObject,
  kFunction
};

using Array = std::vector<Value>;

// A dict that keeps insertion order (tojson and items() must reproduce the caller's key order).
// Linear lookup: template dicts hold a handful of keys.
struct Object {
  std::vector<std::pair<std::string, Value>> entries;
  bool is_namespace = false;  // only namespace() objects accept `{% set ns.attr = ... %}`

  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  void set(std::string key, Value value);
};

// Arguments of a call: positional then keyword, in source order.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* keyword_arg(std::string_view name) const;
};

using Function = std::function<Result<Value>(const CallArgs&)>;

class Value {
 public:
  Value() = default;  // undefined
  static Value none();
  Value(bool b);     // NOLINT: implicit conversions keep literals short
  Value(int64_t i);  // NOLINT
  Value(int i) : Value(static_cast<int64_t>(i)) {}  // NOLINT
  Value(double d);                                  // NOLINT
  Value(std::string s);                             // NOLINT
  Value(const char* s) : Value(std::string(s)) {}   // NOLINT
  Value(Array a);                                   // NOLINT
  Value(Object o);                                  // NOLINT
  static Value function(Function f);

  ValueKind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == ValueKind::kUndefined; }
  bool is_none() const { return kind_ == ValueKind::kNone; }
  bool is_string() const { return kind_ == ValueKind::kString; }
  bool is_array() const { return kind_ == ValueKind::kArray; }
  bool is_object() const { return kind_ == ValueKind::kObject; }
  bool is_number() const {
    return kind_ == ValueKind::kInt || kind_ == ValueKind::kFloat || kind_ == ValueKind::kBool;
  }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == ValueKind::kFloat ? static_cast<int64_t>(d_) : i_; }
  double as_double() const { return kind_ == ValueKind::kFloat ? d_ : static_cast<double>(i_); }
  const std::string& as_string() const { return *s_; }
  // Shared: mutating through these changes every copy (Python reference semantics).
  Array& as_array() const { return *a_; }
  Object& as_object() const { return *o_; }
  const Function& as_function() const { return *f_; }

  // Python truthiness (undefined is false, as in jinja2).
  bool truthy() const;
  // Python ==, with 1 == 1.0 == True and undefined equal only to undefined.
  bool equals(const Value& other) const;
  // "list", "dict", ... for error messages.
  const char* type_name() const;

 private:
  ValueKind kind_ = ValueKind::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<Array> a_;
  std::shared_ptr<Object> o_;
  std::shared_ptr<const Function> f_;
};

// str(v) as Python prints it: what `{{ v }}` and `|string` produce ("True", "None", "['a', 1]",
// "{'k': 'v'}", "1.0"); undefined prints as "".
std::string to_display_string(const Value& v);
// repr(v) as Python prints it (strings quoted).
std::string to_repr(const Value& v);
// Python's repr of a float ("1.0", "0.1", "1e+16", "1e-05", "inf", "nan").
std::string python_float_repr(double d);

// JSON as Python's json.dumps(v, ensure_ascii=False, indent=indent, sort_keys=false) writes it:
// separators ", " / ": " without indent, "," / ": " with it; non-ASCII kept; keys in order.
// indent < 0 means no indent.
Result<std::string> to_json(const Value& v, int indent = -1);
// Parses JSON (objects keep key order; integers stay ints).
Result<Value> parse_json(std::string_view text);

}  // namespace cera::runtime::chat

namespace cera::runtime::chat {

// Strings index, slice and measure by code point, as Python's str does.
std::vector<std::string> utf8_chars(std::string_view s);

}  // namespace cera::runtime::chat
