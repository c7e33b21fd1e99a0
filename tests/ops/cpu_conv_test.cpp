// short_conv of the CPU backend against a naive double reference of lfm2's gated causal
// depthwise convolution: random inputs and carried state, the sequence fed in chunks of uneven
// sizes (so the state hand-over between calls is checked), NaN-poisoned outputs, every ISA level.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "cpu_test_util.h"

namespace cera::ops::test {
namespace {

TEST(ShortConvTest, MatchesDoubleReferenceAcrossChunks) {
  std::mt19937 rng(7);
  for (int64_t n_ch : {1, 5, 64, 130}) {
    for (int64_t L : {1, 2, 3, 4}) {
      const int64_t n_tokens = 23;
      const std::vector<float> bcx = random_floats(rng, static_cast<size_t>(3 * n_ch * n_tokens), -2, 2);
      const std::vector<float> kernel = random_floats(rng, static_cast<size_t>(L * n_ch));
      const std::vector<float> state0 = random_floats(rng, static_cast<size_t>((L - 1) * n_ch));
      // Reference over the whole sequence: u_ext = state0 columns, then u = B * x.
      std::vector<double> u_ext(static_cast<size_t>(n_ch * (L - 1 + n_tokens)));
      auto U = [&](int64_t c, int64_t i) -> double& { return u_ext[static_cast<size_t>(c * (L - 1 + n_tokens) + i)]; };
      for (int64_t c = 0; c < n_ch; ++c) {
        for (int64_t j = 0; j < L - 1; ++j) U(c, j) = state0[static_cast<size_t>(c * (L - 1) + j)];
        for (int64_t t = 0; t < n_tokens; ++t) {
          const float* row = bcx.data() + t * 3 * n_ch;
          U(c, L - 1 + t) = double(row[c]) * row[2 * n_ch + c];
        }
      }
      for (IsaBackend& ib : all_backends()) {
        std::vector<float> state = state0;
        std::vector<float> out(static_cast<size_t>(n_ch * n_tokens), nan_value());
        int64_t t0 = 0;
        for (int64_t chunk : {1, 7, 2, 13}) {
          ib.backend->short_conv(make_view(out.data() + t0 * n_ch, DType::kF32, {n_ch, chunk, 1, 1}),
                                 make_view(const_cast<float*>(bcx.data()) + t0 * 3 * n_ch, DType::kF32, {3 * n_ch, chunk, 1, 1}),
                                 make_view(const_cast<float*>(kernel.data()), DType::kF32, {L, n_ch, 1, 1}),
                                 make_view(state.data(), DType::kF32, {L - 1, n_ch, 1, 1}));
          t0 += chunk;
        }
        ASSERT_EQ(t0, n_tokens);
        const std::string what = std::string(cpu_isa_name(ib.isa)) + " n_ch=" + std::to_string(n_ch) + " L=" + std::to_string(L);
        for (int64_t t = 0; t < n_tokens; ++t) {
          for (int64_t c = 0; c < n_ch; ++c) {
            double acc = 0, mag = 0;
            for (int64_t j = 0; j < L; ++j) {
              acc += double(kernel[static_cast<size_t>(c * L + j)]) * U(c, t + j);
              mag += std::fabs(double(kernel[static_cast<size_t>(c * L + j)]) * U(c, t + j));
            }
            const double gate = bcx[static_cast<size_t>(t * 3 * n_ch + n_ch + c)];
            ASSERT_NEAR(out[static_cast<size_t>(t * n_ch + c)], gate * acc, 1e-6 * std::fabs(gate) * mag + 1e-7) << what;
          }
        }
        for (int64_t c = 0; c < n_ch; ++c) {
          for (int64_t j = 0; j < L - 1; ++j) {
            ASSERT_NEAR(state[static_cast<size_t>(c * (L - 1) + j)], U(c, n_tokens + j), 1e-6 * std::fabs(U(c, n_tokens + j))) << what;
          }
        }
      }
    }
  }
}

TEST(ShortConvTest, SupportedOnCpu) {
  auto b = make_cpu_backend({.n_threads = 1});
  EXPECT_TRUE(b->supports(Feature::kShortConv));
  EXPECT_TRUE(b->supports(Feature::kMoe));
}

}  // namespace
}  // namespace cera::ops::test
