// Dequantizers against the gguf Python package: every dequantizable type must reproduce the
// fixture's float32 output bit for bit (memcmp, so -0.0 and NaN payloads count too).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "fixture.h"
#include "quant/quant.h"

namespace cera::quant::test {
namespace {

const std::vector<DType> kDequantizable = {
    DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0,   DType::kQ4_1,
    DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kQ2_K,   DType::kQ3_K,
    DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS};

class DequantizeFixture : public ::testing::TestWithParam<DType> {};

TEST_P(DequantizeFixture, BitExactWithGguf) {
  const DType type = GetParam();
  ASSERT_TRUE(has_dequantizer(type));
  const std::optional<Fixture> f = load_fixture(FixtureKind::kDequantize, type);
  ASSERT_TRUE(f.has_value()) << "missing " << fixture_path(FixtureKind::kDequantize, type);
  ASSERT_GT(f->n_random, 0);
  ASSERT_LT(f->n_random, f->n);  // edge blocks present too

  std::vector<float> out(static_cast<size_t>(f->n), -12345.0f);
  dequantize_row(type, f->blocks.data(), out.data(), f->n);
  int64_t mismatches = 0;
  int64_t first = -1;
  for (int64_t i = 0; i < f->n; ++i) {
    if (std::memcmp(&out[i], &f->floats[i], sizeof(float)) != 0) {
      if (first < 0) first = i;
      ++mismatches;
    }
  }
  EXPECT_EQ(mismatches, 0) << dtype_name(type) << ": first mismatch at element " << first
                           << " (block " << first / dtype_block_size(type) << "): got "
                           << (first >= 0 ? out[first] : 0.0f) << ", gguf "
                           << (first >= 0 ? f->floats[first] : 0.0f);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DequantizeFixture, ::testing::ValuesIn(kDequantizable),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Dequantize, ExactlyTheListedTypesHaveDequantizers) {
  for (const DTypeTraits* t = dtype_table_begin(); t != dtype_table_end(); ++t) {
    const bool listed =
        std::find(kDequantizable.begin(), kDequantizable.end(), t->dtype) != kDequantizable.end();
    EXPECT_EQ(has_dequantizer(t->dtype), listed) << t->name;
  }
}

TEST(Dequantize, RejectsPartialBlocksAndUnsupportedTypes) {
  std::vector<uint8_t> blocks(1024);
  std::vector<float> out(1024);
  EXPECT_THROW(dequantize_row(DType::kQ4_0, blocks.data(), out.data(), 31), CheckFailure);
  EXPECT_THROW(dequantize_row(DType::kQ4_K, blocks.data(), out.data(), 128), CheckFailure);
  EXPECT_THROW(dequantize_row(DType::kQ4_0, blocks.data() + 1, out.data(), 32), CheckFailure);
  EXPECT_THROW(dequantize_row(DType::kIQ2_XXS, blocks.data(), out.data(), 256), CheckFailure);
  EXPECT_FALSE(has_dequantizer(DType::kQ8_K));                 // activation format only
  dequantize_row(DType::kQ4_0, blocks.data(), out.data(), 0);  // empty rows are fine
}

}  // namespace
}  // namespace cera::quant::test
