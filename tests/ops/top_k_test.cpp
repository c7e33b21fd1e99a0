// Backend::top_k (the host body every host-memory backend uses) against a full sort of the row
// and a float64 log-sum-exp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "ops/cpu/cpu_backend.h"
#include "ops/top_k.h"

namespace cera::ops {
namespace {

struct Expected {
  std::vector<int32_t> ids;
  std::vector<float> values;
  double lse = 0;
};

Expected full_sort(const std::vector<float>& row, int32_t k, float softcap) {
  std::vector<float> v = row;
  if (softcap > 0) {
    for (float& x : v) x = softcap * std::tanh(x / softcap);
  }
  std::vector<int32_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return v[a] > v[b]; });
  Expected e;
  for (int32_t j = 0; j < k; ++j) {
    e.ids.push_back(order[j]);
    e.values.push_back(v[order[j]]);
  }
  double sum = 0;
  for (float x : v) sum += std::exp(static_cast<double>(x));
  e.lse = std::log(sum);
  return e;
}

TEST(TopK, HostBodyMatchesAFullSort) {
  auto backend = make_cpu_backend({.n_threads = 1});
  std::mt19937 rng(7);
  for (int64_t n : {1, 5, 100, 2049, 32000}) {
    for (int32_t k : {1, 2, 40, 256}) {
      if (k > n) continue;
      for (const bool ties : {false, true}) {
        for (const float softcap : {0.0f, 30.0f}) {
          const int64_t rows = 3;
          std::normal_distribution<float> d(0.0f, 4.0f);
          std::vector<float> logits(static_cast<size_t>(n * rows));
          // With ties every value is one of a few levels, so equal values must come in id order.
          for (float& x : logits) x = ties ? std::round(d(rng) / 4.0f) : d(rng);
          std::vector<int32_t> ids(static_cast<size_t>(k * rows));
          std::vector<float> values(ids.size()), lse(rows);
          backend->top_k(make_view(ids.data(), DType::kI32, {k, rows, 1, 1}),
                         make_view(values.data(), DType::kF32, {k, rows, 1, 1}),
                         make_view(lse.data(), DType::kF32, {1, rows, 1, 1}),
                         make_view(logits.data(), DType::kF32, {n, rows, 1, 1}), {.k = k, .softcap = softcap});
          for (int64_t r = 0; r < rows; ++r) {
            const Expected e = full_sort({logits.begin() + r * n, logits.begin() + (r + 1) * n}, k, softcap);
            const std::string what = "n=" + std::to_string(n) + " k=" + std::to_string(k) + " row " + std::to_string(r);
            EXPECT_EQ(std::vector<int32_t>(ids.begin() + r * k, ids.begin() + (r + 1) * k), e.ids) << what;
            EXPECT_EQ(std::vector<float>(values.begin() + r * k, values.begin() + (r + 1) * k), e.values) << what;
            EXPECT_NEAR(lse[r], e.lse, 1e-5 * std::max(1.0, std::fabs(e.lse))) << what;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace cera::ops
