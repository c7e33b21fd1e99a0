// Pooling and normalisation against values worked out by hand.
#include <gtest/gtest.h>

#include "runtime/embed/pooling.h"

namespace cera::runtime::embed {
namespace {

// Three tokens of width 2: (1, 2), (3, 4), (5, 12).
const std::vector<float> kRows = {1, 2, 3, 4, 5, 12};

TEST(Pooling, EachModeTakesItsRows) {
  EXPECT_EQ(pool(kRows, 2, Pooling::kMean), (std::vector<float>{3, 6}));
  EXPECT_EQ(pool(kRows, 2, Pooling::kCls), (std::vector<float>{1, 2}));
  EXPECT_EQ(pool(kRows, 2, Pooling::kLast), (std::vector<float>{5, 12}));
  EXPECT_EQ(pool(kRows, 2, Pooling::kNone), kRows);
}

TEST(Pooling, L2NormalizeScalesEachVector) {
  std::vector<float> v = {3, 4, 5, 12, 0, 0};
  l2_normalize(v, 2);
  EXPECT_FLOAT_EQ(v[0], 0.6f);
  EXPECT_FLOAT_EQ(v[1], 0.8f);
  EXPECT_FLOAT_EQ(v[2], 5.0f / 13);
  EXPECT_FLOAT_EQ(v[3], 12.0f / 13);
  EXPECT_EQ(v[4], 0.0f);  // a zero vector stays zero instead of becoming NaN
  EXPECT_EQ(v[5], 0.0f);
}

TEST(Pooling, NamesAndGgufNumbersAreLlamaCpps) {
  EXPECT_EQ(pooling_from_name("mean"), Pooling::kMean);
  EXPECT_EQ(pooling_from_name("cls"), Pooling::kCls);
  EXPECT_EQ(pooling_from_name("last"), Pooling::kLast);
  EXPECT_EQ(pooling_from_name("none"), Pooling::kNone);
  EXPECT_EQ(pooling_from_name("max"), std::nullopt);
  EXPECT_EQ(pooling_from_gguf(0), Pooling::kNone);
  EXPECT_EQ(pooling_from_gguf(1), Pooling::kMean);
  EXPECT_EQ(pooling_from_gguf(2), Pooling::kCls);
  EXPECT_EQ(pooling_from_gguf(3), Pooling::kLast);
  EXPECT_EQ(pooling_from_gguf(4), std::nullopt);  // rank: a reranker's head, not an embedding
  EXPECT_EQ(pooling_name(Pooling::kMean), "mean");
}

}  // namespace
}  // namespace cera::runtime::embed
