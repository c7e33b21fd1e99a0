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

// Backend::mask_logits' host body: -inf exactly where a row's bit is clear, other rows untouched;
// select_top_k keeps -inf at -inf under a softcap (a forbidden token stays forbidden).
TEST(MaskLogits, HostBodyForbidsExactlyTheClearedBits) {
  auto backend = make_cpu_backend({.n_threads = 1});
  const int64_t n = 70, rows = 3;
  std::vector<float> logits(size_t(n * rows));
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(i % 13) - 6.0f;
  const std::vector<float> before = logits;
  const TensorView view = make_view(reinterpret_cast<std::byte*>(logits.data()), DType::kF32, {n, rows, 1, 1}, Device::kCpu);
  const std::vector<uint32_t> masks = {0x5u, 0u, 0x80000000u};  // row 2: ids 0, 2 and 95 (outside: none)
  const std::vector<int32_t> masked = {2};
  backend->mask_logits(view, masks, masked);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t id = 0; id < n; ++id) {
      const float got = logits[size_t(r * n + id)];
      if (r != 2 || id == 0 || id == 2) {
        EXPECT_EQ(got, before[size_t(r * n + id)]) << r << " " << id;
      } else {
        EXPECT_TRUE(std::isinf(got) && got < 0) << r << " " << id;
      }
    }
  }
  std::vector<int32_t> ids(3);
  std::vector<float> values(3);
  select_top_k(std::span(logits).subspan(size_t(2 * n), size_t(n)), {.k = 3, .softcap = 5.0f}, ids, values);
  EXPECT_TRUE(std::isinf(values[2]) && values[2] < 0);
  EXPECT_EQ(std::min(ids[0], ids[1]), 0);
  EXPECT_EQ(std::max(ids[0], ids[1]), 2);
}

}  // namespace
}  // namespace cera::ops
