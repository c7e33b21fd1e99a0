// The host collective (ops/cpu/host_collective.h), which the tensor-parallel tests on the CPU
// lean on: the all-reduce is the plain sum in rank order, bitwise the same on every rank, and the
// gather puts rank r's columns at r * cols. (Its staging of device tensors through each rank's
// backend runs in tests/model/tensor_parallel_test.cpp with CERA_TEST_DEVICE=cuda.)
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "ops/cpu/host_collective.h"

namespace cera::ops {
namespace {

TEST(HostCollective, AllReduceSumsAndGatherConcatenatesInRankOrder) {
  constexpr int kRanks = 3;
  HostCollectiveGroup group(kRanks);
  std::vector<std::vector<float>> x(kRanks), part(kRanks),
      whole(kRanks, std::vector<float>(2 * 2 * kRanks, -1.0f));
  for (int r = 0; r < kRanks; ++r) {
    for (int i = 0; i < 7; ++i) x[r].push_back(0.1f * float(r + 1) * float(i + 1));
    part[r] = {float(10 * r), float(10 * r + 1), float(10 * r + 2),
               float(10 * r + 3)};  // [2 cols, 2 rows]
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      const TensorView xv = make_view(x[r].data(), DType::kF32, {7, 1, 1, 1});
      group.rank(r).all_reduce_sum(xv);
      group.rank(r).all_gather_cols(make_view(part[r].data(), DType::kF32, {2, 2, 1, 1}),
                                    make_view(whole[r].data(), DType::kF32, {2 * kRanks, 2, 1, 1}));
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    for (int i = 0; i < 7; ++i) {
      const float want =
          0.1f * 1 * float(i + 1) + 0.1f * 2 * float(i + 1) + 0.1f * 3 * float(i + 1);
      EXPECT_FLOAT_EQ(x[r][i], want) << "rank " << r << " element " << i;
      EXPECT_EQ(x[r][i], x[0][i]);  // bitwise the same on every rank
    }
    for (int row = 0; row < 2; ++row) {
      for (int src = 0; src < kRanks; ++src) {
        for (int c = 0; c < 2; ++c)
          EXPECT_EQ(whole[r][row * 2 * kRanks + src * 2 + c], part[src][row * 2 + c]);
      }
    }
  }
}

}  // namespace
}  // namespace cera::ops
