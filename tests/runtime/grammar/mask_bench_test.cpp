// GrammarMaskBench (a benchmark, not a test: DISABLED_, run it with
//   ./build/tests/test_runtime --gtest_filter='GrammarMaskBench.*' --gtest_also_run_disabled_tests)
// Per-token mask cost, single thread, over the corpus grammars. On SmolLM2 the steps are the
// walks of the llguidance fixture (the steps tools/grammar/reference_masks.py times llguidance
// on); on Gemma 3 (262k tokens) seeded random walks drawn from cera's own masks. "warm": tables
// precomputed first; "cold": tables built lazily by the masks that need them (first request).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>

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

void row(const char* what, const std::vector<double>& v) {
  const Summary s = summarize(v);
  std::printf("| %-38s | %7zu | %9.1f | %9.1f | %9.1f |\n", what, v.size(), s.p50, s.p99, s.max);
}

void header(const char* title) {
  std::printf("\n%s\n", title);
  std::printf("| %-38s | %7s | %9s | %9s | %9s |\n", "what", "n", "p50", "p99", "max");
  std::printf("|----------------------------------------|---------|-----------|-----------|-----------|\n");
}

bool structural(std::string_view piece) {
  if (piece.size() <= 1) return true;
  return piece.find_first_of("{}[]\":,()<>=-#\n0123456789") != std::string_view::npos;
}

struct Walk {
  std::string grammar;
  std::vector<int32_t> tokens;
};

// Seeded walks like the reference tool's: a random allowed token, structural ones preferred,
// the end token with probability 0.3 when allowed.
std::vector<Walk> random_walks(const std::map<std::string, std::shared_ptr<const TokenTables>>& tables,
                               const VocabIndex& v) {
  std::mt19937 rng(20);
  std::vector<Walk> out;
  std::vector<uint32_t> mask(v.mask_words());
  for (const auto& [name, t] : tables) {
    for (int w = 0; w < 3; ++w) {
      Walk walk{name, {}};
      TokenMatcher m(t);
      for (int step = 0; step < 24; ++step) {
        m.fill_mask(mask);
        std::vector<int32_t> text, pool;
        bool can_end = false;
        for (int32_t id = 0; id < v.n_vocab(); ++id) {
          if (!((mask[id >> 5] >> (id & 31)) & 1)) continue;
          if (v.role(id) == TokenRole::kEndOfGeneration) {
            can_end = true;
          } else {
            text.push_back(id);
            if (structural(v.bytes(id))) pool.push_back(id);
          }
        }
        if (can_end && (text.empty() || rng() % 10 < 3)) break;
        if (text.empty()) break;
        const std::vector<int32_t>& from = (rng() % 10 < 6 && !pool.empty()) ? pool : text;
        walk.tokens.push_back(from[rng() % from.size()]);
        if (!m.accept_token(walk.tokens.back())) {
          ADD_FAILURE() << name << ": an allowed token was refused";
          return out;
        }
      }
      out.push_back(std::move(walk));
    }
  }
  return out;
}

void bench_vocab(const char* title, std::shared_ptr<const VocabIndex> vocab,
                 const std::map<std::string, std::string>& grammars, const std::vector<Walk>* given) {
  std::map<std::string, std::shared_ptr<const TokenTables>> tables;
  std::vector<double> prepare_ms;
  std::vector<std::pair<double, std::string>> slowest;
  size_t memory = 0, n_states = 0, n_tables = 0;
  for (const auto& [name, text] : grammars) {
    const auto t0 = Clock::now();
    auto g = compile_gbnf(text, "root", GrammarLimits{});  // uncached: time the compile
    ASSERT_TRUE(g.ok()) << name << ": " << g.status().message();
    auto t = std::make_shared<const TokenTables>(*g, vocab);
    t->precompute_all();
    prepare_ms.push_back(us_since(t0) / 1000);
    slowest.push_back({prepare_ms.back(), name + " (" + std::to_string((*g)->states().size()) + " states)"});
    memory += t->memory_bytes();
    n_states += (*g)->states().size();
    n_tables += t->table_count();
    tables[name] = t;
  }
  std::vector<Walk> walks = given != nullptr ? *given : random_walks(tables, *vocab);
  std::vector<uint32_t> mask(vocab->mask_words());
  std::vector<double> warm, cold, accept;
  for (int rep = 0; rep < 3; ++rep) {
    for (const Walk& w : walks) {
      TokenMatcher m(tables.at(w.grammar));
      for (size_t i = 0; i <= w.tokens.size(); ++i) {
        auto t0 = Clock::now();
        m.fill_mask(mask);
        warm.push_back(us_since(t0));
        if (i == w.tokens.size()) break;
        t0 = Clock::now();
        ASSERT_TRUE(m.accept_token(w.tokens[i]));
        accept.push_back(us_since(t0));
      }
    }
  }
  // Cold: every grammar's first walk on fresh tables, nothing precomputed.
  std::map<std::string, bool> seen;
  for (const Walk& w : walks) {
    if (seen[w.grammar]) continue;
    seen[w.grammar] = true;
    auto fresh = std::make_shared<const TokenTables>(tables.at(w.grammar)->grammar_ptr(), vocab);
    TokenMatcher m(fresh);
    for (size_t i = 0; i <= w.tokens.size(); ++i) {
      const auto t0 = Clock::now();
      m.fill_mask(mask);
      cold.push_back(us_since(t0));
      if (i == w.tokens.size() || !m.accept_token(w.tokens[i])) break;
    }
  }
  header(title);
  row("mask per token, warm (us)", warm);
  row("mask per token, cold: first walk (us)", cold);
  row("accept per token (us)", accept);
  row("compile + all tables per grammar (ms)", prepare_ms);
  std::printf("%zu grammars, %zu walks x 3, %zu states -> %zu tables, %.1f MiB of tables in all\n",
              grammars.size(), walks.size(), n_states, n_tables, memory / 1048576.0);
  std::sort(slowest.rbegin(), slowest.rend());
  for (size_t i = 0; i < 3 && i < slowest.size(); ++i) {
    std::printf("slowest to prepare: %s %.1f ms\n", slowest[i].second.c_str(), slowest[i].first);
  }
}

TEST(GrammarMaskBench, DISABLED_Smollm2Corpus) {
  auto vocab = test::smollm2_vocab();
  if (!vocab) GTEST_SKIP() << test::kSmollm2Missing;
  const test::MaskFixture f = test::load_mask_fixture();
  ASSERT_TRUE(f.loaded);
  std::vector<Walk> walks;
  for (const test::MaskWalk& w : f.walks) walks.push_back({w.grammar, w.tokens});
  bench_vocab("SmolLM2 (49152 tokens): the llguidance fixture's walks", vocab, f.grammars, &walks);
}

TEST(GrammarMaskBench, DISABLED_Gemma3Corpus) {
  const auto path = cera::test::model_cache() / "gemma-3-270m-q4_k_m.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "run `bash scripts/pull-model.sh gemma3`";
  auto file = format::GgufFile::open(path);
  ASSERT_TRUE(file.ok());
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok());
  bench_vocab("Gemma 3 (262144 tokens): seeded random walks", VocabIndex::from_tokenizer(*tok),
              test::load_corpus(), nullptr);
}

}  // namespace
}  // namespace cera::runtime::grammar
