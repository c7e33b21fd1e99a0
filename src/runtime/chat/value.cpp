// Value construction, truthiness, equality and Python's str()/repr() spellings. The spellings
// matter: templates print lists, booleans and floats, and the output must match jinja2's bytes.
#include "runtime/chat/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <unordered_map>

namespace cera::runtime::chat {

const Value* Object::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

Value* Object::find(std::string_view key) {
  for (auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

void Object::set(std::string key, Value value) {
  if (Value* v = find(key)) {
    *v = std::move(value);
    return;
  }
  entries.emplace_back(std::move(key), std::move(value));
}

Object make_object(std::vector<std::pair<std::string, Value>> entries) {
  Object o;
  if (entries.size() <= 16) {  // a linear search beats hashing for the usual few keys
    for (auto& [k, v] : entries) o.set(std::move(k), std::move(v));
    return o;
  }
  std::unordered_map<std::string, size_t> index;
  o.entries.reserve(entries.size());
  for (auto& [k, v] : entries) {
    auto [it, fresh] = index.emplace(k, o.entries.size());
    if (fresh)
      o.entries.emplace_back(std::move(k), std::move(v));
    else
      o.entries[it->second].second = std::move(v);
  }
  return o;
}

const Value* CallArgs::keyword_arg(std::string_view name) const {
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return nullptr;
}

Value CallArgs::arg(size_t index, std::string_view name) const { return arg(index, name, Value()); }

Value CallArgs::arg(size_t index, std::string_view name, Value fallback) const {
  if (index < positional.size()) return positional[index];
  if (const Value* v = keyword_arg(name)) return *v;
  return fallback;
}

Value Value::none() {
  Value v;
  v.kind_ = ValueKind::kNone;
  return v;
}
Value::Value(bool b) : kind_(ValueKind::kBool), b_(b), i_(b ? 1 : 0) {}
Value::Value(int64_t i) : kind_(ValueKind::kInt), i_(i) {}
Value::Value(double d) : kind_(ValueKind::kFloat), d_(d) {}
Value::Value(std::string s)
    : kind_(ValueKind::kString), s_(std::make_shared<const std::string>(std::move(s))) {}
namespace {

uint64_t saturating_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

// Folds a child's size into its container's (the container's own level is added by the caller).
void add_child(ValueSize& total, const ValueSize& child) {
  total.items = saturating_add(total.items, saturating_add(child.items, 1));
  total.bytes = saturating_add(total.bytes, child.bytes);
  total.depth = std::max(total.depth, child.depth);
  total.has_namespace = total.has_namespace || child.has_namespace;
}

}  // namespace

// The sizes are computed here, once: O(elements), which building the container already costs.
Value::Value(Array a) : kind_(ValueKind::kArray), a_(std::make_shared<ArrayBox>()) {
  a_->items = std::move(a);
  ValueSize& size = a_->size;
  for (const Value& v : a_->items) add_child(size, v.size());
  ++size.depth;
}

Value::Value(Object o) : kind_(ValueKind::kObject), o_(std::make_shared<ObjectBox>()) {
  o_->object = std::move(o);
  ValueSize& size = o_->size;
  if (o_->object.is_namespace) {  // opaque: see ValueSize
    size.has_namespace = true;
    return;
  }
  for (const auto& [k, v] : o_->object.entries) {
    add_child(size, v.size());
    size.bytes = saturating_add(size.bytes, k.size());
  }
  ++size.depth;
}

int64_t Value::saturating_int(double d) {
  if (std::isnan(d)) return 0;
  if (d >= 9223372036854775807.0) return INT64_MAX;  // 2^63 as a double
  if (d <= -9223372036854775808.0) return INT64_MIN;
  return static_cast<int64_t>(d);
}

ValueSize Value::size() const {
  switch (kind_) {
    case ValueKind::kString:
      return {.bytes = s_->size()};
    case ValueKind::kArray:
      return a_->size;
    case ValueKind::kObject:
      return o_->size;
    default:
      return {};
  }
}

Value Value::function(Function f) {
  Value v;
  v.kind_ = ValueKind::kFunction;
  v.f_ = std::make_shared<const Function>(std::move(f));
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case ValueKind::kUndefined:
    case ValueKind::kNone:
      return false;
    case ValueKind::kBool:
      return b_;
    case ValueKind::kInt:
      return i_ != 0;
    case ValueKind::kFloat:
      return d_ != 0;
    case ValueKind::kString:
      return !s_->empty();
    case ValueKind::kArray:
      return !a_->items.empty();
    case ValueKind::kObject:
      return !o_->object.entries.empty();
    case ValueKind::kFunction:
      return true;
  }
  return false;
}

bool Value::equals(const Value& other) const {
  if (is_number() && other.is_number()) {
    if (kind_ == ValueKind::kFloat || other.kind_ == ValueKind::kFloat)
      return as_double() == other.as_double();
    return i_ == other.i_;
  }
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case ValueKind::kUndefined:
    case ValueKind::kNone:
      return true;
    case ValueKind::kString:
      return *s_ == *other.s_;
    case ValueKind::kArray: {
      const Array& a = a_->items;
      const Array& b = other.a_->items;
      if (a_ == other.a_) return true;
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i)
        if (!a[i].equals(b[i])) return false;
      return true;
    }
    case ValueKind::kObject: {
      // A namespace equals only itself, as jinja2's Namespace (no __eq__) does.
      if (o_ == other.o_) return true;
      if (o_->object.is_namespace || other.o_->object.is_namespace) return false;
      const Object& a = o_->object;
      const Object& b = other.o_->object;
      if (a.entries.size() != b.entries.size()) return false;
      for (const auto& [k, v] : a.entries) {
        const Value* w = b.find(k);
        if (w == nullptr || !v.equals(*w)) return false;
      }
      return true;
    }
    case ValueKind::kFunction:
      return f_ == other.f_;
    default:
      return false;
  }
}

const char* Value::type_name() const {
  switch (kind_) {
    case ValueKind::kUndefined:
      return "undefined";
    case ValueKind::kNone:
      return "NoneType";
    case ValueKind::kBool:
      return "bool";
    case ValueKind::kInt:
      return "int";
    case ValueKind::kFloat:
      return "float";
    case ValueKind::kString:
      return "str";
    case ValueKind::kArray:
      return "list";
    case ValueKind::kObject:
      return o_->object.is_namespace ? "Namespace" : "dict";
    case ValueKind::kFunction:
      return "function";
  }
  return "?";
}

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, then Python's layout: fixed for 1e-4 <= |d| < 1e16, else exponent.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp = std::stoi(sci.substr(e + 1));
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      std::string ip = digits.substr(0, std::min<size_t>(digits.size(), exp + 1));
      while (static_cast<int>(ip.size()) < exp + 1) ip += '0';
      std::string fp = static_cast<int>(digits.size()) > exp + 1 ? digits.substr(exp + 1) : "0";
      out = ip + "." + fp;
    } else {
      out = "0." + std::string(-exp - 1, '0') + digits;
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  return neg ? "-" + out : out;
}

namespace {

// Python's str.__repr__: single quotes unless the text has ' and no ".
std::string string_repr(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == static_cast<unsigned char>(q))
      out += std::string("\\") + static_cast<char>(q);
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += q;
  return out;
}

}  // namespace

std::string to_repr(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kString:
      return string_repr(v.as_string());
    case ValueKind::kArray: {
      std::string out = "[";
      bool first = true;
      for (const Value& e : v.as_array()) {
        if (!first) out += ", ";
        first = false;
        out += to_repr(e);
      }
      return out + "]";
    }
    case ValueKind::kObject: {
      if (v.as_object().is_namespace) return "<Namespace>";
      std::string out = "{";
      bool first = true;
      for (const auto& [k, e] : v.as_object().entries) {
        if (!first) out += ", ";
        first = false;
        out += string_repr(k) + ": " + to_repr(e);
      }
      return out + "}";
    }
    default:
      return to_display_string(v);
  }
}

std::string to_display_string(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return "";
    case ValueKind::kNone:
      return "None";
    case ValueKind::kBool:
      return v.as_bool() ? "True" : "False";
    case ValueKind::kInt:
      return std::to_string(v.as_int());
    case ValueKind::kFloat:
      return python_float_repr(v.as_double());
    case ValueKind::kString:
      return v.as_string();
    case ValueKind::kFunction:
      return "<function>";
    default:
      return to_repr(v);
  }
}

}  // namespace cera::runtime::chat

namespace cera::runtime::chat {

size_t utf8_next(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  return i + std::min(n, s.size() - i);
}

bool is_ascii(std::string_view s) {
  unsigned char any = 0;
  for (char c : s) any |= static_cast<unsigned char>(c);  // vectorizes: ~0.1 ns a byte
  return any < 0x80;
}

size_t utf8_length(std::string_view s) {
  if (is_ascii(s)) return s.size();
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i = utf8_next(s, i)) ++n;
  return n;
}

std::vector<std::string> utf8_chars(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const size_t next = utf8_next(s, i);
    out.emplace_back(s.substr(i, next - i));
    i = next;
  }
  return out;
}

}  // namespace cera::runtime::chat
