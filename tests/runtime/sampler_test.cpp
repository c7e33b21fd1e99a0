// The sampler chain against independently computed distributions.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "ops/top_k.h"
#include "runtime/sampler.h"

namespace cera::runtime {
namespace {

std::vector<float> random_logits(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> l(n);
  for (float& x : l) x = d(rng);
  return l;
}

int argmax(const std::vector<float>& l) { return static_cast<int>(std::max_element(l.begin(), l.end()) - l.begin()); }

TEST(Sampler, TemperatureZeroIsArgmax) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const auto l = random_logits(1000, seed);
    Sampler s({.temperature = 0.0f});
    EXPECT_EQ(s.sample(l, {}), argmax(l));
  }
}

TEST(Sampler, TopKOneEqualsGreedy) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const auto l = random_logits(1000, seed);
    Sampler s({.temperature = 1.5f, .top_k = 1, .top_p = 1.0f, .min_p = 0.0f, .seed = seed});
    EXPECT_EQ(s.sample(l, {}), argmax(l));
  }
}

TEST(Sampler, SameSeedSameDraws) {
  const auto l = random_logits(500, 3);
  SamplingParams p{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 1234};
  Sampler a(p), b(p);
  std::vector<int32_t> da, db;
  for (int i = 0; i < 200; ++i) {
    da.push_back(a.sample(l, {}));
    db.push_back(b.sample(l, {}));
  }
  EXPECT_EQ(da, db);
  Sampler c({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 99});
  std::vector<int32_t> dc;
  for (int i = 0; i < 200; ++i) dc.push_back(c.sample(l, {}));
  EXPECT_NE(da, dc);
}

TEST(Sampler, FrequenciesFollowTheSoftmax) {
  // Four tokens with known probabilities at temperature 1; 40k draws, 4-sigma bounds.
  const std::vector<float> l = {std::log(0.1f), std::log(0.2f), std::log(0.3f), std::log(0.4f)};
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 5});
  std::map<int, int> counts;
  const int n = 40000;
  for (int i = 0; i < n; ++i) ++counts[s.sample(l, {})];
  const double p[] = {0.1, 0.2, 0.3, 0.4};
  for (int t = 0; t < 4; ++t) {
    const double sigma = std::sqrt(n * p[t] * (1 - p[t]));
    EXPECT_NEAR(counts[t], n * p[t], 4 * sigma) << t;
  }
}

TEST(Sampler, TopPAndMinPCutTheTail) {
  // p = 0.5, 0.3, 0.15, 0.05: top-p 0.7 keeps the first two; min-p 0.25 keeps p >= 0.125.
  const std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  Sampler top_p({.temperature = 1.0f, .top_k = 0, .top_p = 0.7f, .min_p = 0.0f, .seed = 1});
  Sampler min_p({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.25f, .seed = 1});
  std::map<int, int> a, b;
  for (int i = 0; i < 5000; ++i) {
    ++a[top_p.sample(l, {})];
    ++b[min_p.sample(l, {})];
  }
  EXPECT_EQ(a.count(2) + a.count(3), 0u);
  EXPECT_GT(a[0], 0);
  EXPECT_GT(a[1], 0);
  EXPECT_EQ(b.count(3), 0u);
  EXPECT_GT(b[2], 0);
}

TEST(Sampler, RepetitionPenaltyDemotesSeenTokens) {
  std::vector<float> l = {2.0f, 1.9f, -1.0f};
  Sampler plain({.temperature = 0.0f});
  EXPECT_EQ(plain.sample(l, std::vector<int32_t>{0}), 0);
  // 2.0 / 1.1 = 1.818 < 1.9: token 1 wins once token 0 is penalised.
  Sampler penal({.temperature = 0.0f, .repeat_penalty = 1.1f});
  EXPECT_EQ(penal.sample(l, std::vector<int32_t>{0}), 1);
  // Frequency penalty scales with the count: 2.0 - 3 * 0.05 = 1.85 < 1.9.
  Sampler freq({.temperature = 0.0f, .frequency_penalty = 0.05f});
  EXPECT_EQ(freq.sample(l, std::vector<int32_t>{0, 0, 0}), 1);
  EXPECT_EQ(freq.sample(l, std::vector<int32_t>{0}), 0);
  Sampler presence({.temperature = 0.0f, .presence_penalty = 0.2f});
  EXPECT_EQ(presence.sample(l, std::vector<int32_t>{0}), 1);
}

// Candidates as Backend::top_k delivers them (ops/top_k.h, itself tested against a full sort).
struct Candidates {
  std::vector<int32_t> ids;
  std::vector<float> values;
  float lse = 0;
};
Candidates top(const std::vector<float>& l, int32_t k) {
  Candidates c{std::vector<int32_t>(k), std::vector<float>(k), 0};
  c.lse = ops::select_top_k(l, {.k = k}, c.ids, c.values);
  return c;
}

TEST(Sampler, CandidatesNeededByTheChain) {
  EXPECT_EQ(Sampler({.temperature = 0.0f}).candidates_needed(32000), 1);
  EXPECT_EQ(Sampler({.temperature = 0.8f, .top_k = 40}).candidates_needed(32000), 40);
  EXPECT_EQ(Sampler({.temperature = 0.8f, .top_k = 40}).candidates_needed(10), 10);
  EXPECT_EQ(Sampler({.temperature = 0.8f, .top_k = 1000}).candidates_needed(32000), 0);  // past kMaxTopK
  EXPECT_EQ(Sampler({.temperature = 0.8f, .top_k = 0, .top_p = 0.9f}).candidates_needed(32000),
            ops::TopKParams::kMaxTopK);
  EXPECT_EQ(Sampler({.temperature = 0.8f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f}).candidates_needed(32000), 0);
  EXPECT_EQ(Sampler({.temperature = 0.0f, .repeat_penalty = 1.1f}).candidates_needed(32000), 0);
}

// The full-row chain (tested above against known distributions) is the reference: the same seed
// must draw the same tokens from the candidates.
TEST(Sampler, CandidatesDrawWhatTheFullRowDraws) {
  const SamplingParams cases[] = {
      {.temperature = 0.0f},
      {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .seed = 3},
      {.temperature = 1.3f, .top_k = 256, .top_p = 1.0f, .min_p = 0.0f, .seed = 4},
      {.temperature = 0.7f, .top_k = 0, .top_p = 0.9f, .min_p = 0.0f, .seed = 5},
      {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.1f, .seed = 6},
  };
  for (const SamplingParams& p : cases) {
    Sampler full(p), cand(p);
    for (uint32_t seed = 0; seed < 200; ++seed) {
      auto l = random_logits(5000, seed);
      for (float& x : l) x *= 2.0f;  // sd 6: the top-p 0.9 nucleus fits in 256 candidates
      const int32_t k = cand.candidates_needed(5000);
      ASSERT_GT(k, 0);
      const Candidates c = top(l, k);
      const std::optional<int32_t> got = cand.sample_candidates(c.ids, c.values, c.lse);
      ASSERT_TRUE(got.has_value()) << "top_k " << p.top_k << " seed " << seed;
      EXPECT_EQ(*got, full.sample(l, {})) << "top_k " << p.top_k << " top_p " << p.top_p << " seed " << seed;
    }
  }
}

TEST(Sampler, CandidatesThatCannotDecideAskForTheFullRow) {
  // A flat distribution: top-p 0.9 needs ~90 % of 5000 tokens, min-p 0.5 keeps nearly all.
  std::vector<float> l(5000);
  for (size_t i = 0; i < l.size(); ++i) l[i] = 0.001f * static_cast<float>(i % 7);
  const Candidates c = top(l, ops::TopKParams::kMaxTopK);
  Sampler top_p({.temperature = 1.0f, .top_k = 0, .top_p = 0.9f, .min_p = 0.0f});
  Sampler min_p({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.5f});
  EXPECT_FALSE(top_p.sample_candidates(c.ids, c.values, c.lse).has_value());
  EXPECT_FALSE(min_p.sample_candidates(c.ids, c.values, c.lse).has_value());
}

}  // namespace
}  // namespace cera::runtime
