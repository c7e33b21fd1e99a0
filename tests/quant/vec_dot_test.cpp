// Dot products against dequantize-then-dot in double. Two bounds, both derived rather than tuned:
//  - against the dequantized activations: only float rounding (a few ulps per block and the
//    float accumulation across blocks) separates the integer kernel from the exact sum;
//  - against the original float activations: additionally the activation quantization error,
//    |x - a| <= d/2 per element (plus Q8_0's fp16 rounding of d), weighted by |w|.
// Weights come from the quantizers where they exist, else from the random gguf fixture blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/half.h"
#include "fixture.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace cera::quant::test {
namespace {

const std::vector<DType> kDotTypes = {DType::kF32,  DType::kF16,    DType::kBF16,  DType::kQ4_0,
                                      DType::kQ4_1, DType::kQ5_0,   DType::kQ5_1,  DType::kQ8_0,
                                      DType::kQ2_K, DType::kQ3_K,   DType::kQ4_K,  DType::kQ5_K,
                                      DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS};

// A weight row of n elements: quantized random normal data, or the fixture's random blocks.
std::vector<uint8_t> weight_row(DType type, int64_t n, uint64_t seed) {
  std::vector<uint8_t> w(*dtype_row_bytes(type, n));
  if (type == DType::kF32) {
    const std::vector<float> x = random_normal(n, seed);
    std::memcpy(w.data(), x.data(), w.size());
  } else if (has_quantizer(type)) {
    const std::vector<float> x = random_normal(n, seed);
    quantize_row(type, x.data(), w.data(), n);
  } else {
    const std::optional<Fixture> f = load_fixture(FixtureKind::kDequantize, type);
    EXPECT_TRUE(f.has_value());
    // Whole blocks, starting at a seed-dependent one, so scale fields stay scale fields.
    const size_t type_size = dtype_type_size(type);
    const size_t random_blocks = f->n_random / dtype_block_size(type);
    for (size_t b = 0; b < w.size() / type_size; ++b) {
      const size_t src = (b + seed * 7) % random_blocks;
      std::memcpy(&w[b * type_size], &f->blocks[src * type_size], type_size);
    }
  }
  return w;
}

// Largest |x - dequantized activation| the activation format allows in one block of x.
double activation_error_bound(DType act, const float* x, int block) {
  if (act == DType::kF32) return 0.0;
  double amax = 0.0;
  for (int i = 0; i < block; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
  const double d = amax / 127.0;
  double bound = 0.5 * d;
  // Q8_0 rounds codes with the exact d but stores d in fp16: |q| <= 127 times the rounding.
  if (act == DType::kQ8_0)
    bound += 127.0 * std::fabs(half_to_float(float_to_half(static_cast<float>(d))) - d);
  return bound * (1.0 + 1e-5);  // float evaluation of x/d
}

class VecDot : public ::testing::TestWithParam<DType> {};

TEST_P(VecDot, MatchesDequantizeThenDot) {
  const DType type = GetParam();
  ASSERT_TRUE(has_vec_dot(type));
  const DType act = activation_type_for(type);
  const int act_block = static_cast<int>(dtype_block_size(act));
  for (int64_t n : {256, 1024, 4096}) {
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      const std::vector<uint8_t> w = weight_row(type, n, seed);
      std::vector<float> x = random_normal(n, 1000 + seed);
      if (seed == 4) {  // uneven magnitudes across blocks
        for (int64_t i = 0; i < n; ++i) x[i] *= static_cast<float>(1 + (i / 256) % 7) * 0.3f;
      }
      std::vector<uint8_t> a(*dtype_row_bytes(act, n));
      quantize_activation_row(act, x.data(), a.data(), n);
      std::vector<float> wf(n), af(n);
      dequantize_row(type, w.data(), wf.data(), n);
      dequantize_activation_row(act, a.data(), af.data(), n);

      double exact_q = 0.0;  // dequantized weights . dequantized activations
      double exact_x = 0.0;  // dequantized weights . float activations
      double magnitude = 0.0;
      double act_error = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        exact_q += static_cast<double>(wf[i]) * af[i];
        exact_x += static_cast<double>(wf[i]) * x[i];
        magnitude += std::fabs(static_cast<double>(wf[i]) * af[i]);
      }
      for (int64_t b = 0; b < n; b += act_block) {
        double wsum = 0.0;
        for (int i = 0; i < act_block; ++i) wsum += std::fabs(static_cast<double>(wf[b + i]));
        act_error += wsum * activation_error_bound(act, &x[b], act_block);
      }
      const float got = vec_dot(type, w.data(), a.data(), n);
      // Float rounding: a few roundings per block term (relative to terms that may cancel
      // inside a weight, hence the factor 4) plus one per accumulation step.
      const double n_blocks = static_cast<double>(n / dtype_block_size(type));
      const double rounding = 4.0 * (n_blocks + 8.0) * 0x1p-24 * magnitude;
      EXPECT_NEAR(got, exact_q, rounding) << dtype_name(type) << " n=" << n << " seed=" << seed;
      EXPECT_NEAR(got, exact_x, rounding + act_error)
          << dtype_name(type) << " n=" << n << " seed=" << seed;
      EXPECT_GT(act_error + rounding, 0.0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, VecDot, ::testing::ValuesIn(kDotTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(VecDot, ActivationPairing) {
  EXPECT_EQ(activation_type_for(DType::kF16), DType::kF32);
  EXPECT_EQ(activation_type_for(DType::kQ4_1), DType::kQ8_0);
  EXPECT_EQ(activation_type_for(DType::kIQ4_NL), DType::kQ8_0);
  EXPECT_EQ(activation_type_for(DType::kQ2_K), DType::kQ8_K);
  EXPECT_EQ(activation_type_for(DType::kIQ4_XS), DType::kQ8_K);
  EXPECT_FALSE(has_vec_dot(DType::kQ8_K));
  EXPECT_THROW(activation_type_for(DType::kTQ1_0), CheckFailure);
}

TEST(VecDot, Q8KBlocksAreConsistent) {
  const int64_t n = 1024;
  std::vector<float> x = random_normal(n, 5);
  std::fill(x.begin() + 256, x.begin() + 512, 0.0f);  // an all-zero block
  std::vector<BlockQ8_K> a(n / kQK256);
  quantize_activation_row(DType::kQ8_K, x.data(), a.data(), n);
  EXPECT_EQ(a[1].d, 0.0f);
  for (const BlockQ8_K& blk : a) {
    for (int g = 0; g < kQK256 / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) {
        EXPECT_GE(blk.qs[16 * g + j], -127);  // the symmetric range SIMD kernels rely on
        sum += blk.qs[16 * g + j];
      }
      EXPECT_EQ(blk.bsums[g], sum);
    }
  }
  // The largest magnitude of each non-zero block maps to exactly +-127.
  int extreme = 0;
  for (int j = 0; j < kQK256; ++j) extreme = std::max(extreme, std::abs(int{a[0].qs[j]}));
  EXPECT_EQ(extreme, 127);
}

}  // namespace
}  // namespace cera::quant::test
