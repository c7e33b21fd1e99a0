// LFM2's pythonic calls `[f(a=1, b='x'), g()]` read into JSON: a small recursive-descent
// reader of Python keyword calls whose values are literals (strings in either quote with
// Python's escapes, ints, floats, True/False/None, lists, tuples as arrays, dicts with string
// keys). Nothing is evaluated; any other expression is an error. Nesting is bounded.
#include <nlohmann/json.hpp>

#include "runtime/chat/python_escape.h"
#include "runtime/chat/tool_call_parts.h"
#include "tokenizer/unicode/unicode.h"

namespace cera::runtime::chat::tool_call {
namespace {

using Json = nlohmann::ordered_json;
constexpr int kMaxDepth = 64;

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}

  Result<std::vector<Call>> calls() {
    std::vector<Call> out;
    skip();
    const bool bracketed = eat('[');
    for (;;) {
      skip();
      if (bracketed && eat(']')) break;
      CERA_ASSIGN_OR_RETURN(Call c, call());
      out.push_back(std::move(c));
      skip();
      if (eat(',')) continue;
      if (bracketed && !eat(']')) return error("',' or ']' after a call");
      break;
    }
    skip();
    if (p_ != s_.size()) return error("the end of the calls");
    if (out.empty()) return invalid_argument("an empty list of calls");
    return out;
  }

 private:
  Status error(std::string_view expected) const {
    return invalid_argument("pythonic call: expected " + std::string(expected) + " at byte " +
                            std::to_string(p_));
  }
  void skip() {
    while (p_ < s_.size() && is_space(s_[p_])) ++p_;
  }
  bool eat(char c) {
    if (p_ < s_.size() && s_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }
  static bool ident_char(char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (!first && ((c >= '0' && c <= '9') || c == '.' || c == '-'));
  }
  std::string ident() {
    const size_t start = p_;
    while (p_ < s_.size() && ident_char(s_[p_], p_ == start)) ++p_;
    return std::string(s_.substr(start, p_ - start));
  }

  Result<Call> call() {
    Call c{.name = ident()};
    if (c.name.empty()) return error("a function name");
    skip();
    if (!eat('(')) return error("'(' after the function name");
    Json args = Json::object();
    for (;;) {
      skip();
      if (eat(')')) break;
      const size_t at = p_;
      std::string key = ident();
      skip();
      if (key.empty() || !eat('=')) {
        p_ = at;
        return error("a keyword argument name=value (positional arguments have no name)");
      }
      skip();
      CERA_ASSIGN_OR_RETURN(Json v, value(0));
      args[key] = std::move(v);
      skip();
      if (eat(',')) continue;
      if (!eat(')')) return error("',' or ')' in the arguments");
      break;
    }
    c.arguments = args.dump(-1, ' ', false, Json::error_handler_t::replace);
    return c;
  }

  Result<Json> value(int depth) {
    if (depth > kMaxDepth) return error("less nesting");
    if (p_ >= s_.size()) return error("a value");
    const char c = s_[p_];
    if (c == '"' || c == '\'') return string();
    if (c == '[' || c == '(') return sequence(c == '[' ? ']' : ')', depth);
    if (c == '{') return dict(depth);
    if (c == '-' || c == '+' || (c >= '0' && c <= '9') || c == '.') return number();
    const std::string word = ident();
    if (word == "True" || word == "true") return Json(true);
    if (word == "False" || word == "false") return Json(false);
    if (word == "None" || word == "null") return Json(nullptr);
    return error("a Python literal");
  }

  Result<Json> sequence(char close, int depth) {
    ++p_;
    Json out = Json::array();
    for (;;) {
      skip();
      if (eat(close)) return out;
      CERA_ASSIGN_OR_RETURN(Json v, value(depth + 1));
      out.push_back(std::move(v));
      skip();
      if (eat(',')) continue;
      if (!eat(close)) return error(std::string("',' or '") + close + "'");
      return out;
    }
  }

  Result<Json> dict(int depth) {
    ++p_;
    Json out = Json::object();
    for (;;) {
      skip();
      if (eat('}')) return out;
      if (p_ >= s_.size() || (s_[p_] != '"' && s_[p_] != '\'')) return error("a string key");
      CERA_ASSIGN_OR_RETURN(Json k, string());
      skip();
      if (!eat(':')) return error("':' after a key");
      skip();
      CERA_ASSIGN_OR_RETURN(Json v, value(depth + 1));
      out[k.get<std::string>()] = std::move(v);
      skip();
      if (eat(',')) continue;
      if (!eat('}')) return error("',' or '}'");
      return out;
    }
  }

  Result<Json> number() {
    const size_t start = p_;
    if (s_[p_] == '-' || s_[p_] == '+') ++p_;
    bool is_float = false;
    size_t digits = 0;
    auto run = [&] {
      while (p_ < s_.size() && s_[p_] >= '0' && s_[p_] <= '9') ++p_, ++digits;
    };
    run();
    if (p_ < s_.size() && s_[p_] == '.') ++p_, is_float = true, run();
    if (digits == 0) return error("digits");
    if (p_ < s_.size() && (s_[p_] == 'e' || s_[p_] == 'E')) {
      ++p_, is_float = true;
      if (p_ < s_.size() && (s_[p_] == '-' || s_[p_] == '+')) ++p_;
      const size_t before = digits;
      run();
      if (digits == before) return error("exponent digits");
    }
    std::string text(s_.substr(start, p_ - start));
    if (text[0] == '+') text.erase(0, 1);
    if (is_float) {
      // JSON wants digits on both sides of the point: "1." and ".5" are Python, not JSON.
      const size_t dot = text.find('.');
      if (dot != std::string::npos) {
        if (dot == 0 || text[dot - 1] == '-') text.insert(dot, "0");
        const size_t d = text.find('.');
        if (d + 1 == text.size() || !(text[d + 1] >= '0' && text[d + 1] <= '9'))
          text.insert(d + 1, "0");
      }
      return Json(std::stod(text));
    }
    Json j = Json::parse(text, nullptr, false);  // integers beyond 64 bits become doubles
    if (j.is_discarded()) return error("a number");
    return j;
  }

  Result<Json> string() {
    const char q = s_[p_++];
    std::string out;
    while (p_ < s_.size() && s_[p_] != q) {
      char c = s_[p_++];
      if (c == '\n') return error("the string's closing quote before a newline");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (p_ >= s_.size()) break;
      const PythonEscape esc = python_escape(s_, p_, out);
      if (esc.kind == PythonEscape::Kind::kBadHex) return error("hex digits of an escape");
      if (esc.kind == PythonEscape::Kind::kCodePoint) {
        const uint32_t cp = esc.code_point;
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return error("a valid code point");
        tokenizer::unicode::append_utf8(out, cp);
      }
    }
    if (!eat(q)) return error("the string's closing quote");
    return Json(std::move(out));
  }

  std::string_view s_;
  size_t p_ = 0;
};

}  // namespace

Result<std::vector<Call>> parse_pythonic(std::string_view block) {
  return Reader(block).calls();
}

}  // namespace cera::runtime::chat::tool_call
