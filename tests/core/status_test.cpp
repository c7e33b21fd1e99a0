#include <gtest/gtest.h>

#include "core/check.h"
#include "core/status.h"

namespace cera {
namespace {

Result<int> parse_positive(int x) {
  if (x <= 0) return invalid_argument("x is " + std::to_string(x) + ", expected > 0");
  return x;
}

Result<int> doubled(int x) {
  CERA_ASSIGN_OR_RETURN(int v, parse_positive(x));
  return 2 * v;
}

Status check_both(int a, int b) {
  CERA_RETURN_IF_ERROR(parse_positive(a));
  CERA_RETURN_IF_ERROR(parse_positive(b));
  return {};
}

TEST(Status, PropagatesThroughMacros) {
  EXPECT_EQ(*doubled(4), 8);
  auto bad = doubled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.status().to_string(), "invalid argument: x is -1, expected > 0");
  EXPECT_TRUE(check_both(1, 2).ok());
  EXPECT_EQ(check_both(1, 0).message(), "x is 0, expected > 0");
  EXPECT_EQ(check_both(1, 0).with_context("file.gguf").message(), "file.gguf: x is 0, expected > 0");
}

TEST(Check, ThrowsWithLocation) {
  try {
    CERA_CHECK_MSG(1 + 1 == 3, "arithmetic");
    FAIL() << "no throw";
  } catch (const CheckFailure& e) {
    EXPECT_NE(std::string(e.what()).find("status_test.cpp"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("arithmetic"), std::string::npos);
  }
}

}  // namespace
}  // namespace cera
