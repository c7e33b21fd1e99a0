// Tokenizer for the Jinja subset. Text segments are trimmed according to the tag that follows
// ({%- / {{- strip all whitespace; lstrip_blocks strips a line's indentation before {% and {#)
// and the tag that precedes (-%} strips all; trim_blocks drops one newline after %} and #}).
#include "runtime/chat/lexer.h"

#include <algorithm>
#include <cctype>

#include "runtime/chat/python_escape.h"

namespace cera::runtime::chat {

std::string to_string(SourcePos pos) {
  return std::to_string(pos.line) + ":" + std::to_string(pos.column);
}

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  Result<std::vector<Token>> run() {
    bool line_starting = true;  // the text segment starts at the beginning of a line
    while (pos_ < src_.size()) {
      const size_t tag = find_tag(pos_);
      std::string_view text = src_.substr(pos_, tag - pos_);
      const SourcePos text_pos = pos_at(pos_);
      if (tag < src_.size()) {
        const char kind = src_[tag + 1];
        const char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
        if (sign == '-') {
          while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
        } else if (sign != '+' && kind != '{') {
          // lstrip_blocks: drop the indentation of a line that holds only this tag.
          const size_t nl = text.rfind('\n');
          const size_t line_start = nl == std::string_view::npos ? 0 : nl + 1;
          if (nl != std::string_view::npos || line_starting) {
            bool blank = true;
            for (size_t i = line_start; i < text.size(); ++i) blank = blank && is_space(text[i]);
            if (blank) text = text.substr(0, line_start);
          }
        }
      }
      if (!text.empty()) tokens_.push_back({TokenKind::kText, std::string(text), text_pos});
      if (tag >= src_.size()) break;
      pos_ = tag;
      CERA_RETURN_IF_ERROR(lex_tag());
      line_starting = pos_ == 0 || src_[pos_ - 1] == '\n';
    }
    tokens_.push_back({TokenKind::kEnd, "", pos_at(src_.size())});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return src_.size();
  }

  // A binary search in the line table: scanning from the start for every token made lexing
  // quadratic (20,000 nested ifs took minutes; now milliseconds).
  SourcePos pos_at(size_t offset) const {
    offset = std::min(offset, src_.size());
    const auto line = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
    return {static_cast<int>(line - line_starts_.begin()) + 1,
            static_cast<int>(offset - *line) + 1};
  }

  Status error(size_t at, const std::string& what) const {
    return invalid_argument("chat template " + to_string(pos_at(at)) + ": " + what);
  }

  // After a closing tag: "-" strips all following whitespace, otherwise trim_blocks drops one '\n'.
  void after_close(bool strip, bool is_block) {
    if (strip) {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
    } else if (is_block && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
  }

  Status lex_tag() {
    const size_t start = pos_;
    const char kind = src_[pos_ + 1];
    pos_ += 2;
    if (pos_ < src_.size() && (src_[pos_] == '-' || src_[pos_] == '+')) ++pos_;
    if (kind == '#') {
      const size_t end = src_.find("#}", pos_);
      if (end == std::string_view::npos) return error(start, "unterminated comment");
      const bool strip = end > pos_ && src_[end - 1] == '-';
      const bool plus = end > pos_ && src_[end - 1] == '+';
      pos_ = end + 2;
      after_close(strip, !plus);
      return ok_status();
    }
    const bool is_expr = kind == '{';
    tokens_.push_back({is_expr ? TokenKind::kExprBegin : TokenKind::kStmtBegin, "", pos_at(start)});
    const char close = is_expr ? '}' : '%';
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
      if (pos_ >= src_.size())
        return error(start, std::string("unterminated ") + (is_expr ? "{{" : "{%"));
      const char c = src_[pos_];
      // Closing tag (only outside brackets so `{{ {'a': {'b': 1}} }}` works).
      if (depth == 0) {
        size_t p = pos_;
        const bool strip = c == '-';
        const bool plus = c == '+';
        if (strip || plus) ++p;
        if (p + 1 < src_.size() && src_[p] == close && src_[p + 1] == '}') {
          tokens_.push_back(
              {is_expr ? TokenKind::kExprEnd : TokenKind::kStmtEnd, "", pos_at(pos_)});
          pos_ = p + 2;
          after_close(strip, !is_expr && !plus);
          return ok_status();
        }
      }
      const size_t tok_start = pos_;
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        while (pos_ < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_'))
          ++pos_;
        tokens_.push_back({TokenKind::kName, std::string(src_.substr(tok_start, pos_ - tok_start)),
                           pos_at(tok_start)});
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        bool is_float = false;
        while (pos_ < src_.size() &&
               (std::isdigit(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_'))
          ++pos_;
        if (pos_ + 1 < src_.size() && src_[pos_] == '.' &&
            std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
          is_float = true;
          ++pos_;
          while (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_]))) ++pos_;
        }
        // Exponent: 1e3, 2.5e-4 (jinja2 reads these as floats).
        if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
          size_t p = pos_ + 1;
          if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
          if (p < src_.size() && std::isdigit(static_cast<unsigned char>(src_[p]))) {
            is_float = true;
            pos_ = p;
            while (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_])))
              ++pos_;
          }
        }
        std::string t;
        for (char d : src_.substr(tok_start, pos_ - tok_start))
          if (d != '_') t += d;
        tokens_.push_back({is_float ? TokenKind::kFloat : TokenKind::kInt, t, pos_at(tok_start)});
      } else if (c == '\'' || c == '"') {
        CERA_ASSIGN_OR_RETURN(std::string s, lex_string(c));
        tokens_.push_back({TokenKind::kString, std::move(s), pos_at(tok_start)});
      } else {
        static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (std::string_view two : kTwo)
          if (src_.substr(pos_, 2) == two) op = std::string(two);
        if (op.empty()) {
          if (std::string_view("+-*/%~=()[]{},.:|<>").find(c) == std::string_view::npos)
            return error(pos_, std::string("unexpected character '") + c + "'");
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") ++depth;
        if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
        pos_ += op.size();
        tokens_.push_back({TokenKind::kOperator, op, pos_at(tok_start)});
      }
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

  // Python "unicode-escape" rules, which jinja2 applies to string literals; unknown escapes
  // keep their backslash.
  Result<std::string> lex_string(char quote) {
    const size_t start = pos_++;
    std::string out;
    while (pos_ < src_.size() && src_[pos_] != quote) {
      const char c = src_[pos_++];
      if (c != '\\' || pos_ >= src_.size()) {
        out += c;
        continue;
      }
      const PythonEscape esc = python_escape(src_, pos_, out);
      if (esc.kind == PythonEscape::Kind::kBadHex) return error(start, "bad escape in string literal");
      if (esc.kind == PythonEscape::Kind::kCodePoint) append_utf8(esc.code_point, out);
    }
    if (pos_ >= src_.size()) return error(start, "unterminated string literal");
    ++pos_;
    return out;
  }

  std::string_view src_;
  std::vector<size_t> line_starts_{0};  // offset of each line's first byte
  size_t pos_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

Result<std::vector<Token>> tokenize(std::string_view source) {
  // jinja2 turns \r\n and \r into \n and drops one final newline (keep_trailing_newline=False).
  std::string text;
  text.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      text += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      text += source[i];
    }
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return Lexer(text).run();
}

}  // namespace cera::runtime::chat
