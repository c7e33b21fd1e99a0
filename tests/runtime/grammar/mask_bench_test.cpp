// GrammarMaskBench (a benchmark, not a test: DISABLED_, run it with
//   ./build/tests/test_runtime --gtest_filter='GrammarMaskBench.*' --gtest_also_run_disabled_tests)
// Per-token mask cost on SmolLM2's vocabulary, single thread, over the walks of the llguidance
// fixture (the same steps tools/grammar/reference_masks.py times llguidance on). Token tables
// are built before timing (compile + precompute is reported separately, per grammar).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "mask_fixture.h"
#include "runtime/grammar/grammar.h"
#include "runtime/grammar/token_matcher.h"
#include "smollm2_vocab.h"

namespace cera::runtime::grammar {
namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

struct Summary {
  double p50 = 0, p99 = 0, max = 0;
};

Summary summarize(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 99 / 100)], v.back()};
}

TEST(GrammarMaskBench, DISABLED_Smollm2Corpus) {
  auto vocab = test::smollm2_vocab();
  if (!vocab) GTEST_SKIP() << test::kSmollm2Missing;
  const test::MaskFixture f = test::load_mask_fixture();
  ASSERT_TRUE(f.loaded);
  std::map<std::string, std::shared_ptr<const TokenTables>> tables;
  std::vector<double> prepare_ms;
  std::vector<std::pair<double, std::string>> slowest;
  for (const auto& [name, text] : f.grammars) {
    const auto t0 = Clock::now();
    auto g = compile_gbnf(text, "root", GrammarLimits{});  // uncached: time the compile
    ASSERT_TRUE(g.ok()) << name << ": " << g.status().message();
    auto t = std::make_shared<const TokenTables>(*g, vocab);
    t->precompute_all();
    prepare_ms.push_back(us_since(t0) / 1000);
    slowest.push_back({prepare_ms.back(), name + " (" + std::to_string((*g)->states().size()) + " states)"});
    tables[name] = t;
  }
  std::vector<uint32_t> mask(vocab->mask_words());
  std::vector<double> mask_us, accept_us;
  for (int rep = 0; rep < 3; ++rep) {
    for (const test::MaskWalk& w : f.walks) {
      TokenMatcher m(tables.at(w.grammar));
      for (size_t i = 0; i < w.masks.size(); ++i) {
        auto t0 = Clock::now();
        m.fill_mask(mask);
        mask_us.push_back(us_since(t0));
        if (i < w.tokens.size()) {
          t0 = Clock::now();
          ASSERT_TRUE(m.accept_token(w.tokens[i]));
          accept_us.push_back(us_since(t0));
        }
      }
    }
  }
  const Summary mk = summarize(mask_us), ac = summarize(accept_us), pr = summarize(prepare_ms);
  std::printf("\nSmolLM2 (%d tokens), %zu grammars, %zu walks x 3 repetitions, single thread\n", vocab->n_vocab(),
              f.grammars.size(), f.walks.size());
  std::printf("| what                          |      p50 |      p99 |      max |\n");
  std::printf("|-------------------------------|----------|----------|----------|\n");
  std::printf("| mask per token (us), %6zu   | %8.1f | %8.1f | %8.1f |\n", mask_us.size(), mk.p50, mk.p99, mk.max);
  std::printf("| accept per token (us)         | %8.1f | %8.1f | %8.1f |\n", ac.p50, ac.p99, ac.max);
  std::printf("| compile+tables per grammar(ms)| %8.1f | %8.1f | %8.1f |\n", pr.p50, pr.p99, pr.max);
  std::sort(slowest.rbegin(), slowest.rend());
  for (size_t i = 0; i < 3 && i < slowest.size(); ++i) {
    std::printf("slowest to prepare: %s %.1f ms\n", slowest[i].second.c_str(), slowest[i].first);
  }
}

}  // namespace
}  // namespace cera::runtime::grammar
