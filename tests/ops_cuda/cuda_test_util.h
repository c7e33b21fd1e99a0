// Helpers for the CUDA backend tests: the two backends (CUDA under test, CPU as the reference),
// tensors filled with seeded random data on both, NaN-poisoned outputs, and the comparison
// ‖gpu − cpu‖₂ / ‖cpu‖₂ (NaN never passes). Tests skip when the machine has no CUDA device.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ops/backend.h"

namespace cera::ops::test {

struct Backends {
  std::unique_ptr<Backend> cuda;
  std::unique_ptr<Backend> cpu;
};
// Both backends, or null cuda (with the reason) when no device is usable.
Backends& backends();
std::string cuda_unavailable_reason();

// A float32 tensor of the same contents on one backend.
struct Tensor {
  std::unique_ptr<Buffer> buffer;
  TensorView view;
};
Tensor make_tensor(Backend& b, std::array<int64_t, 4> ne, const std::vector<float>& values);
std::vector<float> read_tensor(Backend& b, const TensorView& v);
void poison(Backend& b, const TensorView& v);

// CERA_CUDA_TEST_QUICK=1 (set for the compute-sanitizer run, ~50x slower): a smaller sweep that
// still covers every verb, type and kernel variant.
bool quick_sweep();

std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f);

struct Comparison {
  double rel_l2 = 0;  // ‖a − ref‖₂ / ‖ref‖₂
  int64_t nan_count = 0;
  int64_t first_nan = -1;
};
Comparison compare(const std::vector<float>& got, const std::vector<float>& ref);

#define CERA_SKIP_WITHOUT_CUDA()                                               \
  do {                                                                         \
    if (!::cera::ops::test::backends().cuda) GTEST_SKIP() << ::cera::ops::test::cuda_unavailable_reason(); \
  } while (0)

#define CERA_EXPECT_CLOSE(got, ref, tol, what)                                                   \
  do {                                                                                           \
    const ::cera::ops::test::Comparison c_ = ::cera::ops::test::compare((got), (ref));           \
    EXPECT_EQ(c_.nan_count, 0) << (what) << ": first NaN (unwritten?) at " << c_.first_nan;      \
    EXPECT_LE(c_.rel_l2, (tol)) << (what);                                                       \
  } while (0)

}  // namespace cera::ops::test
