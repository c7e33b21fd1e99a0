// pattern (a regex subset, listed in json_schema.h) -> GBNF over the JSON-encoded string body.
// A pattern character that JSON must escape is emitted in its escaped form; classes never
// produce " \ or controls, so every expression stays inside one JSON string.
#include <string>

#include "runtime/grammar/json_schema_parts.h"

namespace cera::runtime::grammar {
namespace {

// Encoded form of one literal byte inside a JSON string, as a GBNF literal.
std::string json_char_literal(char c) {
  switch (c) {
    case '"': return "\"\\\\\\\"\"";  // \"
    case '\\': return "\"\\\\\\\\\"";  // \\  (also \/ is not needed for '/')
    case '\n': return "\"\\\\n\"";
    case '\r': return "\"\\\\r\"";
    case '\t': return "\"\\\\t\"";
    default: break;
  }
  if (static_cast<unsigned char>(c) < 0x20) {
    static const char* kHex = "0123456789abcdef";
    std::string esc = "\\u00";
    esc += kHex[(c >> 4) & 15];
    esc += kHex[c & 15];
    return gbnf_literal(esc);
  }
  return gbnf_literal(std::string(1, c));
}

class Parser {
 public:
  Parser(std::string_view p, std::string_view jchar, std::size_t max_repeat)
      : p_(p), jchar_(jchar), max_repeat_(max_repeat) {}

  Result<std::string> run() {
    bool start = false, end = false;
    if (!p_.empty() && p_.front() == '^') { start = true; p_.remove_prefix(1); }
    if (!p_.empty() && p_.back() == '$' && (p_.size() < 2 || p_[p_.size() - 2] != '\\')) { end = true; p_.remove_suffix(1); }
    CERA_ASSIGN_OR_RETURN(std::string body, alternation());
    if (i_ < p_.size()) return unsupported("unexpected '" + std::string(1, p_[i_]) + "' in pattern");
    std::string any = std::string(jchar_) + "*";
    return (start ? "" : any + " ") + "( " + body + " )" + (end ? "" : " " + any);
  }

 private:
  Result<std::string> alternation() {
    std::string out;
    for (;;) {
      CERA_ASSIGN_OR_RETURN(std::string seq, sequence());
      out += seq.empty() ? "\"\"" : seq;
      if (i_ < p_.size() && p_[i_] == '|') { ++i_; out += " | "; continue; }
      return out;
    }
  }

  Result<std::string> sequence() {
    std::string out;
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
      CERA_ASSIGN_OR_RETURN(std::string a, atom());
      CERA_ASSIGN_OR_RETURN(std::string q, quantifier());
      out += (out.empty() ? "" : " ") + a + q;
    }
    return out;
  }

  Result<std::string> quantifier() {
    if (i_ >= p_.size()) return std::string();
    char c = p_[i_];
    std::string q;
    if (c == '*' || c == '+' || c == '?') { ++i_; q = std::string(1, c); }
    else if (c == '{') {
      std::size_t close = p_.find('}', i_);
      if (close == std::string_view::npos) return unsupported("unterminated {m,n} in pattern");
      std::string inner(p_.substr(i_ + 1, close - i_ - 1));
      std::size_t comma = inner.find(',');
      auto num = [&](const std::string& s) -> long { return s.empty() ? -1 : std::stol(s); };
      for (char d : inner) if (!(d == ',' || (d >= '0' && d <= '9'))) return unsupported("bad {m,n} in pattern");
      long lo = num(comma == std::string::npos ? inner : inner.substr(0, comma));
      long hi = comma == std::string::npos ? lo : num(inner.substr(comma + 1));
      if (lo < 0) return unsupported("bad {m,n} in pattern");
      if (std::size_t(lo) > max_repeat_ || (hi >= 0 && std::size_t(hi) > max_repeat_)) return unsupported("repeat over max_repeat (" + std::to_string(max_repeat_) + ") in pattern");
      if (hi >= 0 && hi < lo) return unsupported("bad {m,n} in pattern");
      i_ = close + 1;
      q = "{" + std::to_string(lo) + (comma == std::string::npos ? "" : "," + (hi >= 0 ? std::to_string(hi) : "")) + "}";
    }
    if (!q.empty() && i_ < p_.size() && (p_[i_] == '?' || p_[i_] == '+')) return unsupported("lazy or possessive quantifiers are not supported in pattern");
    return q;
  }

  // Class members for an escape inside or outside [..]; empty when not a class escape.
  static std::string class_escape(char c) {
    switch (c) {
      case 'd': return "0-9";
      case 'w': return "a-zA-Z0-9_";
      case 's': return " ";  // \t \n \r appear only escaped in JSON: added as alternatives
      default: return "";
    }
  }

  Result<std::string> atom() {
    char c = p_[i_++];
    switch (c) {
      case '(': {
        if (i_ < p_.size() && p_[i_] == '?') {
          if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') i_ += 2;
          else return unsupported("lookaround and named groups are not supported in pattern");
        }
        CERA_ASSIGN_OR_RETURN(std::string inner, alternation());
        if (i_ >= p_.size() || p_[i_] != ')') return unsupported("unbalanced ( in pattern");
        ++i_;
        return "( " + inner + " )";
      }
      case '.': return std::string("[^\"\\\\\\x00-\\x1F]");
      case '[': return char_class();
      case '^': case '$': return unsupported("anchors are supported only at the ends of pattern");
      case '*': case '+': case '?': case '{': return unsupported("nothing to repeat in pattern");
      case '\\': return escape();
      default: {
        // A multi-byte UTF-8 character is one atom, so a quantifier repeats all of it.
        std::size_t start = i_ - 1;
        while (i_ < p_.size() && (static_cast<unsigned char>(p_[i_]) & 0xC0) == 0x80) ++i_;
        if (i_ - start > 1) return gbnf_literal(p_.substr(start, i_ - start));
        return json_char_literal(c);
      }
    }
  }

  Result<std::string> escape() {
    if (i_ >= p_.size()) return unsupported("trailing \\ in pattern");
    char e = p_[i_++];
    if (e == 'd') return std::string("[0-9]");
    if (e == 'w') return std::string("[a-zA-Z0-9_]");
    if (e == 's') return std::string("( \" \" | \"\\\\\" [tnrf] )");
    if (e == 'D') return std::string("[^0-9\"\\\\\\x00-\\x1F]");
    if (e == 'W') return std::string("[^a-zA-Z0-9_\"\\\\\\x00-\\x1F]");
    if (e == 'S') return std::string("[^ \"\\\\\\x00-\\x1F]");
    if (e == 'n') return json_char_literal('\n');
    if (e == 't') return json_char_literal('\t');
    if (e == 'r') return json_char_literal('\r');
    if (std::string_view(".\\/-^$*+?()[]{}|\"").find(e) != std::string_view::npos) return json_char_literal(e);
    return unsupported("\\" + std::string(1, e) + " is not supported in pattern");
  }

  static std::string class_char(char c) {
    if (c == ']' || c == '[' || c == '\\' || c == '^' || c == '-' || c == '"') return std::string("\\") + c;
    return std::string(1, c);
  }

  Result<std::string> char_class() {
    bool neg = i_ < p_.size() && p_[i_] == '^';
    if (neg) ++i_;
    std::string members;
    std::string extra;  // alternatives for members JSON escapes: " \ and \t \n \r
    bool first = true;
    while (i_ < p_.size() && (p_[i_] != ']' || first)) {
      first = false;
      char c = p_[i_++];
      std::string lo;
      char lo_char = c;
      if (c == '\\') {
        if (i_ >= p_.size()) return unsupported("trailing \\ in pattern");
        char e = p_[i_++];
        std::string cls = class_escape(e);
        if (!cls.empty()) {
          members += cls;
          if (e == 's' && !neg) extra += " | \"\\\\\" [tnrf]";
          continue;
        }
        if (e == 'n' || e == 't' || e == 'r') {
          if (!neg) extra += " | " + json_char_literal(e == 'n' ? '\n' : e == 't' ? '\t' : '\r');
          continue;
        }
        if (std::string_view(".\\/-^$*+?()[]{}|\"").find(e) == std::string_view::npos) return unsupported("\\" + std::string(1, e) + " is not supported in a pattern class");
        lo_char = e;
      } else if (c == '[') {
        return unsupported("nested classes ([[:alpha:]] and the like) are not supported in pattern");
      }
      if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        char hi = p_[i_ + 1];
        if (hi == '\\') return unsupported("escaped range ends are not supported in pattern classes");
        i_ += 2;
        if (hi < lo_char) return unsupported("bad range in pattern class");
        if (static_cast<unsigned char>(lo_char) < 0x20 || static_cast<unsigned char>(hi) >= 0x80) {
          return unsupported("class ranges outside printable ASCII are not supported in pattern");
        }
        // Split the range around " and \\: inside a JSON string they appear only escaped.
        char a = lo_char;
        for (char cut : {'"', '\\'}) {
          if (a <= cut && hi >= cut) {
            if (!neg) extra += " | " + json_char_literal(cut);
            if (a < cut) members += class_char(a) + "-" + class_char(char(cut - 1));
            a = char(cut + 1);
          }
        }
        if (a <= hi) members += class_char(a) + "-" + class_char(hi);
        continue;
      }
      if ((lo_char == '"' || lo_char == '\\') && !neg) {
        extra += " | " + json_char_literal(lo_char);
        continue;
      }
      members += class_char(lo_char);
    }
    if (i_ >= p_.size()) return unsupported("unterminated [ in pattern");
    ++i_;
    std::string cls = neg ? "[^" + members + "\"\\\\\\x00-\\x1F]" : "[" + members + "]";
    if (!neg && members.empty()) {
      if (extra.empty()) return unsupported("empty class in pattern");
      return "( " + extra.substr(3) + " )";
    }
    return extra.empty() ? cls : "( " + cls + extra + " )";
  }

  std::string_view p_;
  std::string_view jchar_;
  std::size_t max_repeat_;
  std::size_t i_ = 0;
};

}  // namespace

Result<std::string> pattern_to_gbnf(std::string_view pattern, std::string_view jchar, std::size_t max_repeat) {
  return Parser(pattern, jchar, max_repeat).run();
}

}  // namespace cera::runtime::grammar
