// fp16/bf16 conversions against IEEE semantics computed independently in double precision.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/half.h"

namespace cera {
namespace {

// Independent reference: value of a half from its fields, in double.
double half_value(uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int exp = (h >> 10) & 31;
  const int mant = h & 1023;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  if (exp == 31) return mant ? NAN : sign * INFINITY;
  return sign * std::ldexp(1024 + mant, exp - 25);
}

TEST(Half, DecodesEveryHalfExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const double want = half_value(static_cast<uint16_t>(h));
    const float got = half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << h;
      EXPECT_EQ(float_to_half(got), h) << h;  // every half survives the round trip
    }
  }
}

TEST(Half, EncodesToTheNearestEvenHalf) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    float f;
    const uint32_t b = bits(rng) & 0xbfffffffu;  // keep magnitudes mostly in and near half range
    std::memcpy(&f, &b, 4);
    if (std::isnan(f)) continue;
    const uint16_t h = float_to_half(f);
    const double got = half_value(h);
    // No other finite half may be strictly closer, and on a tie the even one wins.
    if (std::isinf(got)) {
      EXPECT_GE(std::fabs(f), 65520.0) << f;
      continue;
    }
    const double err = std::fabs(got - f);
    for (int d : {-1, 1}) {
      const uint16_t n = static_cast<uint16_t>(h + d);
      const double other = half_value(n);
      if (std::isnan(other) || std::isinf(other) || ((n ^ h) & 0x8000)) continue;
      const double other_err = std::fabs(other - f);
      EXPECT_TRUE(err < other_err || (err == other_err && (h & 1) == 0)) << f;
    }
  }
}

TEST(BFloat16, RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  EXPECT_EQ(bf16_to_float(0xc040), -3.0f);
}

}  // namespace
}  // namespace cera
