// ThreadPool: every index visited exactly once for any size/grain, back-to-back dispatches (the
// decode pattern), pools larger than the machine, and the core count.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace cera {
namespace {

TEST(ThreadPool, AvailableCoresIsPositiveAndBounded) {
  const int n = available_cores();
  EXPECT_GE(n, 1);
  const unsigned hw = std::thread::hardware_concurrency();
  if (hw > 0) {
    EXPECT_LE(n, static_cast<int>(hw));
  }
  EXPECT_EQ(ThreadPool().size(), n);
  EXPECT_EQ(ThreadPool(3).size(), 3);
  EXPECT_EQ(ThreadPool(1).size(), 1);
}

TEST(ThreadPool, CoversEveryIndexOnceForAnyGrain) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 64, 1000, 4099}) {
      for (int64_t grain : {0, 1, 3, 64, 5000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallel_for(n, grain, [&](int64_t begin, int64_t end) {
          EXPECT_LT(begin, end);
          EXPECT_LE(end - begin, std::max<int64_t>(grain, 1));
          for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "threads=" << threads << " n=" << n
                                                            << " grain=" << grain << " i=" << i;
        }
      }
    }
  }
}

TEST(ThreadPool, ManySmallDispatchesInARow) {
  ThreadPool pool(4);  // more threads than this machine may have: workers must still finish
  std::atomic<int64_t> total{0};
  int64_t expected = 0;
  for (int round = 0; round < 3000; ++round) {
    const int64_t n = 1 + round % 17;
    expected += n * (n - 1) / 2;
    pool.parallel_for(n, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) total.fetch_add(i, std::memory_order_relaxed);
    });
    ASSERT_EQ(total.load(), expected) << "round " << round;
  }
}

TEST(ThreadPool, UsesMoreThanOneThreadWhenAvailable) {
  ThreadPool pool(2);
  std::atomic<int> distinct{0};
  std::atomic<std::thread::id> first{};
  // Whoever takes a chunk first waits (up to 10 s, so a loaded machine cannot make this flaky)
  // until a chunk runs on another thread: only a pool that never uses its worker fails.
  pool.parallel_for(64, 1, [&](int64_t, int64_t) {
    std::thread::id none{};
    const std::thread::id me = std::this_thread::get_id();
    if (first.compare_exchange_strong(none, me)) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (distinct.load() == 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    } else if (none != me) {
      distinct.store(1);
    }
  });
  EXPECT_EQ(distinct.load(), 1);
}

}  // namespace
}  // namespace cera
