// The DType table against FORMATS.md (block size, bytes per block, bits per weight).
#include <gtest/gtest.h>

#include "core/dtype.h"

namespace cera {
namespace {

TEST(DType, GeometryMatchesTheFormatTable) {
  struct Row {
    uint32_t id;
    const char* name;
    uint32_t block, bytes;
    double bits;
  };
  const Row rows[] = {{0, "F32", 1, 4, 32},          {1, "F16", 1, 2, 16},         {30, "BF16", 1, 2, 16},
                      {2, "Q4_0", 32, 18, 4.5},      {3, "Q4_1", 32, 20, 5.0},     {6, "Q5_0", 32, 22, 5.5},
                      {7, "Q5_1", 32, 24, 6.0},      {8, "Q8_0", 32, 34, 8.5},     {9, "Q8_1", 32, 36, 9.0},
                      {10, "Q2_K", 256, 84, 2.625},  {11, "Q3_K", 256, 110, 3.4375}, {12, "Q4_K", 256, 144, 4.5},
                      {13, "Q5_K", 256, 176, 5.5},   {14, "Q6_K", 256, 210, 6.5625}, {15, "Q8_K", 256, 292, 9.125},
                      {20, "IQ4_NL", 32, 18, 4.5},   {23, "IQ4_XS", 256, 136, 4.25}, {29, "IQ1_M", 256, 56, 1.75},
                      {39, "MXFP4", 32, 17, 4.25},   {40, "NVFP4", 64, 36, 4.5},   {42, "Q2_0", 64, 18, 2.25}};
  for (const Row& r : rows) {
    auto d = dtype_from_gguf_id(r.id);
    ASSERT_TRUE(d.has_value()) << r.name;
    const DTypeTraits& t = dtype_traits(*d);
    EXPECT_EQ(t.name, r.name);
    EXPECT_EQ(t.block_size, r.block) << r.name;
    EXPECT_EQ(t.type_size, r.bytes) << r.name;
    EXPECT_DOUBLE_EQ(8.0 * t.type_size / t.block_size, r.bits) << r.name;
    EXPECT_EQ(dtype_from_name(r.name), d);
  }
}

TEST(DType, RemovedIdsAreUnknown) {
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u, 1000u}) {
    EXPECT_FALSE(dtype_from_gguf_id(id).has_value()) << id;
  }
}

TEST(DType, RowBytesNeedWholeBlocks) {
  EXPECT_EQ(dtype_row_bytes(DType::kQ4_K, 512), 288u);
  EXPECT_FALSE(dtype_row_bytes(DType::kQ4_K, 100).has_value());
  EXPECT_EQ(dtype_row_bytes(DType::kF16, 3), 6u);
  EXPECT_EQ(dtype_from_name("q4_k"), DType::kQ4_K);
  EXPECT_FALSE(dtype_from_name("q4_9").has_value());
}

}  // namespace
}  // namespace cera
