// GrammarTokenMatcher: masks over a small hand-made vocabulary against brute force over
// ByteMatcher (every token tried on a copy of the byte state), accept/rollback, end tokens.
#include "runtime/grammar/token_matcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "runtime/grammar/grammar.h"
#include "smollm2_vocab.h"

namespace cera::runtime::grammar {
namespace {

const char* kJson = R"(root ::= value
value ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* )? ws "}"
array ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws ::= [ \t\n]{0,4}
)";

TEST(GrammarTokenMatcher, DISABLED_SmokeSmollm2) {
  auto vocab = test::smollm2_vocab();
  if (!vocab) GTEST_SKIP() << test::kSmollm2Missing;
  auto g = compile_gbnf(kJson);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto t0 = std::chrono::steady_clock::now();
  auto tables = token_tables_for(*g, vocab);
  tables->precompute_all();
  auto t1 = std::chrono::steady_clock::now();
  std::printf("states %zu precompute %.1f ms\n", (*g)->states().size(),
              std::chrono::duration<double, std::milli>(t1 - t0).count());
  TokenMatcher m(tables);
  std::vector<uint32_t> mask(vocab->mask_words());
  const tokenizer::Tokenizer* tok = test::smollm2_tokenizer();
  auto ids = tok->encode(R"({"name": "Ada Lovelace", "born": 1815, "tags": ["math", "poet\u00e9"], "x": {"y": [1.5e3, null]}})");
  for (int32_t id : ids) {
    auto a = std::chrono::steady_clock::now();
    m.fill_mask(mask);
    auto b = std::chrono::steady_clock::now();
    int n = 0;
    for (uint32_t w : mask) n += __builtin_popcount(w);
    std::printf("%-12s allowed %6d  %.1f us\n", std::string(vocab->bytes(id)).c_str(), n,
                std::chrono::duration<double, std::micro>(b - a).count());
    ASSERT_TRUE((mask[id >> 5] >> (id & 31)) & 1) << id;
    ASSERT_TRUE(m.accept_token(id));
  }
  EXPECT_TRUE(m.can_end());
}

}  // namespace
}  // namespace cera::runtime::grammar
