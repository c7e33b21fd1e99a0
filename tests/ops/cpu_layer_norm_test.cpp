// layer_norm of the CPU backend against a double-precision reference, every ISA level: widths off
// the 8-wide partial sums, in place and not, and rows with a large mean (where a one-pass sum
// of squares would cancel).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "cpu_test_util.h"

namespace cera::ops::test {
namespace {

TEST(LayerNormTest, MatchesDoubleReference) {
  std::mt19937 rng(21);
  for (int64_t n : {1, 7, 8, 384, 1001}) {
    for (float offset : {0.0f, 100.0f}) {
      const int64_t rows = 4;
      std::vector<float> x = random_floats(rng, static_cast<size_t>(n * rows), -3, 3);
      for (float& v : x) v += offset;
      std::vector<float> w = random_floats(rng, static_cast<size_t>(n), 0.5f, 1.5f);
      std::vector<float> b = random_floats(rng, static_cast<size_t>(n));
      for (IsaBackend& ib : all_backends()) {
        for (bool in_place : {false, true}) {
          SCOPED_TRACE(std::string(cpu_isa_name(ib.isa)) + " n=" + std::to_string(n) +
                       " offset=" + std::to_string(offset) + (in_place ? " in place" : ""));
          std::vector<float> xin = x;
          std::vector<float> out(x.size(), nan_value());
          float* dst = in_place ? xin.data() : out.data();
          ib.backend->layer_norm(make_view(dst, DType::kF32, {n, rows, 1, 1}),
                                 make_view(xin.data(), DType::kF32, {n, rows, 1, 1}),
                                 make_view(w.data(), DType::kF32, {n, 1, 1, 1}),
                                 make_view(b.data(), DType::kF32, {n, 1, 1, 1}), 1e-5f);
          for (int64_t r = 0; r < rows; ++r) {
            double mean = 0, var = 0;
            for (int64_t i = 0; i < n; ++i) mean += x[static_cast<size_t>(r * n + i)];
            mean /= static_cast<double>(n);
            for (int64_t i = 0; i < n; ++i) {
              const double d = x[static_cast<size_t>(r * n + i)] - mean;
              var += d * d;
            }
            const double inv = 1.0 / std::sqrt(var / static_cast<double>(n) + 1e-5);
            for (int64_t i = 0; i < n; ++i) {
              const size_t k = static_cast<size_t>(r * n + i);
              const double ref = (x[k] - mean) * inv * w[static_cast<size_t>(i)] + b[static_cast<size_t>(i)];
              // The float mean is off by ~n ulp(offset): that times inv, plus float rounding.
              ASSERT_NEAR(dst[k], ref, 1e-5 * std::fabs(ref) + 1e-6 + 1e-7 * offset * inv * std::sqrt(n)) << "i=" << i;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace cera::ops::test
