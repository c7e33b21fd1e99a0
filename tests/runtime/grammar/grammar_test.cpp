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

// 200000 nested calls whose return states are all final: the byte "1" ends every one of them
// at once (a pop chain as long as the stack; it must not recurse). Closing all of them would
// be quadratic: after each "]" every depth may still close, a stack per depth, inherent to
// this ambiguous grammar; so only a few are closed.
TEST(GrammarByteMatcher, DeepNestingPopsWithoutRecursion) {
  auto g = compile_gbnf("root ::= v\nv ::= \"[\" v \"]\"? | \"1\"");
  ASSERT_TRUE(g.ok()) << g.status().message();
  ByteMatcher m(*g);
  const size_t depth = 200000;
  ASSERT_TRUE(m.accept(std::string(depth, '[')));
  EXPECT_FALSE(m.can_end());
  ASSERT_TRUE(m.accept("1"));
  EXPECT_TRUE(m.can_end());
  ASSERT_TRUE(m.accept("]]]"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.accept("1"));
}

TEST(GrammarByteMatcher, AllOrNothing) {
  auto g = compile_gbnf(R"(root ::= "ab" "cd"*)");
  ASSERT_TRUE(g.ok());
  ByteMatcher m(*g);
  EXPECT_FALSE(m.accept("abx"));
  EXPECT_FALSE(m.can_end());
  ASSERT_TRUE(m.accept("ab"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.accept("cdc" "x"));
  EXPECT_TRUE(m.can_end());  // still right after "ab"
  ASSERT_TRUE(m.accept("c"));
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.can_continue());
  ASSERT_TRUE(m.accept("d"));
  EXPECT_TRUE(m.can_end());
}

}  // namespace
}  // namespace cera::runtime::grammar
