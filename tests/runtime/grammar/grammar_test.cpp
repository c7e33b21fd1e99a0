// GrammarByteMatcher: hand-written grammars, accepted and refused byte strings.
#include "runtime/grammar/grammar.h"

#include <gtest/gtest.h>

namespace cera::runtime::grammar {
namespace {

bool matches(std::string_view grammar, std::string_view input) {
  auto g = compile_gbnf(grammar);
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok()) return false;
  ByteMatcher m(*g);
  return m.accept(input) && m.can_end();
}

TEST(GrammarByteMatcher, Basics) {
  EXPECT_TRUE(matches("root ::= \"ab\" | \"c\"", "ab"));
  EXPECT_TRUE(matches("root ::= \"ab\" | \"c\"", "c"));
  EXPECT_FALSE(matches("root ::= \"ab\" | \"c\"", "a"));
  EXPECT_FALSE(matches("root ::= \"ab\" | \"c\"", "abc"));
  EXPECT_TRUE(matches("root ::= [a-z]+ \"!\"", "hello!"));
  EXPECT_TRUE(matches("root ::= x{2,3}\nx ::= \"ab\"", "ababab"));
  EXPECT_FALSE(matches("root ::= x{2,3}\nx ::= \"ab\"", "abababab"));
  EXPECT_FALSE(matches("root ::= x{2,3}\nx ::= \"ab\"", "ab"));
  EXPECT_TRUE(matches("root ::= \"(\" root \")\" | \"\"", "((()))"));
  EXPECT_FALSE(matches("root ::= \"(\" root \")\" | \"\"", "(()"));
  EXPECT_TRUE(matches("root ::= [^a]*", "b\xce\xb1z"));
  EXPECT_FALSE(matches("root ::= [^a]*", "bab"));
  EXPECT_TRUE(matches("root ::= (\"a\"?)* \"b\"", "aaab"));
}

}  // namespace
}  // namespace cera::runtime::grammar
