// GrammarTokenMatcher: the precomputed-table masks equal direct byte matching of every token
// (a ByteMatcher copy per token: checks the context-independent/uncertain split, not the
// grammar semantics, which GrammarReference and GrammarRegex check against outside references),
// on a synthetic vocabulary over the corpus grammars; end and never tokens; partial UTF-8
// tokens; rollback and its bound; compaction on long inputs; shared tables across threads.
#include "runtime/grammar/token_matcher.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <thread>

#include "mask_fixture.h"
#include "runtime/grammar/grammar.h"
#include "slow_build.h"
#include "smollm2_vocab.h"

namespace cera::runtime::grammar {
namespace {

// Every single byte, structural JSON pieces, partial and whole UTF-8, random short strings,
// an end token, a control token and an empty token.
std::shared_ptr<const VocabIndex> synthetic_vocab() {
  static const std::shared_ptr<const VocabIndex> v = [] {
    std::vector<std::string> pieces;
    std::vector<TokenRole> roles;
    auto add = [&](std::string p, TokenRole r = TokenRole::kText) {
      pieces.push_back(std::move(p));
      roles.push_back(r);
    };
    add("<eos>", TokenRole::kEndOfGeneration);
    add("<|ctl|>", TokenRole::kNever);
    add("");
    for (int b = 0; b < 256; ++b) add(std::string(1, static_cast<char>(b)));
    for (const char* p : {"{\"", "\":", "\",", "\"}", " \"", "\"]", "[{", "}]", "},", "true", "tr", "ue", "false",
                          "null", "nul", "12", "3.", "e+", "0.5", "-1", "\u00e9", "\"\u00e9", "\u00e9\"", "\\u00",
                          "\\n", "\"\n", ", \"", "\": \"", "\": ", "\u03b1\u03b2", "\xCE", "\xF0\x9F", "\xF0\x9F\x98",
                          "\U0001F600", "<to>", "</", "SELECT ", " FROM ", "users", "- ", "ab", "abc\"", "green",
                          "gre", "en", "en\"", "\"color\"", "ye", "yes", "no", ", because ", "\n\n", "  ", "\t"}) {
      add(p);
    }
    std::mt19937 rng(5);
    const std::string alphabet = "abcdefxyz0129 .,:;\"{}[]()\\-_+e\n\t#<>=/";
    for (int i = 0; i < 1500; ++i) {
      std::string s;
      for (int n = 1 + static_cast<int>(rng() % 5); n > 0; --n) s += alphabet[rng() % alphabet.size()];
      add(s);
    }
    return VocabIndex::from_pieces(pieces, roles);
  }();
  return v;
}

bool bit(const std::vector<uint32_t>& mask, int32_t id) { return (mask[id >> 5] >> (id & 31)) & 1; }

// The mask by trying every token on a copy of the byte state.
std::vector<uint32_t> brute_mask(const VocabIndex& v, const ByteMatcher& at, bool ended) {
  std::vector<uint32_t> mask(v.mask_words(), 0);
  if (ended) return mask;
  for (int32_t id = 0; id < v.n_vocab(); ++id) {
    bool ok = false;
    if (v.role(id) == TokenRole::kEndOfGeneration) {
      ok = at.can_end();
    } else if (v.role(id) == TokenRole::kText) {
      ByteMatcher probe = at;
      ok = probe.accept(v.bytes(id));
    }
    if (ok) mask[id >> 5] |= uint32_t{1} << (id & 31);
  }
  return mask;
}

std::shared_ptr<const TokenTables> tables_of(std::string_view gbnf, std::shared_ptr<const VocabIndex> v) {
  auto g = compile_gbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::make_shared<const TokenTables>(*g, std::move(v));
}

TEST(GrammarTokenMatcher, MasksEqualDirectByteMatchingOnCorpus) {
  auto v = synthetic_vocab();
  const auto corpus = test::load_corpus();
  ASSERT_GE(corpus.size(), 90u);
  std::mt19937 rng(11);
  size_t steps = 0;
  std::vector<uint32_t> mask(v->mask_words());
  // Under the sanitizers (84 s of their suite on 2 cores) one walk of 8 steps a grammar: every
  // grammar still compiles and masks; the release suite walks twice, 16 steps.
  const int walks = cera::test::kSlowBuild ? 1 : 2, steps_max = cera::test::kSlowBuild ? 8 : 16;
  for (const auto& [name, text] : corpus) {
    auto tables = tables_of(text, v);
    for (int walk = 0; walk < walks; ++walk) {
      TokenMatcher m(tables);
      ByteMatcher bytes(tables->grammar_ptr());
      for (int step = 0; step < steps_max; ++step) {
        m.fill_mask(mask);
        ASSERT_EQ(mask, brute_mask(*v, bytes, m.ended())) << name << " step " << step;
        ++steps;
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < v->n_vocab(); ++id) {
          if (bit(mask, id)) allowed.push_back(id);
        }
        if (allowed.empty()) break;
        const int32_t id = allowed[rng() % allowed.size()];
        ASSERT_TRUE(m.accept_token(id));
        if (v->role(id) == TokenRole::kEndOfGeneration) break;
        ASSERT_TRUE(bytes.accept(v->bytes(id)));
      }
    }
  }
  std::printf("GrammarTokenMatcher: %zu masks over %zu grammars equal direct byte matching\n", steps, corpus.size());
}

// Counted repetitions share tables between positions no token can tell apart
// (table_classes.h); every position, especially the last ones before the count runs out, must
// still get its exact mask.
TEST(GrammarTokenMatcher, CountedRepetitionSharesTablesExactly) {
  auto v = synthetic_vocab();
  auto tables = tables_of(R"(root ::= "\"" ( [^"\\] | "\\" ["\\n] ){0,120} "\"" ( "," [0-9]{2,40} )?)", v);
  EXPECT_LT(tables->table_count() * 4, tables->grammar().states().size());
  std::mt19937 rng(21);
  std::vector<uint32_t> mask(v->mask_words());
  for (int walk = 0; walk < 4; ++walk) {
    TokenMatcher m(tables);
    ByteMatcher bytes(tables->grammar_ptr());
    for (int step = 0; step < 200 && !m.ended(); ++step) {
      m.fill_mask(mask);
      ASSERT_EQ(mask, brute_mask(*v, bytes, false)) << "walk " << walk << " step " << step;
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < v->n_vocab(); ++id) {
        // Mostly single characters, so walks get deep into the repetition.
        if (bit(mask, id) && (v->bytes(id).size() == 1 || rng() % 8 == 0)) allowed.push_back(id);
      }
      if (allowed.empty()) break;
      const int32_t id = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.accept_token(id));
      if (v->role(id) == TokenRole::kText) {
        ASSERT_TRUE(bytes.accept(v->bytes(id)));
      }
    }
  }
}

TEST(GrammarTokenMatcher, EndTokensOnlyWhenTheGrammarCanEnd) {
  auto v = synthetic_vocab();
  const int32_t eos = 0;
  TokenMatcher m(tables_of(R"(root ::= "ab" "c"?)", v));
  std::vector<uint32_t> mask(v->mask_words());
  m.fill_mask(mask);
  EXPECT_FALSE(bit(mask, eos));
  EXPECT_FALSE(m.accept_token(eos));
  ASSERT_TRUE(m.accept_token(3 + 'a'));
  ASSERT_TRUE(m.accept_token(3 + 'b'));
  EXPECT_TRUE(m.can_end());
  m.fill_mask(mask);
  EXPECT_TRUE(bit(mask, eos));
  EXPECT_TRUE(bit(mask, 3 + 'c'));
  ASSERT_TRUE(m.accept_token(eos));
  EXPECT_TRUE(m.ended());
  m.fill_mask(mask);
  EXPECT_EQ(std::count(mask.begin(), mask.end(), 0u), static_cast<long>(mask.size()));
  EXPECT_FALSE(m.accept_token(3 + 'c'));
  EXPECT_FALSE(m.accept_token(eos));
}

TEST(GrammarTokenMatcher, NeverTokensAndInvalidIds) {
  auto v = synthetic_vocab();
  TokenMatcher m(tables_of(R"(root ::= .*)", v));
  std::vector<uint32_t> mask(v->mask_words());
  m.fill_mask(mask);
  EXPECT_FALSE(bit(mask, 1));  // control
  EXPECT_FALSE(bit(mask, 2));  // empty
  EXPECT_TRUE(bit(mask, 0));   // the end token: .* can end here
  EXPECT_FALSE(m.accept_token(1));
  EXPECT_FALSE(m.accept_token(2));
  EXPECT_FALSE(m.accept_token(-1));
  EXPECT_FALSE(m.accept_token(v->n_vocab()));
  EXPECT_EQ(m.rollback_depth(), 0);
}

// A token may hold part of a UTF-8 character: it is allowed exactly when some character the
// grammar allows starts with its bytes, and then only the rest of such characters may follow.
TEST(GrammarTokenMatcher, PartialUtf8Tokens) {
  auto v = VocabIndex::from_pieces({"\xC3", "\xA9", "\xC3\xA9", "\xCE", "\xB1", "\xCF", "\x89", "\xBF", "a"},
                                   std::vector<TokenRole>(9, TokenRole::kText));
  TokenMatcher m(tables_of(R"(root ::= "é" | [α-ω])", v));  // U+03B1..U+03C9: CE B1..CE BF, CF 80..CF 89
  std::vector<uint32_t> mask(v->mask_words());
  auto allowed = [&] {
    m.fill_mask(mask);
    std::string out;
    for (int32_t id = 0; id < v->n_vocab(); ++id) out += bit(mask, id) ? '1' : '0';
    return out;
  };
  EXPECT_EQ(allowed(), "101101000");  // C3, é, CE, CF
  ASSERT_TRUE(m.accept_token(0));     // C3
  EXPECT_EQ(allowed(), "010000000");  // only A9 completes é
  ASSERT_TRUE(m.rollback(1));
  ASSERT_TRUE(m.accept_token(3));     // CE
  EXPECT_EQ(allowed(), "000010010");  // B1 and BF (B1..BF), not 89
  ASSERT_TRUE(m.rollback(1));
  ASSERT_TRUE(m.accept_token(5));     // CF
  EXPECT_EQ(allowed(), "000000100");  // 89 (80..89), not B1 or BF
}

// The one difference from llguidance (GrammarReference counts it): where the grammar forces
// the next bytes, llguidance allows only the token its tokenizer would pick for them (after
// "gre" of "green", just "en"); cera allows every token whose bytes fit ("e" and "en"), as the
// grammar does and XGrammar does. Sampling a shorter token is then legal, never an error.
TEST(GrammarTokenMatcher, ForcedBytesAllowEveryFittingToken) {
  auto v = synthetic_vocab();
  TokenMatcher m(tables_of(R"(root ::= "green")", v));
  for (const char* p : {"g", "r", "e"}) ASSERT_TRUE(m.accept_token(3 + static_cast<unsigned char>(*p)));
  std::vector<uint32_t> mask(v->mask_words());
  m.fill_mask(mask);
  std::set<std::string> allowed;  // as byte strings: the vocabulary repeats some
  for (int32_t id = 0; id < v->n_vocab(); ++id) {
    if (bit(mask, id)) allowed.emplace(v->bytes(id));
  }
  EXPECT_EQ(allowed, (std::set<std::string>{"e", "en"}));
  auto smol = test::smollm2_vocab();
  if (!smol) GTEST_SKIP() << test::kSmollm2Missing;
  TokenMatcher s(tables_of(R"(root ::= "green")", smol));
  for (int32_t id : test::smollm2_tokenizer()->encode("gre")) ASSERT_TRUE(s.accept_token(id));
  std::vector<uint32_t> smask(smol->mask_words());
  s.fill_mask(smask);
  allowed.clear();
  for (int32_t id = 0; id < smol->n_vocab(); ++id) {
    if (bit(smask, id)) allowed.emplace(smol->bytes(id));
  }
  EXPECT_EQ(allowed, (std::set<std::string>{"e", "en"}));  // llguidance: {"en"}
}

// The second difference from llguidance: `.` matches "\n" (llama.cpp's meaning), so newline
// tokens are allowed where llguidance (Rust regex `.`) refuses them.
TEST(GrammarTokenMatcher, DotAllowsNewlineTokens) {
  auto v = synthetic_vocab();
  TokenMatcher m(tables_of(R"(root ::= "[" .{0,3} "]")", v));
  ASSERT_TRUE(m.accept_token(3 + '['));
  std::vector<uint32_t> mask(v->mask_words());
  m.fill_mask(mask);
  EXPECT_TRUE(bit(mask, 3 + '\n'));
  bool newline_pair = false;
  for (int32_t id = 0; id < v->n_vocab(); ++id) newline_pair |= v->bytes(id) == "\n\n" && bit(mask, id);
  EXPECT_TRUE(newline_pair);
  ASSERT_TRUE(m.accept_token(3 + '\n'));
  ASSERT_TRUE(m.accept_token(3 + ']'));
  EXPECT_TRUE(m.can_end());
}

TEST(GrammarTokenMatcher, RollbackRestoresMasksWithinItsBound) {
  auto v = synthetic_vocab();
  // Nested and never stuck: every state can continue.
  TokenMatcher m(tables_of("root ::= item*\nitem ::= \"{\" item* \"}\" | [a-z\"]", v));
  std::vector<std::vector<uint32_t>> masks;
  std::vector<uint32_t> mask(v->mask_words());
  std::mt19937 rng(3);
  for (int step = 0; step < 40; ++step) {
    m.fill_mask(mask);
    masks.push_back(mask);
    std::vector<int32_t> allowed;
    for (int32_t id = 3; id < v->n_vocab(); ++id) {
      if (bit(mask, id)) allowed.push_back(id);
    }
    ASSERT_FALSE(allowed.empty());
    ASSERT_TRUE(m.accept_token(allowed[rng() % allowed.size()]));
  }
  EXPECT_EQ(m.rollback_depth(), TokenMatcher::kMaxRollback);
  EXPECT_FALSE(m.rollback(TokenMatcher::kMaxRollback + 1));
  ASSERT_TRUE(m.rollback(5));
  m.fill_mask(mask);
  EXPECT_EQ(mask, masks[35]);
  ASSERT_TRUE(m.rollback(TokenMatcher::kMaxRollback - 5));
  m.fill_mask(mask);
  EXPECT_EQ(mask, masks[40 - TokenMatcher::kMaxRollback]);
  EXPECT_EQ(m.rollback_depth(), 0);
  EXPECT_FALSE(m.rollback(1));
}

// Long inputs: frames of old states are compacted away; the state stays exact.
TEST(GrammarTokenMatcher, LongInputsStayExact) {
  auto v = synthetic_vocab();
  const char* g = R"(root ::= "[" ( item ( "," item )* )? "]"
item ::= "[" [a-z]* "]" | "x")";
  auto tables = tables_of(g, v);
  TokenMatcher m(tables);
  ByteMatcher bytes(tables->grammar_ptr());
  const std::string unit = "[abc],x,";
  ASSERT_TRUE(m.accept_token(3 + '['));
  ASSERT_TRUE(bytes.accept("["));
  for (int i = 0; i < 60000; ++i) {
    for (char c : unit) ASSERT_TRUE(m.accept_token(3 + static_cast<unsigned char>(c)));
  }
  for (int i = 0; i < 60000; ++i) ASSERT_TRUE(bytes.accept(unit));
  std::vector<uint32_t> mask(v->mask_words());
  m.fill_mask(mask);
  EXPECT_EQ(mask, brute_mask(*v, bytes, false));
  ASSERT_TRUE(m.accept_token(3 + 'x'));
  ASSERT_TRUE(m.accept_token(3 + ']'));
  EXPECT_TRUE(m.can_end());
}

TEST(GrammarTokenMatcher, SharedTablesAcrossThreads) {
  auto v = synthetic_vocab();
  const auto corpus = test::load_corpus();
  auto g = compile_gbnf(corpus.at("json"));
  ASSERT_TRUE(g.ok());
  // Two threads fill the same (not yet computed) tables at once; each must see the masks of a
  // single-threaded run.
  auto run = [&](std::shared_ptr<const TokenTables> t, std::vector<std::vector<uint32_t>>& out) {
    TokenMatcher m(t);
    std::mt19937 rng(9);
    std::vector<uint32_t> mask(v->mask_words());
    for (int step = 0; step < 30; ++step) {
      m.fill_mask(mask);
      out.push_back(mask);
      std::vector<int32_t> allowed;
      for (int32_t id = 3; id < v->n_vocab(); ++id) {
        if (bit(mask, id)) allowed.push_back(id);
      }
      if (allowed.empty() || !m.accept_token(allowed[rng() % allowed.size()])) break;
    }
  };
  std::vector<std::vector<uint32_t>> alone, a, b;
  run(std::make_shared<const TokenTables>(*g, v), alone);
  auto shared = std::make_shared<const TokenTables>(*g, v);
  std::thread ta([&] { run(shared, a); });
  std::thread tb([&] { run(shared, b); });
  ta.join();
  tb.join();
  EXPECT_EQ(a, alone);
  EXPECT_EQ(b, alone);
}

TEST(GrammarTokenMatcher, CachesAreShared) {
  auto v = synthetic_vocab();
  auto g1 = compile_gbnf("root ::= \"cached\"");
  auto g2 = compile_gbnf("root ::= \"cached\"");
  ASSERT_TRUE(g1.ok() && g2.ok());
  EXPECT_EQ(g1->get(), g2->get());
  EXPECT_EQ(token_tables_for(*g1, v).get(), token_tables_for(*g2, v).get());
  auto other = compile_gbnf("root ::= \"cached\"", "root", GrammarLimits{});  // explicit limits: not cached
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->get(), g1->get());
}

}  // namespace
}  // namespace cera::runtime::grammar
