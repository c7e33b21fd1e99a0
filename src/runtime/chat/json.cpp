// JSON in and out of Value. Output follows Python's json.dumps as transformers' `tojson` filter
// calls it (ensure_ascii=False), because templates print tool schemas and the bytes must match.
#include <charconv>
#include <cmath>
#include <cstdio>

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

Status write_json(const Value& v, int indent, int depth, std::string& out) {
  const auto newline = [&](int d) {
    out += '\n';
    out.append(static_cast<size_t>(indent * d), ' ');
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
        if (indent >= 0) newline(depth + 1);
        CERA_RETURN_IF_ERROR(write_json(a[i], indent, depth + 1, out));
      }
      if (indent >= 0) newline(depth);
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
        if (indent >= 0) newline(depth + 1);
        write_json_string(k, out);
        out += ": ";
        CERA_RETURN_IF_ERROR(write_json(e, indent, depth + 1, out));
      }
      if (indent >= 0) newline(depth);
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

class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : s_(text) {}

  Result<Value> parse_document() {
    CERA_ASSIGN_OR_RETURN(Value v, parse_value(0));
    skip_ws();
    if (pos_ != s_.size()) return error("trailing characters");
    return v;
  }

 private:
  Status error(const std::string& what) const {
    return invalid_argument("JSON: " + what + " at offset " + std::to_string(pos_));
  }
  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t'))
      ++pos_;
  }
  bool consume(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Result<Value> parse_value(int depth) {
    if (depth > 256) return error("nesting too deep");
    skip_ws();
    if (pos_ >= s_.size()) return error("unexpected end");
    const char c = s_[pos_];
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') {
      CERA_ASSIGN_OR_RETURN(std::string str, parse_string());
      return Value(std::move(str));
    }
    if (consume("true")) return Value(true);
    if (consume("false")) return Value(false);
    if (consume("null")) return Value::none();
    return parse_number();
  }

  Result<Value> parse_object(int depth) {
    ++pos_;
    Object o;
    skip_ws();
    if (consume("}")) return Value(std::move(o));
    while (true) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') return error("expected a key");
      CERA_ASSIGN_OR_RETURN(std::string key, parse_string());
      skip_ws();
      if (!consume(":")) return error("expected ':'");
      CERA_ASSIGN_OR_RETURN(Value v, parse_value(depth + 1));
      o.set(std::move(key), std::move(v));
      skip_ws();
      if (consume("}")) return Value(std::move(o));
      if (!consume(",")) return error("expected ',' or '}'");
    }
  }

  Result<Value> parse_array(int depth) {
    ++pos_;
    Array a;
    skip_ws();
    if (consume("]")) return Value(std::move(a));
    while (true) {
      CERA_ASSIGN_OR_RETURN(Value v, parse_value(depth + 1));
      a.push_back(std::move(v));
      skip_ws();
      if (consume("]")) return Value(std::move(a));
      if (!consume(",")) return error("expected ',' or ']'");
    }
  }

  static void append_utf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  Result<uint32_t> parse_hex4() {
    if (pos_ + 4 > s_.size()) return error("short \\u escape");
    uint32_t cp = 0;
    auto r = std::from_chars(s_.data() + pos_, s_.data() + pos_ + 4, cp, 16);
    if (r.ptr != s_.data() + pos_ + 4) return error("bad \\u escape");
    pos_ += 4;
    return cp;
  }

  Result<std::string> parse_string() {
    ++pos_;
    std::string out;
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) break;
      const char e = s_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          CERA_ASSIGN_OR_RETURN(uint32_t cp, parse_hex4());
          if (cp >= 0xD800 && cp < 0xDC00 && consume("\\u")) {
            CERA_ASSIGN_OR_RETURN(uint32_t lo, parse_hex4());
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          append_utf8(cp, out);
          break;
        }
        default:
          return error(std::string("bad escape \\") + e);
      }
    }
    return error("unterminated string");
  }

  Result<Value> parse_number() {
    const size_t start = pos_;
    bool is_float = false;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '.' || c == 'e' || c == 'E' || c == '+' || (c == '-' && pos_ > start))
        is_float = true;
      else if (c < '0' || c > '9')
        break;
      ++pos_;
    }
    const std::string_view t = s_.substr(start, pos_ - start);
    if (t.empty() || t == "-") return error("unexpected character");
    if (!is_float) {
      int64_t i = 0;
      auto r = std::from_chars(t.data(), t.data() + t.size(), i);
      if (r.ec == std::errc() && r.ptr == t.data() + t.size()) return Value(i);
    }
    double d = 0;
    auto r = std::from_chars(t.data(), t.data() + t.size(), d);
    if (r.ec != std::errc() || r.ptr != t.data() + t.size()) return error("bad number");
    return Value(d);
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::string> to_json(const Value& v, int indent) {
  std::string out;
  CERA_RETURN_IF_ERROR(write_json(v, indent, 0, out));
  return out;
}

Result<Value> parse_json(std::string_view text) {
  return JsonParser(text).parse_document();
}

}  // namespace cera::runtime::chat
