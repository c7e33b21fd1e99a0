// Recursive-descent GBNF parser. Every element is a code point (string literals are decoded
// from UTF-8 and \xHH names U+00HH, as in llama.cpp); invalid UTF-8 in the grammar is an error,
// never a byte pattern. Recursion depth is bounded by GrammarLimits::max_nesting.
#include "runtime/grammar/gbnf_parser.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "runtime/grammar/utf8_ranges.h"
#include "tokenizer/unicode/unicode.h"

namespace cera::runtime::grammar {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

// A short, printable excerpt of the text at `pos` for error messages.
std::string excerpt(std::string_view text, size_t pos) {
  if (pos >= text.size()) return "end of input";
  std::string out = "'";
  for (size_t i = pos; i < text.size() && i < pos + 16 && text[i] != '\n'; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      static const char kHex[] = "0123456789ABCDEF";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (out == "'") return pos < text.size() && text[pos] == '\n' ? "end of line" : "end of input";
  return out + "'";
}

class Parser {
 public:
  Parser(std::string_view text, const GrammarLimits& limits) : text_(text), limits_(limits) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < text_.size(); ++i) {
      if (text_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  Result<GbnfAst> parse() {
    GbnfAst ast;
    skip_space();
    while (pos_ < text_.size()) {
      RuleDef rule;
      rule.at = where(pos_);
      if (!is_name_char(text_[pos_])) return error(pos_, "a rule name");
      rule.name = read_name();
      skip_inline_space();
      if (text_.substr(pos_, 3) != "::=") {
        return error(pos_, "'::=' after the rule name '" + rule.name + "'");
      }
      pos_ += 3;
      skip_space();
      CERA_ASSIGN_OR_RETURN(rule.body, parse_choice(0));
      if (pos_ < text_.size() && !at_rule_start()) {
        return error(pos_, text_[pos_] == ')' ? "no ')' here (no group is open)"
                                              : "an expression, '|', or a new rule 'name ::='");
      }
      ast.rules.push_back(std::move(rule));
    }
    if (ast.rules.empty()) return invalid_argument("gbnf: empty grammar: no rules (expected 'name ::= ...')");
    return ast;
  }

 private:
  SourcePos where(size_t pos) const {
    const auto next = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos);
    const size_t line = static_cast<size_t>(next - line_starts_.begin());  // >= 1
    return {static_cast<uint32_t>(line), static_cast<uint32_t>(pos - line_starts_[line - 1] + 1)};
  }

  Status error(size_t pos, const std::string& expected) const {
    const SourcePos p = where(pos);
    return invalid_argument("gbnf " + std::to_string(p.line) + ":" + std::to_string(p.column) +
                            ": expected " + expected + ", found " + excerpt(text_, pos));
  }

  void skip_space() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }
  void skip_inline_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }

  std::string read_name() {
    const size_t start = pos_;
    while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  // `name ::=` starts here: the current rule's body ends before it.
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < text_.size() && is_name_char(text_[p])) ++p;
    if (p == pos_) return false;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    return text_.substr(p, 3) == "::=";
  }

  Result<Expr> parse_choice(uint32_t depth) {
    Expr choice{.kind = ExprKind::kChoice, .at = where(pos_)};
    for (;;) {
      CERA_ASSIGN_OR_RETURN(Expr seq, parse_sequence(depth));
      choice.children.push_back(std::move(seq));
      if (pos_ < text_.size() && text_[pos_] == '|') {
        ++pos_;
        skip_space();
        continue;
      }
      break;
    }
    if (choice.children.size() == 1) return std::move(choice.children[0]);
    return choice;
  }

  Result<Expr> parse_sequence(uint32_t depth) {
    Expr seq{.kind = ExprKind::kSequence, .at = where(pos_)};
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '|' || c == ')' || at_rule_start()) break;
      CERA_ASSIGN_OR_RETURN(Expr item, parse_primary(depth));
      skip_space();
      CERA_RETURN_IF_ERROR(parse_postfix(item));
      seq.children.push_back(std::move(item));
    }
    if (seq.children.size() == 1) return std::move(seq.children[0]);
    return seq;
  }

  Status parse_postfix(Expr& item) {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      const size_t op_pos = pos_;
      uint32_t min = 0, max = 0;
      if (c == '*') {
        min = 0, max = kUnbounded, ++pos_;
      } else if (c == '+') {
        min = 1, max = kUnbounded, ++pos_;
      } else if (c == '?') {
        min = 0, max = 1, ++pos_;
      } else if (c == '{') {
        ++pos_;
        skip_inline_space();
        CERA_ASSIGN_OR_RETURN(min, parse_count());
        skip_inline_space();
        max = min;
        if (pos_ < text_.size() && text_[pos_] == ',') {
          ++pos_;
          skip_inline_space();
          max = kUnbounded;
          if (pos_ < text_.size() && text_[pos_] != '}') {
            CERA_ASSIGN_OR_RETURN(max, parse_count());
            skip_inline_space();
          }
        }
        if (pos_ >= text_.size() || text_[pos_] != '}') return error(pos_, "',' or '}' in the repetition");
        ++pos_;
        if (max < min) {
          return error(op_pos, "a repetition {m,n} with m <= n (here m = " + std::to_string(min) +
                                   ", n = " + std::to_string(max) + ")");
        }
      } else {
        break;
      }
      Expr rep{.kind = ExprKind::kRepeat, .at = where(op_pos), .min = min, .max = max};
      rep.children.push_back(std::move(item));
      item = std::move(rep);
      skip_space();
    }
    return ok_status();
  }

  Result<uint32_t> parse_count() {
    const size_t start = pos_;
    uint64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      value = value * 10 + static_cast<uint64_t>(text_[pos_] - '0');
      if (value > limits_.max_repetition) {
        return error(start, "a repetition count at most " + std::to_string(limits_.max_repetition) +
                                " (GrammarLimits::max_repetition)");
      }
      ++pos_;
    }
    if (pos_ == start) return error(pos_, "a number in the repetition");
    return static_cast<uint32_t>(value);
  }

  Result<Expr> parse_primary(uint32_t depth) {
    const size_t start = pos_;
    const char c = text_[pos_];
    if (c == '"') return parse_literal();
    if (c == '[') return parse_class();
    if (c == '.') {
      ++pos_;
      return Expr{.kind = ExprKind::kCharClass, .at = where(start), .ranges = complement_ranges({})};
    }
    if (c == '(') {
      if (depth + 1 > limits_.max_nesting) {
        return error(start, "groups nested at most " + std::to_string(limits_.max_nesting) +
                                " deep (GrammarLimits::max_nesting)");
      }
      ++pos_;
      skip_space();
      CERA_ASSIGN_OR_RETURN(Expr inner, parse_choice(depth + 1));
      if (pos_ >= text_.size() || text_[pos_] != ')') {
        const SourcePos open = where(start);
        return error(pos_, "')' to close the group opened at " + std::to_string(open.line) + ":" +
                               std::to_string(open.column));
      }
      ++pos_;
      return inner;
    }
    if (is_name_char(c)) {
      return Expr{.kind = ExprKind::kRuleRef, .at = where(start), .text = read_name()};
    }
    return error(pos_, "an expression (a \"string\", a [class], '.', '(' or a rule name)");
  }

  // One code point of a literal or class: an escape or a UTF-8 sequence.
  Result<uint32_t> parse_char() {
    const size_t start = pos_;
    const unsigned char c = static_cast<unsigned char>(text_[pos_]);
    if (c == '\\') {
      if (pos_ + 1 >= text_.size()) return error(pos_, "an escape after '\\'");
      const char e = text_[pos_ + 1];
      pos_ += 2;
      switch (e) {
        case 'n': return uint32_t{'\n'};
        case 't': return uint32_t{'\t'};
        case 'r': return uint32_t{'\r'};
        case '\\': case '"': case '[': case ']': case '-': case '^': return static_cast<uint32_t>(e);
        case 'x': return parse_hex(start, 2);
        case 'u': return parse_hex(start, 4);
        case 'U': return parse_hex(start, 8);
        default:
          return error(start, "an escape \\n \\t \\r \\\\ \\\" \\[ \\] \\- \\^ \\xHH \\uHHHH or \\UHHHHHHHH");
      }
    }
    if (c < 0x80) {
      ++pos_;
      return uint32_t{c};
    }
    int len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
    if (c >= 0xF5) len = 0;
    if (len == 0 || pos_ + len > text_.size()) return error(start, "valid UTF-8");
    uint32_t cp = c & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      const unsigned char cc = static_cast<unsigned char>(text_[pos_ + i]);
      if ((cc & 0xC0) != 0x80) return error(start, "valid UTF-8");
      cp = (cp << 6) | (cc & 0x3F);
    }
    const uint32_t min_for_len[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_for_len[len] || cp > kMaxCodepoint || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return error(start, "valid UTF-8");
    }
    pos_ += len;
    return cp;
  }

  Result<uint32_t> parse_hex(size_t start, int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= text_.size() || !std::isxdigit(static_cast<unsigned char>(text_[pos_]))) {
        return error(pos_, std::to_string(digits) + " hex digits in the escape");
      }
      const char h = text_[pos_++];
      v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
    }
    if (v > kMaxCodepoint) return error(start, "a code point at most \\U0010FFFF");
    if (v >= 0xD800 && v <= 0xDFFF) return error(start, "a character, not a UTF-16 surrogate");
    return v;
  }

  Result<Expr> parse_literal() {
    const size_t start = pos_;
    Expr lit{.kind = ExprKind::kLiteral, .at = where(start)};
    ++pos_;
    for (;;) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') {
        return error(pos_, "'\"' to close the string opened at " + std::to_string(lit.at.line) + ":" +
                               std::to_string(lit.at.column));
      }
      if (text_[pos_] == '"') break;
      CERA_ASSIGN_OR_RETURN(uint32_t cp, parse_char());
      tokenizer::unicode::append_utf8(lit.text, cp);  // cp: checked above, never a surrogate
    }
    ++pos_;
    return lit;
  }

  Result<Expr> parse_class() {
    const size_t start = pos_;
    Expr cls{.kind = ExprKind::kCharClass, .at = where(start)};
    ++pos_;
    bool negated = false;
    if (pos_ < text_.size() && text_[pos_] == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CodepointRange> ranges;
    for (;;) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') {
        return error(pos_, "']' to close the class opened at " + std::to_string(cls.at.line) + ":" +
                               std::to_string(cls.at.column));
      }
      if (text_[pos_] == ']') break;
      const size_t item = pos_;
      CERA_ASSIGN_OR_RETURN(uint32_t lo, parse_char());
      uint32_t hi = lo;
      if (pos_ + 1 < text_.size() && text_[pos_] == '-' && text_[pos_ + 1] != ']') {
        ++pos_;
        CERA_ASSIGN_OR_RETURN(hi, parse_char());
        if (hi < lo) return error(item, "a range whose start is not after its end");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    if (ranges.empty()) return error(start, "a character class with at least one character");
    cls.ranges = negated ? complement_ranges(normalize_ranges(std::move(ranges))) : normalize_ranges(std::move(ranges));
    if (cls.ranges.empty()) return error(start, "a character class that matches some character");
    return cls;
  }

  std::string_view text_;
  const GrammarLimits& limits_;
  std::vector<size_t> line_starts_;  // offset of each line's first byte
  size_t pos_ = 0;
};

}  // namespace

Result<GbnfAst> parse_gbnf(std::string_view text, const GrammarLimits& limits) {
  if (text.size() > limits.max_text_bytes) {
    return out_of_range("gbnf: the grammar is " + std::to_string(text.size()) + " bytes, more than " +
                        std::to_string(limits.max_text_bytes) + " (GrammarLimits::max_text_bytes)");
  }
  return Parser(text, limits).parse();
}

}  // namespace cera::runtime::grammar
