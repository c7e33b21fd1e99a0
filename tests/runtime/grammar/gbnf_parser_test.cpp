// GbnfParser: what the GBNF syntax accepts (checked through ByteMatcher on the sentences each
// construct should and should not match) and the exact error text of every refusal.
#include "runtime/grammar/gbnf_parser.h"

#include <gtest/gtest.h>

#include <random>

#include "mask_fixture.h"
#include "runtime/grammar/grammar.h"

namespace cera::runtime::grammar {
namespace {

std::string error_of(std::string_view text, const GrammarLimits& limits = {}) {
  auto g = compile_gbnf(text, "root", limits);
  return g.ok() ? "(compiled)" : g.status().message();
}

bool full_match(std::string_view grammar, std::string_view input) {
  auto g = compile_gbnf(grammar);
  EXPECT_TRUE(g.ok()) << grammar << ": " << g.status().message();
  if (!g.ok()) return false;
  ByteMatcher m(*g);
  return m.accept(input) && m.can_end();
}

TEST(GbnfParser, LiteralsAndEscapes) {
  EXPECT_TRUE(full_match(R"(root ::= "a\n\t\r\"\\b")", "a\n\t\r\"\\b"));
  EXPECT_TRUE(full_match(R"(root ::= "\x41\u00e9\U0001F600")", "A\xC3\xA9\xF0\x9F\x98\x80"));
  EXPECT_TRUE(full_match(R"(root ::= "\[\]\-\^")", "[]-^"));
  EXPECT_TRUE(full_match("root ::= \"\xC3\xA9t\xC3\xA9\"", "\xC3\xA9t\xC3\xA9"));  // raw UTF-8
  EXPECT_TRUE(full_match(R"(root ::= "")", ""));
  // \xHH names a code point, so \xE9 is U+00E9 in UTF-8 (two bytes), never the raw byte.
  EXPECT_TRUE(full_match(R"(root ::= "\xE9")", "\xC3\xA9"));
  EXPECT_FALSE(full_match(R"(root ::= "\xE9")", "\xE9"));
}

TEST(GbnfParser, CharacterClasses) {
  EXPECT_TRUE(full_match("root ::= [a-cx]+", "abcxa"));
  EXPECT_FALSE(full_match("root ::= [a-cx]+", "abd"));
  EXPECT_TRUE(full_match("root ::= [^a-c]", "d"));
  EXPECT_TRUE(full_match("root ::= [^a-c]", "\xE2\x82\xAC"));  // U+20AC
  EXPECT_FALSE(full_match("root ::= [^a-c]", "b"));
  EXPECT_TRUE(full_match("root ::= [α-ω]{2}", "\xCE\xB1\xCF\x89"));
  EXPECT_TRUE(full_match("root ::= [-a]+", "-a-"));   // a leading '-' is literal
  EXPECT_TRUE(full_match("root ::= [a-]+", "a-"));    // so is a trailing one
  EXPECT_TRUE(full_match(R"(root ::= [\]\\]+)", "]\\"));
  EXPECT_TRUE(full_match(R"(root ::= [\x00-\x1F])", std::string(1, '\0')));
  EXPECT_TRUE(full_match(R"(root ::= [\U0001F600-\U0001F64F])", "\xF0\x9F\x98\x80"));
  // `.` is any character, newline included, as in llama.cpp (llguidance's `.` excludes "\n":
  // GrammarReference counts those steps and checks them against `[^\n]`).
  EXPECT_TRUE(full_match("root ::= .", "\n"));
  EXPECT_TRUE(full_match("root ::= .", "\xF4\x8F\xBF\xBF"));  // U+10FFFF
  // Never a surrogate, an overlong form or a lone continuation byte: those are not UTF-8.
  EXPECT_FALSE(full_match("root ::= .", "\xED\xA0\x80"));
  EXPECT_FALSE(full_match("root ::= .", "\xC0\xAF"));
  EXPECT_FALSE(full_match("root ::= .", "\x80"));
  EXPECT_FALSE(full_match("root ::= [^a]", "\xED\xBF\xBF"));
}

TEST(GbnfParser, OperatorsAndRepetition) {
  const char* g = "root ::= \"a\" ( \"b\" | \"c\" )* \"d\"? \"e\"+";
  EXPECT_TRUE(full_match(g, "ae"));
  EXPECT_TRUE(full_match(g, "abcbdee"));
  EXPECT_FALSE(full_match(g, "ad"));
  EXPECT_TRUE(full_match("root ::= \"x\"{3}", "xxx"));
  EXPECT_FALSE(full_match("root ::= \"x\"{3}", "xx"));
  EXPECT_FALSE(full_match("root ::= \"x\"{3}", "xxxx"));
  EXPECT_TRUE(full_match("root ::= \"x\"{2,}", "xxxxxx"));
  EXPECT_FALSE(full_match("root ::= \"x\"{2,}", "x"));
  EXPECT_TRUE(full_match("root ::= \"x\"{ 1 , 2 }", "xx"));
  EXPECT_FALSE(full_match("root ::= \"x\"{1,2}", "xxx"));
  EXPECT_TRUE(full_match("root ::= \"x\"{0}", ""));
  EXPECT_TRUE(full_match("root ::= (\"a\"?)* \"!\"", "aa!"));  // a nullable body under *
  EXPECT_TRUE(full_match("root ::= (\"a\"*)+ \"!\"", "!"));
}

TEST(GbnfParser, RulesCommentsAndLines) {
  const char* g = R"(# a comment line
root ::= greeting " " who   # trailing comment
greeting ::= "hi"
  | "hello"
who ::= (
    "world"
  | "there"
)
)";
  EXPECT_TRUE(full_match(g, "hello there"));
  EXPECT_TRUE(full_match(g, "hi world"));
  EXPECT_FALSE(full_match(g, "hi"));
  // A body may continue on the next line; a new rule starts only at `name ::=`.
  EXPECT_TRUE(full_match("root ::= \"a\"\n  \"b\"\nx-y_2 ::= \"c\"", "ab"));
  EXPECT_TRUE(full_match("root ::= \"(\" root \")\" | \"\"", "(())"));
  EXPECT_TRUE(full_match("root::=\"a\"", "a"));
}

TEST(GbnfParser, OtherRootRule) {
  auto g = compile_gbnf("a ::= \"x\"\nb ::= a a", "b");
  ASSERT_TRUE(g.ok()) << g.status().message();
  ByteMatcher m(*g);
  EXPECT_TRUE(m.accept("xx") && m.can_end());
}

TEST(GbnfParser, SyntaxErrors) {
  EXPECT_EQ(error_of("root = \"a\""), "gbnf 1:6: expected '::=' after the rule name 'root', found '= \"a\"'");
  EXPECT_EQ(error_of("root ::= \"abc"), "gbnf 1:14: expected '\"' to close the string opened at 1:10, found end of input");
  EXPECT_EQ(error_of("root ::= \"ab\nc\""),
            "gbnf 1:13: expected '\"' to close the string opened at 1:10, found end of line");
  EXPECT_EQ(error_of("root ::= [a-z"), "gbnf 1:14: expected ']' to close the class opened at 1:10, found end of input");
  EXPECT_EQ(error_of("root ::= \"\\q\""),
            "gbnf 1:11: expected an escape \\n \\t \\r \\\\ \\\" \\[ \\] \\- \\^ \\xHH \\uHHHH or \\UHHHHHHHH, found '\\q\"'");
  EXPECT_EQ(error_of("root ::= \"\\x4\""), "gbnf 1:14: expected 2 hex digits in the escape, found '\"'");
  EXPECT_EQ(error_of("root ::= ( \"a\" "), "gbnf 1:16: expected ')' to close the group opened at 1:10, found end of input");
  EXPECT_EQ(error_of("root ::= \"a\" )"), "gbnf 1:14: expected no ')' here (no group is open), found ')'");
  EXPECT_EQ(error_of("root ::= \"a\" | @"),
            "gbnf 1:16: expected an expression (a \"string\", a [class], '.', '(' or a rule name), found '@'");
  EXPECT_EQ(error_of("::= \"a\""), "gbnf 1:1: expected a rule name, found '::= \"a\"'");
  EXPECT_EQ(error_of("root ::= [z-a]"), "gbnf 1:11: expected a range whose start is not after its end, found 'z-a]'");
  EXPECT_EQ(error_of("root ::= []"), "gbnf 1:10: expected a character class with at least one character, found '[]'");
  EXPECT_EQ(error_of("root ::= [^\\x00-\\U0010FFFF]"),
            "gbnf 1:10: expected a character class that matches some character, found '[^\\x00-\\U0010FFF'");
  EXPECT_EQ(error_of("root ::= \"a\"{3,2}"), "gbnf 1:13: expected a repetition {m,n} with m <= n (here m = 3, n = 2), found '{3,2}'");
  EXPECT_EQ(error_of("root ::= \"a\"{x}"), "gbnf 1:14: expected a number in the repetition, found 'x}'");
  EXPECT_EQ(error_of("root ::= \"a\"{2"), "gbnf 1:15: expected ',' or '}' in the repetition, found end of input");
  EXPECT_EQ(error_of("root ::= \"\xC3\""), "gbnf 1:11: expected valid UTF-8, found '\xC3\"'");
  EXPECT_EQ(error_of("root ::= \"\\uD800\""), "gbnf 1:11: expected a character, not a UTF-16 surrogate, found '\\uD800\"'");
  EXPECT_EQ(error_of("root ::= \"\\U00110000\""), "gbnf 1:11: expected a code point at most \\U0010FFFF, found '\\U00110000\"'");
  // Line and column count from 1, columns in bytes, over several lines.
  EXPECT_EQ(error_of("root ::= a\na ::= \"x\"\n  | [b"), "gbnf 3:7: expected ']' to close the class opened at 3:5, found end of input");
}

TEST(GbnfParser, SemanticErrors) {
  EXPECT_EQ(error_of(""), "gbnf: empty grammar: no rules (expected 'name ::= ...')");
  EXPECT_EQ(error_of("  # nothing but a comment\n\n"), "gbnf: empty grammar: no rules (expected 'name ::= ...')");
  EXPECT_EQ(error_of("root ::= item+"), "gbnf 1:10: undefined rule 'item' (no 'item ::= ...' in the grammar)");
  EXPECT_EQ(error_of("start ::= \"a\""), "gbnf: undefined root rule 'root' (no 'root ::= ...' in the grammar)");
  EXPECT_EQ(error_of("root ::= \"a\"\nroot ::= \"b\""), "gbnf 2:1: rule 'root' is defined twice (first at 1:1)");
  EXPECT_EQ(error_of("root ::= root \"a\" | \"b\""),
            "gbnf 1:1: left recursion: rule 'root' can reach itself without consuming input (root -> root)");
  EXPECT_EQ(error_of("root ::= a\na ::= b \"x\" | \"y\"\nb ::= c? a\nc ::= \"c\""),
            "gbnf 2:1: left recursion: rule 'a' can reach itself without consuming input (a -> b -> a)");
  EXPECT_EQ(error_of("root ::= \"a\" root"),
            "gbnf 1:1: rule 'root' can never end: every way through it needs a rule that never ends (recursion "
            "without a way out)");
  EXPECT_EQ(error_of("root ::= x\nx ::= \"(\" x \")\""),
            "gbnf 2:1: rule 'x' can never end: every way through it needs a rule that never ends (recursion "
            "without a way out)");
  // Right recursion and recursion after input are fine.
  EXPECT_EQ(error_of("root ::= \"a\" root | \"b\""), "(compiled)");
  // An unused rule is still checked for undefined references.
  EXPECT_EQ(error_of("root ::= \"a\"\nunused ::= nothing"),
            "gbnf 2:12: undefined rule 'nothing' (no 'nothing ::= ...' in the grammar)");
}

TEST(GbnfParser, Limits) {
  EXPECT_EQ(error_of("root ::= \"aaaaaaaa\"", {.max_text_bytes = 10}),
            "gbnf: the grammar is 19 bytes, more than 10 (GrammarLimits::max_text_bytes)");
  EXPECT_EQ(error_of("root ::= ((((\"a\"))))", {.max_nesting = 3}),
            "gbnf 1:13: expected groups nested at most 3 deep (GrammarLimits::max_nesting), found '(\"a\"))))'");
  EXPECT_EQ(error_of("root ::= \"a\"{10001}"),
            "gbnf 1:14: expected a repetition count at most 10000 (GrammarLimits::max_repetition), found '10001}'");
  EXPECT_EQ(error_of("root ::= \"a\"{10000}"), "(compiled)");
  EXPECT_EQ(error_of("root ::= [a-z]{1000}", {.max_states = 500}),
            "gbnf: the compiled grammar needs more than 500 automaton states (GrammarLimits::max_states)");
  // Deep nesting within the default limit parses (no recursion trouble), beyond it is refused.
  std::string deep = "root ::= " + std::string(128, '(') + "\"a\"" + std::string(128, ')');
  EXPECT_EQ(error_of(deep), "(compiled)");
  deep = "root ::= " + std::string(129, '(') + "\"a\"" + std::string(129, ')');
  EXPECT_EQ(error_of(deep).substr(0, 60), "gbnf 1:138: expected groups nested at most 128 deep (Grammar");
}

// Bad input: seeded mutations of the corpus grammars (bytes flipped, inserted, cut) compile or
// are refused with a message, and whatever compiles runs random bytes; nothing crashes or hangs
// (a libFuzzer target would do this without end; this keeps a fixed slice of it in CI).
TEST(GbnfParser, MutatedGrammarsAreRefusedOrWork) {
  const auto corpus = test::load_corpus();
  std::mt19937 rng(13);
  const std::string specials = "\"[]()|*+?{},.-^\\#:=\n \xC3\xFF";
  size_t compiled = 0, refused = 0;
  for (int round = 0; round < 4; ++round) {
    for (const auto& [name, text] : corpus) {
      std::string t = text;
      for (int k = 1 + static_cast<int>(rng() % 4); k > 0 && !t.empty(); --k) {
        const size_t at = rng() % t.size();
        switch (rng() % 4) {
          case 0: t[at] = specials[rng() % specials.size()]; break;
          case 1: t.insert(at, 1, specials[rng() % specials.size()]); break;
          case 2: t.erase(at, 1 + rng() % 8); break;
          default: t.resize(at); break;
        }
      }
      auto g = compile_gbnf(t, "root", GrammarLimits{});
      if (!g.ok()) {
        ++refused;
        EXPECT_EQ(g.status().message().rfind("gbnf", 0), 0u) << g.status().message();
        continue;
      }
      ++compiled;
      ByteMatcher m(*g);
      for (int i = 0; i < 64; ++i) m.accept(std::string(1, static_cast<char>(rng())));
    }
  }
  std::printf("GbnfParser: %zu mutated grammars compiled, %zu refused with a message\n", compiled, refused);
  EXPECT_GT(refused, 0u);
  EXPECT_GT(compiled, 0u);
}

}  // namespace
}  // namespace cera::runtime::grammar
