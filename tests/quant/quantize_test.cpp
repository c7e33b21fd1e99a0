// Quantizers: byte-identical to the gguf package where it has a quantizer (F16, BF16, Q4_0,
// Q4_1, Q5_0, Q5_1, Q8_0), and never a worse round-trip RMSE. The K-quant quantizers have no
// oracle in the gguf package; they are held to the ecosystem's known ordering (Q4_K beats Q4_1,
// Q5_K beats Q5_1, Q6_K beats Q5_K on Gaussian data) and to exact behaviour on degenerate input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "fixture.h"
#include "quant/quant.h"

namespace cera::quant::test {
namespace {

const std::vector<DType> kGgufQuantizable = {DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ4_1,
                                             DType::kQ5_0, DType::kQ5_1, DType::kQ8_0};
const std::vector<DType> kQuantizable = {DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ4_1,
                                         DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kQ4_K,
                                         DType::kQ5_K, DType::kQ6_K};

std::vector<uint8_t> quantize(DType type, const std::vector<float>& x) {
  std::vector<uint8_t> q(*dtype_row_bytes(type, x.size()));
  quantize_row(type, x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

std::vector<float> dequantize(DType type, const std::vector<uint8_t>& q, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  dequantize_row(type, q.data(), y.data(), n);
  return y;
}

double round_trip_rmse(DType type, const std::vector<float>& x) {
  const std::vector<float> y = dequantize(type, quantize(type, x), static_cast<int64_t>(x.size()));
  return rmse(x.data(), y.data(), static_cast<int64_t>(x.size()));
}

class QuantizeFixture : public ::testing::TestWithParam<DType> {};

TEST_P(QuantizeFixture, ByteIdenticalToGguf) {
  const DType type = GetParam();
  const std::optional<Fixture> f = load_fixture(FixtureKind::kQuantize, type);
  ASSERT_TRUE(f.has_value()) << "missing " << fixture_path(FixtureKind::kQuantize, type);
  const std::vector<uint8_t> ours = quantize(type, f->floats);
  ASSERT_EQ(ours.size(), f->blocks.size());
  const size_t type_size = dtype_type_size(type);
  int64_t bad_blocks = 0;
  int64_t first = -1;
  for (size_t b = 0; b < ours.size() / type_size; ++b) {
    if (std::memcmp(&ours[b * type_size], &f->blocks[b * type_size], type_size) != 0) {
      if (first < 0) first = static_cast<int64_t>(b);
      ++bad_blocks;
    }
  }
  EXPECT_EQ(bad_blocks, 0) << dtype_name(type) << ": first differing block " << first;
}

TEST_P(QuantizeFixture, RmseNoWorseThanGguf) {
  const DType type = GetParam();
  const std::optional<Fixture> f = load_fixture(FixtureKind::kQuantize, type);
  ASSERT_TRUE(f.has_value());
  const std::vector<float> x(f->floats.begin(), f->floats.begin() + f->n_random);
  const int64_t n = f->n_random;
  const std::vector<uint8_t> gguf_blocks(f->blocks.begin(),
                                         f->blocks.begin() + *dtype_row_bytes(type, n));
  const std::vector<float> gguf_y = dequantize(type, gguf_blocks, n);
  const double gguf_rmse = rmse(x.data(), gguf_y.data(), n);
  const double our_rmse = round_trip_rmse(type, x);
  EXPECT_GT(gguf_rmse, 0.0);
  EXPECT_LE(our_rmse, gguf_rmse * (1.0 + 1e-9)) << dtype_name(type);
}

INSTANTIATE_TEST_SUITE_P(GgufTypes, QuantizeFixture, ::testing::ValuesIn(kGgufQuantizable),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Quantize, ExactlyTheListedTypesHaveQuantizers) {
  for (const DTypeTraits* t = dtype_table_begin(); t != dtype_table_end(); ++t) {
    const bool listed =
        std::find(kQuantizable.begin(), kQuantizable.end(), t->dtype) != kQuantizable.end();
    EXPECT_EQ(has_quantizer(t->dtype), listed) << t->name;
  }
}

TEST(Quantize, KQuantsBeatTheLegacyFormatsOfTheSameWidth) {
  const std::vector<float> x = random_normal(1 << 16, 7);
  const double q4_1 = round_trip_rmse(DType::kQ4_1, x);
  const double q4_k = round_trip_rmse(DType::kQ4_K, x);
  const double q5_1 = round_trip_rmse(DType::kQ5_1, x);
  const double q5_k = round_trip_rmse(DType::kQ5_K, x);
  const double q6_k = round_trip_rmse(DType::kQ6_K, x);
  const double q8_0 = round_trip_rmse(DType::kQ8_0, x);
  EXPECT_LT(q4_k, q4_1);  // 4.5 bits/weight beating 5.0
  EXPECT_LT(q5_k, q5_1);  // 5.5 beating 6.0
  EXPECT_LT(q6_k, 0.6 * q5_k);
  EXPECT_GT(q6_k, q8_0);  // sanity: fewer bits than Q8_0 cannot be more precise here
  // Each extra bit should roughly halve the error (allow slack for the scale overheads).
  EXPECT_LT(q5_k, 0.6 * q4_k);
  EXPECT_LT(q4_k, 0.12);  // relative to sigma = 1; uniform 4-bit over ~5 sigma ranges is ~0.09
}

TEST(Quantize, KQuantsAreScaleInvariantWithinFp16Range) {
  const std::vector<float> x = random_normal(1 << 12, 11);
  for (DType type : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    const double base = round_trip_rmse(type, x);
    // Not below ~0.05: d = max_scale / 63 would fall into fp16's subnormal range and lose bits.
    for (float s : {0.05f, 1e2f}) {
      std::vector<float> xs(x);
      for (float& v : xs) v *= s;
      EXPECT_NEAR(round_trip_rmse(type, xs) / s, base, 0.02 * base)
          << dtype_name(type) << " x" << s;
    }
  }
}

TEST(Quantize, DegenerateInputRoundTripsExactly) {
  for (DType type : kQuantizable) {
    const int64_t n = 512;
    std::vector<float> zeros(n, 0.0f);
    EXPECT_EQ(round_trip_rmse(type, zeros), 0.0) << dtype_name(type);
    // A sub-block that is all zero next to a non-zero one stays exactly zero.
    std::vector<float> mixed = random_normal(n, 3);
    std::fill(mixed.begin(), mixed.begin() + 32, 0.0f);
    const std::vector<float> y = dequantize(type, quantize(type, mixed), n);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], 0.0f) << dtype_name(type) << " element " << i;
  }
}

TEST(Quantize, RejectsPartialBlocksAndUnsupportedTypes) {
  std::vector<float> x(512, 1.0f);
  std::vector<uint8_t> q(4096);
  EXPECT_THROW(quantize_row(DType::kQ4_K, x.data(), q.data(), 32), CheckFailure);
  EXPECT_THROW(quantize_row(DType::kQ8_0, x.data(), q.data(), 33), CheckFailure);
  EXPECT_THROW(quantize_row(DType::kQ2_K, x.data(), q.data(), 256), CheckFailure);
  EXPECT_THROW(quantize_row(DType::kF32, x.data(), q.data(), 4), CheckFailure);
}

}  // namespace
}  // namespace cera::quant::test
