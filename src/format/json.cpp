// Recursive-descent JSON parser. Numbers are parsed with strtod over a validated lexeme (the
// grammar check is ours, so strtod's leniency — hex, "inf", leading '+' — never applies).
#include "format/json.h"

#include <cerrno>
#include <cstdlib>

#include "core/read_file.h"

namespace cera::format {

JsonValue JsonValue::make_bool(bool b) {
  JsonValue v;
  v.kind_ = JsonKind::kBool;
  v.bool_ = b;
  return v;
}
JsonValue JsonValue::make_number(double d, std::optional<int64_t> exact_int) {
  JsonValue v;
  v.kind_ = JsonKind::kNumber;
  v.number_ = d;
  v.int_ = exact_int;
  return v;
}
JsonValue JsonValue::make_string(std::string s) {
  JsonValue v;
  v.kind_ = JsonKind::kString;
  v.string_ = std::move(s);
  return v;
}
JsonValue JsonValue::make_array(std::vector<JsonValue> items) {
  JsonValue v;
  v.kind_ = JsonKind::kArray;
  v.array_ = std::move(items);
  return v;
}
JsonValue JsonValue::make_object(std::vector<Member> members) {
  JsonValue v;
  v.kind_ = JsonKind::kObject;
  v.object_ = std::move(members);
  return v;
}

std::optional<bool> JsonValue::as_bool() const {
  if (kind_ != JsonKind::kBool) return std::nullopt;
  return bool_;
}
std::optional<double> JsonValue::as_double() const {
  if (kind_ != JsonKind::kNumber) return std::nullopt;
  return number_;
}
std::optional<int64_t> JsonValue::as_int() const {
  if (kind_ != JsonKind::kNumber) return std::nullopt;
  return int_;
}
const std::string* JsonValue::as_string() const { return kind_ == JsonKind::kString ? &string_ : nullptr; }
const std::vector<JsonValue>* JsonValue::as_array() const {
  return kind_ == JsonKind::kArray ? &array_ : nullptr;
}
const std::vector<JsonValue::Member>* JsonValue::as_object() const {
  return kind_ == JsonKind::kObject ? &object_ : nullptr;
}
const JsonValue* JsonValue::find(std::string_view key) const {
  if (kind_ != JsonKind::kObject) return nullptr;
  for (const Member& m : object_) {
    if (m.first == key) return &m.second;
  }
  return nullptr;
}
size_t JsonValue::size() const {
  if (kind_ == JsonKind::kArray) return array_.size();
  if (kind_ == JsonKind::kObject) return object_.size();
  return 0;
}

namespace {

constexpr int kMaxDepth = 512;

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Result<JsonValue> document() {
    skip_ws();
    JsonValue v;
    CERA_RETURN_IF_ERROR(value(v, 0));
    skip_ws();
    if (pos_ != s_.size()) return error("unexpected content after the JSON value");
    return v;
  }

 private:
  // "line L, column C (byte B)": columns count bytes, from 1.
  Status error(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return corrupt("JSON: " + what + " at line " + std::to_string(line) + ", column " +
                   std::to_string(col) + " (byte " + std::to_string(pos_) + ")");
  }

  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }

  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Status value(JsonValue& out, int depth) {
    if (depth > kMaxDepth) return error("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    if (pos_ >= s_.size()) return error("unexpected end of input, expected a value");
    const char c = s_[pos_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      std::string str;
      CERA_RETURN_IF_ERROR(string(str));
      out = JsonValue::make_string(std::move(str));
      return {};
    }
    if (c == '-' || (c >= '0' && c <= '9')) return number(out);
    if (literal("true")) {
      out = JsonValue::make_bool(true);
      return {};
    }
    if (literal("false")) {
      out = JsonValue::make_bool(false);
      return {};
    }
    if (literal("null")) {
      out = JsonValue();
      return {};
    }
    return error(std::string("unexpected character '") + c + "', expected a value");
  }

  Status object(JsonValue& out, int depth) {
    ++pos_;  // '{'
    std::vector<JsonValue::Member> members;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      out = JsonValue::make_object(std::move(members));
      return {};
    }
    while (true) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') return error("expected a string key");
      std::string key;
      CERA_RETURN_IF_ERROR(string(key));
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != ':') return error("expected ':' after an object key");
      ++pos_;
      skip_ws();
      JsonValue v;
      CERA_RETURN_IF_ERROR(value(v, depth + 1));
      members.emplace_back(std::move(key), std::move(v));
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        break;
      }
      return error("expected ',' or '}' in an object");
    }
    out = JsonValue::make_object(std::move(members));
    return {};
  }

  Status array(JsonValue& out, int depth) {
    ++pos_;  // '['
    std::vector<JsonValue> items;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      out = JsonValue::make_array(std::move(items));
      return {};
    }
    while (true) {
      skip_ws();
      JsonValue v;
      CERA_RETURN_IF_ERROR(value(v, depth + 1));
      items.push_back(std::move(v));
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        break;
      }
      return error("expected ',' or ']' in an array");
    }
    out = JsonValue::make_array(std::move(items));
    return {};
  }

  static bool is_digit(char c) { return c >= '0' && c <= '9'; }

  Status number(JsonValue& out) {
    const size_t start = pos_;
    bool integral = true;
    if (s_[pos_] == '-') ++pos_;
    if (pos_ >= s_.size() || !is_digit(s_[pos_])) return error("expected a digit in a number");
    if (s_[pos_] == '0') {
      ++pos_;
      if (pos_ < s_.size() && is_digit(s_[pos_])) return error("leading zero in a number");
    } else {
      while (pos_ < s_.size() && is_digit(s_[pos_])) ++pos_;
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      integral = false;
      ++pos_;
      if (pos_ >= s_.size() || !is_digit(s_[pos_])) return error("expected a digit after '.'");
      while (pos_ < s_.size() && is_digit(s_[pos_])) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (pos_ >= s_.size() || !is_digit(s_[pos_])) return error("expected a digit in an exponent");
      while (pos_ < s_.size() && is_digit(s_[pos_])) ++pos_;
    }
    const std::string lexeme(s_.substr(start, pos_ - start));
    const double d = std::strtod(lexeme.c_str(), nullptr);
    std::optional<int64_t> exact;
    if (integral) {
      errno = 0;
      const long long i = std::strtoll(lexeme.c_str(), nullptr, 10);
      if (errno == 0) exact = static_cast<int64_t>(i);
    }
    out = JsonValue::make_number(d, exact);
    return {};
  }

  static void put_utf8(std::string& out, uint32_t cp) {
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

  Status hex4(uint32_t& out) {
    if (s_.size() - pos_ < 4) return error("truncated \\u escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_ + i];
      uint32_t d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else return error("bad hex digit in a \\u escape");
      out = out * 16 + d;
    }
    pos_ += 4;
    return {};
  }

  // Validates one UTF-8 sequence starting at pos_ (RFC 3629: no overlongs, no surrogates).
  Status utf8_sequence(std::string& out) {
    const auto b0 = static_cast<unsigned char>(s_[pos_]);
    int len = 0;
    uint32_t cp = 0, min = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF) len = 2, cp = b0 & 0x1F, min = 0x80;
    else if (b0 >= 0xE0 && b0 <= 0xEF) len = 3, cp = b0 & 0x0F, min = 0x800;
    else if (b0 >= 0xF0 && b0 <= 0xF4) len = 4, cp = b0 & 0x07, min = 0x10000;
    else return error("invalid UTF-8 byte in a string");
    if (s_.size() - pos_ < static_cast<size_t>(len)) return error("truncated UTF-8 sequence in a string");
    for (int i = 1; i < len; ++i) {
      const auto b = static_cast<unsigned char>(s_[pos_ + i]);
      if ((b & 0xC0) != 0x80) return error("invalid UTF-8 continuation byte in a string");
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return error("invalid UTF-8 code point in a string");
    }
    out.append(s_.substr(pos_, len));
    pos_ += len;
    return {};
  }

  Status string(std::string& out) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= s_.size()) return error("unterminated string");
      const char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return {};
      }
      if (static_cast<unsigned char>(c) < 0x20) return error("control character in a string");
      if (static_cast<unsigned char>(c) >= 0x80) {
        CERA_RETURN_IF_ERROR(utf8_sequence(out));
        continue;
      }
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= s_.size()) return error("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = 0;
          CERA_RETURN_IF_ERROR(hex4(cp));
          if (cp >= 0xDC00 && cp <= 0xDFFF) return error("lone low surrogate in a \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (s_.substr(pos_, 2) != "\\u") return error("high surrogate without a low surrogate");
            pos_ += 2;
            uint32_t lo = 0;
            CERA_RETURN_IF_ERROR(hex4(lo));
            if (lo < 0xDC00 || lo > 0xDFFF) return error("high surrogate followed by a non-low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          put_utf8(out, cp);
          break;
        }
        default:
          --pos_;
          return error(std::string("unknown escape '\\") + e + "'");
      }
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

Result<JsonValue> parse_json(std::string_view text) { return Parser(text).document(); }

Result<JsonValue> read_json_file(const std::string& path) {
  // The largest JSON files of a checkpoint are tokenizer.json files of a few tens of MB.
  constexpr uint64_t kMaxJsonBytes = 512ull << 20;
  CERA_ASSIGN_OR_RETURN(std::string text, read_file(path, kMaxJsonBytes));
  auto v = parse_json(text);
  if (!v.ok()) return v.status().with_context(path);
  return v;
}

}  // namespace cera::format
