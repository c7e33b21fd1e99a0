// Value: the small dynamic type chat templates compute with (Python/JSON-like: undefined, none,
// bool, int, float, string, list, ordered dict, callable). Lists and dicts are shared by
// reference like Python's, which is what makes `namespace()` attribute assignment visible.
// Each list and dict caches its deep size when built, so the evaluator can bound values in
// O(1) however they were made (sharing included: [a, a] doubles what printing it costs).
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

// A dict from key/value pairs in O(n), where Object::set() would be O(n^2): a repeated key
// keeps its first position and its last value, as Python's dict does.
Object make_object(std::vector<std::pair<std::string, Value>> entries);

// Arguments of a call: positional then keyword, in source order.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* keyword_arg(std::string_view name) const;
  // The argument at `index` if given by position, else the keyword `name`, else `fallback`
  // (none when not given; an overload, as Value is incomplete here).
  Value arg(size_t index, std::string_view name) const;
  Value arg(size_t index, std::string_view name, Value fallback) const;
};

using Function = std::function<Result<Value>(const CallArgs&)>;

// How big a value is through every nested list and dict; a child shared several times counts
// each time, as printing or comparing the value visits it each time. Lists and dicts are
// immutable once built, except namespaces, whose attributes change: a namespace counts as one
// opaque element (nothing inside it is counted), the evaluator checks each attribute value
// when it is assigned, and a namespace never holds another one, so no cycle can form.
struct ValueSize {
  uint64_t items = 0;          // list elements and dict entries, nested ones included
  uint64_t bytes = 0;          // string bytes, dict keys included
  uint32_t depth = 0;          // list/dict nesting: 0 for a scalar or a string, 1 for [1]
  bool has_namespace = false;  // this value is a namespace or holds one
};

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
  // A float converts toward zero, saturating (nan is 0): never the undefined cast.
  int64_t as_int() const { return kind_ == ValueKind::kFloat ? saturating_int(d_) : i_; }
  double as_double() const { return kind_ == ValueKind::kFloat ? d_ : static_cast<double>(i_); }
  const std::string& as_string() const { return *s_; }
  // Shared: mutating through these changes every copy (Python reference semantics). Only a
  // namespace's attributes may change after construction (the cached size depends on it).
  Array& as_array() const { return a_->items; }
  Object& as_object() const { return o_->object; }
  const Function& as_function() const { return *f_; }

  // Python truthiness (undefined is false, as in jinja2).
  bool truthy() const;
  // Python ==, with 1 == 1.0 == True and undefined equal only to undefined.
  bool equals(const Value& other) const;
  // "list", "dict", ... for error messages.
  const char* type_name() const;
  // O(1): cached for lists and dicts.
  ValueSize size() const;

 private:
  static int64_t saturating_int(double d);

  struct ArrayBox {
    Array items;
    ValueSize size;
  };
  struct ObjectBox {
    Object object;
    ValueSize size;
  };

  ValueKind kind_ = ValueKind::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<ArrayBox> a_;
  std::shared_ptr<ObjectBox> o_;
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
// indent < 0 means no indent. Stops with an error once the text passes `max_bytes` (indent
// multiplies the output by nesting depth, so it cannot be checked up front).
Result<std::string> to_json(const Value& v, int indent = -1, uint64_t max_bytes = UINT64_MAX);
// Parses JSON (objects keep key order; integers stay ints).
Result<Value> parse_json(std::string_view text);

}  // namespace cera::runtime::chat

namespace cera::runtime::chat {

// Strings index, slice and measure by code point, as Python's str does. A code point is a lead
// byte and the continuation bytes its value announces (not validated; at most what is left).
std::vector<std::string> utf8_chars(std::string_view s);
// The byte offset of the code point after the one starting at `i` (< s.size()).
size_t utf8_next(std::string_view s, size_t i);
// The number of code points, without building them.
size_t utf8_length(std::string_view s);
// True when every byte is ASCII, so code point i is byte i (the fast path of indexing).
bool is_ascii(std::string_view s);

}  // namespace cera::runtime::chat
