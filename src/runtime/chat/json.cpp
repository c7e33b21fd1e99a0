// JSON in and out of Value. Output follows Python's json.dumps as transformers' `tojson` filter
// calls it (ensure_ascii=False), because templates print tool schemas and the bytes must match.
#include <charconv>
#include <cmath>
#include <cstdio>

#include "format/json.h"
#include "runtime/chat/limits.h"
#include "runtime/chat/value.h"

namespace cera::runtime::chat {
namespace {

void write_json_string(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

struct JsonWriter {
  int indent;
  uint64_t max_bytes;
  std::string out;
};

Status too_long(const JsonWriter& w) {
  return limit_error("a JSON text longer", w.max_bytes, "bytes", "max_value_bytes");
}

Status check_size(const JsonWriter& w) {
  return w.out.size() > w.max_bytes ? too_long(w) : ok_status();
}

Status write_json(const Value& v, int depth, JsonWriter& w) {
  std::string& out = w.out;
  const int indent = w.indent;
  const auto newline = [&](int d) -> Status {
    const uint64_t pad = static_cast<uint64_t>(indent) * static_cast<uint64_t>(d);
    if (!fits(out.size(), pad + 1, w.max_bytes)) return too_long(w);
    out += '\n';
    out.append(static_cast<size_t>(pad), ' ');
    return ok_status();
  };
  const char* item_sep = indent < 0 ? ", " : ",";
  switch (v.kind()) {
    case ValueKind::kNone:
      out += "null";
      return ok_status();
    case ValueKind::kBool:
      out += v.as_bool() ? "true" : "false";
      return ok_status();
    case ValueKind::kInt:
      out += std::to_string(v.as_int());
      return ok_status();
    case ValueKind::kFloat: {
      const double d = v.as_double();
      if (std::isnan(d))
        out += "NaN";
      else if (std::isinf(d))
        out += d > 0 ? "Infinity" : "-Infinity";
      else
        out += python_float_repr(d);
      return ok_status();
    }
    case ValueKind::kString:
      write_json_string(v.as_string(), out);
      return ok_status();
    case ValueKind::kArray: {
      const Array& a = v.as_array();
      if (a.empty()) {
        out += "[]";
        return ok_status();
      }
      out += '[';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i > 0) out += item_sep;
        if (indent >= 0) CERA_RETURN_IF_ERROR(newline(depth + 1));
        CERA_RETURN_IF_ERROR(write_json(a[i], depth + 1, w));
        CERA_RETURN_IF_ERROR(check_size(w));
      }
      if (indent >= 0) CERA_RETURN_IF_ERROR(newline(depth));
      out += ']';
      return ok_status();
    }
    case ValueKind::kObject: {
      const Object& o = v.as_object();
      if (o.is_namespace)
        return invalid_argument("Object of type Namespace is not JSON serializable");
      if (o.entries.empty()) {
        out += "{}";
        return ok_status();
      }
      out += '{';
      bool first = true;
      for (const auto& [k, e] : o.entries) {
        if (!first) out += item_sep;
        first = false;
        if (indent >= 0) CERA_RETURN_IF_ERROR(newline(depth + 1));
        write_json_string(k, out);
        out += ": ";
        CERA_RETURN_IF_ERROR(write_json(e, depth + 1, w));
        CERA_RETURN_IF_ERROR(check_size(w));
      }
      if (indent >= 0) CERA_RETURN_IF_ERROR(newline(depth));
      out += '}';
      return ok_status();
    }
    case ValueKind::kUndefined:
      return invalid_argument("Object of type Undefined is not JSON serializable");
    case ValueKind::kFunction:
      return invalid_argument("Object of type function is not JSON serializable");
  }
  return ok_status();
}

// JSON text is parsed by the one strict JSON reader of the project (format/json.h); here its
// document becomes a template Value, objects keeping their key order like Python's json.loads
// (a repeated key keeps the last value, as json.loads does).
Value from_json(const format::JsonValue& j) {
  switch (j.kind()) {
    case format::JsonKind::kNull: return Value::none();
    case format::JsonKind::kBool: return Value(*j.as_bool());
    case format::JsonKind::kNumber:
      if (auto i = j.as_int()) return Value(*i);
      return Value(*j.as_double());
    case format::JsonKind::kString: return Value(*j.as_string());
    case format::JsonKind::kArray: {
      Array a;
      for (const format::JsonValue& e : *j.as_array()) a.push_back(from_json(e));
      return Value(std::move(a));
    }
    case format::JsonKind::kObject: {
      std::vector<std::pair<std::string, Value>> entries;
      for (const auto& [key, value] : *j.as_object()) entries.emplace_back(key, from_json(value));
      return Value(make_object(std::move(entries)));
    }
  }
  return Value::none();
}

}  // namespace

Result<std::string> to_json(const Value& v, int indent, uint64_t max_bytes) {
  JsonWriter w{indent, max_bytes, {}};
  CERA_RETURN_IF_ERROR(write_json(v, 0, w));
  CERA_RETURN_IF_ERROR(check_size(w));
  return std::move(w.out);
}

Result<Value> parse_json(std::string_view text) {
  CERA_ASSIGN_OR_RETURN(const format::JsonValue j, format::parse_json(text));
  return from_json(j);
}

}  // namespace cera::runtime::chat
