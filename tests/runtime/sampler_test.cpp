// The sampler chain against independently computed distributions.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

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

}  // namespace
}  // namespace cera::runtime
