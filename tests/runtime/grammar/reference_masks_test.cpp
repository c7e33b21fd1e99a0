// GrammarReference: cera's token masks equal llguidance's (the committed fixture written by
// tools/grammar/reference_masks.py) on SmolLM2's vocabulary, for every grammar of the corpus and
// every step of the fixture's random walks. Differences are printed token by token, except the
// one explained kind (ForcedBytes below): llguidance, where the grammar forces the next bytes,
// allows only the token its tokenizer would choose for them; cera allows every token whose bytes
// are a prefix of the forced bytes (the grammar allows them; XGrammar does the same). And `.`:
// llama.cpp's GBNF (and cera) match any character with it, llguidance (Rust regex) any but
// "\n"; such steps count as explained only if the grammar with `.` written [^\n] gives exactly
// llguidance's mask.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "mask_compare.h"
#include "mask_fixture.h"
#include "runtime/grammar/grammar.h"
#include "runtime/grammar/token_matcher.h"
#include "smollm2_vocab.h"

namespace cera::runtime::grammar {
namespace {

using test::allowed_ids;
using test::forced_continuation;
using test::printable;

// `text` with every bare `.` (outside literals, classes and comments) written as [^\n], or ""
// when it has none.
std::string dot_as_llguidance(const std::string& text) {
  std::string out;
  bool changed = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"' || c == '[') {
      const char close = c == '"' ? '"' : ']';
      out += c;
      for (++i; i < text.size() && text[i] != close; ++i) {
        if (text[i] == '\\') out += text[i++];
        out += text[i];
      }
      if (i < text.size()) out += text[i];
    } else if (c == '#') {
      for (; i < text.size() && text[i] != '\n'; ++i) out += text[i];
      if (i < text.size()) out += '\n';
    } else if (c == '.') {
      out += "[^\\n]";
      changed = true;
    } else {
      out += c;
    }
  }
  return changed ? out : std::string();
}

TEST(GrammarReference, MasksEqualLlguidance) {
  auto vocab = test::smollm2_vocab();
  if (!vocab) GTEST_SKIP() << test::kSmollm2Missing;
  const test::MaskFixture f = test::load_mask_fixture();
  ASSERT_TRUE(f.loaded) << "tests/fixtures/grammar/llguidance_masks.txt is missing or empty";
  ASSERT_EQ(f.n_vocab, vocab->n_vocab());
  EXPECT_EQ(f.eog, vocab->end_tokens()) << "the end-of-generation ids differ from the reference tool's";

  std::vector<uint32_t> mask(vocab->mask_words());
  size_t steps = 0, differing_steps = 0, walks = 0, reported = 0, forced_steps = 0, forced_tokens = 0, dot_steps = 0;
  std::set<std::string> grammars;
  for (const test::MaskWalk& w : f.walks) {
    auto text = f.grammars.find(w.grammar);
    ASSERT_NE(text, f.grammars.end()) << w.grammar;
    auto g = compile_gbnf(text->second);
    ASSERT_TRUE(g.ok()) << w.grammar << ": " << g.status().message();
    grammars.insert(w.grammar);
    ++walks;
    TokenMatcher m(token_tables_for(*g, vocab));
    ByteMatcher bytes(*g);
    std::unique_ptr<TokenMatcher> dot_matcher;  // the grammar with llguidance's `.`
    if (const std::string dot = dot_as_llguidance(text->second); !dot.empty()) {
      auto dg = compile_gbnf(dot);
      ASSERT_TRUE(dg.ok()) << dot << ": " << dg.status().message();
      dot_matcher = std::make_unique<TokenMatcher>(token_tables_for(*dg, vocab));
    }
    std::vector<uint32_t> dot_mask(vocab->mask_words());
    std::string prefix;
    for (size_t i = 0; i < w.masks.size(); ++i) {
      m.fill_mask(mask);
      const std::vector<int32_t> got = allowed_ids(mask, vocab->n_vocab());
      const std::vector<int32_t>& want = f.masks.at(w.masks[i]);
      bool dot_explains = false;
      if (dot_matcher) {
        dot_matcher->fill_mask(dot_mask);
        dot_explains = allowed_ids(dot_mask, vocab->n_vocab()) == want;
      }
      ++steps;
      if (got != want) {
        std::vector<int32_t> extra, missing;
        std::set_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(extra));
        std::set_difference(want.begin(), want.end(), got.begin(), got.end(), std::back_inserter(missing));
        const std::string forced = forced_continuation(bytes);
        const bool explained = missing.empty() && !forced.empty() &&
                               std::all_of(extra.begin(), extra.end(), [&](int32_t id) {
                                 return forced.starts_with(vocab->bytes(id));
                               });
        if (explained) {
          ++forced_steps;
          forced_tokens += extra.size();
        } else if (dot_explains) {
          ++dot_steps;
        } else {
          ++differing_steps;
        }
        if (!explained && !dot_explains && reported++ < 20) {
          std::string e, mi;
          for (size_t k = 0; k < extra.size() && k < 8; ++k) e += " '" + printable(vocab->bytes(extra[k])) + "'";
          for (size_t k = 0; k < missing.size() && k < 8; ++k) mi += " '" + printable(vocab->bytes(missing[k])) + "'";
          ADD_FAILURE() << w.grammar << " after '" << printable(prefix) << "': cera allows " << extra.size()
                        << " more:" << e << "; " << missing.size() << " fewer:" << mi;
        }
      }
      if (i < w.tokens.size()) {
        ASSERT_TRUE(m.accept_token(w.tokens[i])) << w.grammar << ": token " << w.tokens[i];
        if (dot_matcher) {
          ASSERT_TRUE(dot_matcher->accept_token(w.tokens[i]));
        }
        if (vocab->role(w.tokens[i]) == TokenRole::kText) {
          ASSERT_TRUE(bytes.accept(vocab->bytes(w.tokens[i])));
        }
        prefix += vocab->bytes(w.tokens[i]);
      }
    }
  }
  std::printf("GrammarReference: %zu grammars, %zu walks, %zu masks compared: %zu equal, %zu differ only by "
              "forced-bytes prefix tokens (%zu tokens, explained), %zu only by '.' and newline (explained), %zu "
              "differ otherwise\n",
              grammars.size(), walks, steps, steps - forced_steps - dot_steps - differing_steps, forced_steps,
              forced_tokens, dot_steps, differing_steps);
  EXPECT_EQ(differing_steps, 0u);
  EXPECT_GE(grammars.size(), 90u);
}

}  // namespace
}  // namespace cera::runtime::grammar
