// GrammarRegex: ByteMatcher on regular grammars against std::wregex (ECMAScript, over code
// points: wchar_t is UTF-32 here) on thousands of seeded random strings per pair, whole-string
// match; plus ByteMatcher's all-or-nothing accept and byte-by-byte = all-at-once.
#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "runtime/grammar/grammar.h"
#include "tokenizer/unicode/unicode.h"

namespace cera::runtime::grammar {
namespace {

std::string utf8(const std::u32string& s) {
  std::string out;
  for (char32_t c : s) tokenizer::unicode::append_utf8(out, static_cast<uint32_t>(c));
  return out;
}

struct RegexCase {
  const char* gbnf;
  const wchar_t* regex;
  std::u32string alphabet;
};

const std::vector<RegexCase>& cases() {
  static const std::vector<RegexCase> c = {
      {R"(root ::= [a-c]+ "x"?)", L"[a-c]+x?", U"abcxd"},
      {R"(root ::= ( "ab" | "a" )* "b")", L"(ab|a)*b", U"abc"},
      {R"(root ::= [0-9]{2,4} ( "-" [0-9]{2} )?)", L"[0-9]{2,4}(-[0-9]{2})?", U"0123-x"},
      {R"(root ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?)",
       L"-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][-+]?[0-9]+)?", U"0159.-+eE"},
      {R"(root ::= [^abc]* "a")", L"[^abc]*a", U"abcxy\u00e9\u20ac\U0001F600\n"},
      {R"(root ::= [α-ω]{1,3} [^α-ω]?)", L"[\u03B1-\u03C9]{1,3}[^\u03B1-\u03C9]?", U"\u03b1\u03c9\u03c0a\u0391\n"},
      {R"(root ::= ( ( "a" | "b" ) "c"? ){2,3})", L"((a|b)c?){2,3}", U"abcd"},
      {"root ::= x y\nx ::= \"a\"*\ny ::= \"a\" \"b\"?", L"a*ab?", U"ab"},
      {R"(root ::= .{2} "!"?)", L"[\\s\\S]{2}!?", U"a!\n\u00e9\U0001F600\u0000"},
      {R"g(root ::= ( "(" [a-z]* ")" )+ | [x-z]{3})g", L"(\\([a-z]*\\))+|[x-z]{3}", U"()axyz"},
      {R"(root ::= ( "a"? "b"? )* "c")", L"(a?b?)*c", U"abc"},
      {R"(root ::= [😀-🙏]+ | "é" [^é])", L"[\U0001F600-\U0001F64F]+|\u00E9[^\u00E9]", U"\U0001F600\U0001F64F\U0001F650\u00e9e"},
      {R"(root ::= [a-z]{0,3} ( "," [a-z]{1,2} ){1,2})", L"[a-z]{0,3}(,[a-z]{1,2}){1,2}", U"ab,"},
      {R"(root ::= "\"" ( [^"\\] | "\\" ["\\n] )* "\"")", L"\"([^\"\\\\]|\\\\[\"\\\\n])*\"", U"\"\\na\u00e9"},
      {R"(root ::= [\x00-\x7F]+ [\u0080-\U0010FFFF]*)", L"[\\x00-\\x7F]+[\u0080-\U0010FFFF]*", U"a\u007f\u0080\u07ff\u0800\uffff\U00010000\U0010FFFF"},
  };
  return c;
}

TEST(GrammarRegex, WholeMatchEqualsStdRegex) {
  std::mt19937 rng(20);
  size_t total = 0, positives = 0;
  for (const RegexCase& c : cases()) {
    auto g = compile_gbnf(c.gbnf);
    ASSERT_TRUE(g.ok()) << c.gbnf << ": " << g.status().message();
    const std::wregex re(c.regex, std::regex::ECMAScript);
    std::uniform_int_distribution<size_t> len(0, 9), pick(0, c.alphabet.size() - 1);
    for (int i = 0; i < 4000; ++i) {
      std::u32string s;
      for (size_t n = len(rng); n > 0; --n) s += c.alphabet[pick(rng)];
      std::wstring ws(s.begin(), s.end());
      const bool want = std::regex_match(ws, re);
      ByteMatcher m(*g);
      const std::string bytes = utf8(s);
      const bool got = m.accept(bytes) && m.can_end();
      ++total;
      positives += want;
      ASSERT_EQ(got, want) << c.gbnf << " on '" << bytes << "'";
    }
  }
  std::printf("GrammarRegex: %zu strings over %zu grammars, %zu matching, all equal to std::wregex\n", total,
              cases().size(), positives);
  EXPECT_GT(positives, total / 20);  // the alphabets reach both outcomes often
}

TEST(GrammarRegex, ByteByByteEqualsAllAtOnceAndFailuresChangeNothing) {
  std::mt19937 rng(7);
  for (const RegexCase& c : cases()) {
    auto g = compile_gbnf(c.gbnf);
    ASSERT_TRUE(g.ok());
    std::uniform_int_distribution<size_t> len(0, 9), pick(0, c.alphabet.size() - 1);
    for (int i = 0; i < 500; ++i) {
      std::u32string s;
      for (size_t n = len(rng); n > 0; --n) s += c.alphabet[pick(rng)];
      const std::string bytes = utf8(s);
      ByteMatcher whole(*g), split(*g);
      const bool whole_ok = whole.accept(bytes);
      size_t taken = 0;
      for (; taken < bytes.size(); ++taken) {
        // A failing multi-byte attempt first: it must leave the state as it was.
        EXPECT_FALSE(split.accept(bytes.substr(taken, 1) + "\xFF"));
        if (!split.accept(bytes.substr(taken, 1))) break;
      }
      EXPECT_EQ(whole_ok, taken == bytes.size()) << c.gbnf << " '" << bytes << "'";
      if (whole_ok) {
        EXPECT_EQ(whole.can_end(), split.can_end());
      }
    }
  }
}

}  // namespace
}  // namespace cera::runtime::grammar
