// BatchSampler on the CPU backend over random logits (with ties, softcap, biases inside and
// outside the candidates): every row's token equals a Sampler with the same seed drawing from
// the whole biased row (the path that reads everything), and its log-probabilities equal a
// float64 log-softmax of the raw row.
#include "runtime/engine/batch_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "ops/cpu/cpu_backend.h"

namespace cera::runtime {
namespace {

float capped(float x, float cap) { return cap > 0.0f ? cap * std::tanh(x / cap) : x; }

struct RowCase {
  SamplingParams sampling;
  std::map<int32_t, float> bias;
  bool logprobs = false;
  int32_t top_logprobs = 0;
};

RowCase random_case(std::mt19937& rng, int32_t n_vocab, const std::vector<float>& row) {
  RowCase c;
  switch (rng() % 6) {
    case 0: c.sampling = {.temperature = 0.0f}; break;
    case 1: c.sampling = {.temperature = 0.9f, .top_k = 1 + static_cast<int32_t>(rng() % 50), .seed = rng()}; break;
    case 2: c.sampling = {.temperature = 1.1f, .top_k = 0, .top_p = 0.5f, .min_p = 0.0f, .seed = rng()}; break;
    case 3: c.sampling = {.temperature = 0.7f, .top_k = 0, .top_p = 1.0f, .min_p = 0.2f, .seed = rng()}; break;
    case 4: c.sampling = {.temperature = 0.0f, .repeat_penalty = 1.5f}; break;
    default: c.sampling = {.temperature = 0.8f, .seed = rng()}; break;  // top-k 40 and the rest
  }
  std::vector<int32_t> order(static_cast<size_t>(n_vocab));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  const int n_bias = static_cast<int>(rng() % 5);
  for (int i = 0; i < n_bias; ++i) {
    // Some on the best tokens (pushed down or up), some deep in the tail (lifted in or not).
    const int32_t id = rng() % 2 == 0 ? order[rng() % 4] : order[rng() % static_cast<uint32_t>(n_vocab)];
    const float choices[] = {-1e9f, -3.0f, -0.25f, 0.0f, 0.5f, 4.0f, 1e9f};
    c.bias[id] = choices[rng() % 7];
  }
  c.logprobs = rng() % 2 == 0;
  if (c.logprobs) c.top_logprobs = static_cast<int32_t>(rng() % (kMaxTopLogprobs + 1));
  return c;
}

TEST(BatchSampler, EqualsTheWholeRowAndTheFloat64LogSoftmax) {
  auto backend = ops::make_cpu_backend({.n_threads = 1});
  std::mt19937 rng(17);
  int64_t rows_read = 0, rows_sampled = 0;
  for (const int32_t n_vocab : {7, 300, 1000}) {
    auto sampler = BatchSampler::create(*backend, n_vocab, 8);
    ASSERT_TRUE(sampler.ok()) << sampler.status().to_string();
    for (int trial = 0; trial < 60; ++trial) {
      const int64_t n_rows = 1 + static_cast<int64_t>(rng() % 8);
      const float softcap = trial % 4 == 0 ? 5.0f : 0.0f;
      const bool ties = trial % 3 == 0;
      std::normal_distribution<float> d(0.0f, 3.0f);
      std::vector<float> logits(static_cast<size_t>(n_vocab * n_rows));
      for (float& x : logits) x = ties ? std::round(d(rng)) : d(rng);
      std::vector<int32_t> history(20);
      for (int32_t& t : history) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab));
      std::vector<RowCase> cases;
      std::vector<std::vector<float>> raw(n_rows);  // softcapped rows
      for (int64_t r = 0; r < n_rows; ++r) {
        raw[r].assign(logits.begin() + r * n_vocab, logits.begin() + (r + 1) * n_vocab);
        for (float& x : raw[r]) x = capped(x, softcap);
        cases.push_back(random_case(rng, n_vocab, raw[r]));
        cases.back().top_logprobs = std::min(cases.back().top_logprobs, n_vocab);
      }
      std::vector<Sampler> samplers, references;
      for (const RowCase& c : cases) {
        samplers.emplace_back(c.sampling);
        references.emplace_back(c.sampling);
      }
      std::vector<SampleRow> rows;
      for (int64_t r = 0; r < n_rows; ++r) {
        rows.push_back({.sampler = &samplers[r], .history = history, .logit_bias = &cases[r].bias,
                        .logprobs = cases[r].logprobs, .top_logprobs = cases[r].top_logprobs});
      }
      std::vector<SampledToken> out;
      const int64_t read_before = sampler->stats().n_rows_read_back;
      sampler->sample(make_view(logits.data(), DType::kF32, {n_vocab, n_rows, 1, 1}), softcap, rows, out);
      rows_read += sampler->stats().n_rows_read_back - read_before;
      rows_sampled += n_rows;
      ASSERT_EQ(out.size(), static_cast<size_t>(n_rows));
      for (int64_t r = 0; r < n_rows; ++r) {
        const std::string what = "n_vocab " + std::to_string(n_vocab) + " trial " + std::to_string(trial) + " row " +
                                 std::to_string(r);
        std::vector<float> biased = raw[r];
        for (const auto& [id, b] : cases[r].bias) biased[id] += b;
        EXPECT_EQ(out[r].token, references[r].sample(biased, history)) << what;
        ASSERT_EQ(out[r].logprobs.has_value(), cases[r].logprobs) << what;
        if (!cases[r].logprobs) continue;
        double m = raw[r][0], sum = 0;
        for (float x : raw[r]) m = std::max<double>(m, x);
        for (float x : raw[r]) sum += std::exp(x - m);
        const double lse = m + std::log(sum);
        const TokenLogprobs& lp = *out[r].logprobs;
        EXPECT_EQ(lp.chosen.token, out[r].token) << what;
        EXPECT_NEAR(lp.chosen.logprob, raw[r][out[r].token] - lse, 1e-4) << what;
        std::vector<int32_t> order(static_cast<size_t>(n_vocab));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return raw[r][a] > raw[r][b]; });
        ASSERT_EQ(lp.top.size(), static_cast<size_t>(cases[r].top_logprobs)) << what;
        for (size_t j = 0; j < lp.top.size(); ++j) {
          EXPECT_EQ(lp.top[j].token, order[j]) << what << " alternative " << j;
          EXPECT_NEAR(lp.top[j].logprob, raw[r][order[j]] - lse, 1e-4) << what << " alternative " << j;
        }
      }
    }
  }
  // Penalties and biased chains without a top-k cut read their rows; the rest must not.
  EXPECT_LT(rows_read, rows_sampled / 2);
  std::printf("batch sampler: %lld of %lld rows read whole\n", static_cast<long long>(rows_read),
              static_cast<long long>(rows_sampled));
}

// One top_k per call whatever the rows ask, and no whole row for greedy or top-k chains with
// biases and logprobs.
TEST(BatchSampler, CandidateChainsReadNoWholeRow) {
  auto backend = ops::make_cpu_backend({.n_threads = 1});
  constexpr int32_t kVocab = 500;
  auto sampler = BatchSampler::create(*backend, kVocab, 4);
  ASSERT_TRUE(sampler.ok());
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> logits(kVocab * 4);
  for (float& x : logits) x = d(rng);
  const std::map<int32_t, float> bias{{3, 1e9f}, {10, -1e9f}, {400, 2.0f}};
  Sampler greedy({.temperature = 0.0f}), top_k({.temperature = 0.9f, .top_k = 30}), plain({.temperature = 0.0f}),
      forced({.temperature = 0.0f});
  const std::map<int32_t, float> force{{77, 1e9f}};
  const std::vector<SampleRow> rows{{.sampler = &greedy, .logit_bias = &bias, .logprobs = true, .top_logprobs = 5},
                                    {.sampler = &top_k, .logit_bias = &bias, .logprobs = true},
                                    {.sampler = &plain},
                                    {.sampler = &forced, .logit_bias = &force, .logprobs = true, .top_logprobs = 1}};
  std::vector<SampledToken> out;
  sampler->sample(make_view(logits.data(), DType::kF32, {kVocab, 4, 1, 1}), 0.0f, rows, out);
  EXPECT_EQ(out[0].token, 3);
  EXPECT_EQ(out[3].token, 77);
  EXPECT_NEAR(out[3].logprobs->chosen.logprob, out[3].logprobs->top[0].logprob - (logits[3 * kVocab + out[3].logprobs->top[0].token] - logits[3 * kVocab + 77]), 1e-4);
  EXPECT_EQ(sampler->stats().n_top_k_calls, 1);
  EXPECT_EQ(sampler->stats().n_rows_read_back, 0);
  EXPECT_GE(sampler->stats().n_gathers, 2);  // biased tokens outside the candidates; the forced token's logprob
}

}  // namespace
}  // namespace cera::runtime
