#include "membw.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace cera::cli {

double measure_read_bandwidth_gbs(int threads) {
  threads = std::max(1, threads);
  constexpr size_t kBytes = size_t(1) << 30;  // 1 GiB: 30x the last-level cache of this machine class
  const size_t n = kBytes / sizeof(uint64_t);
  std::vector<uint64_t> data(n);
  for (size_t i = 0; i < n; i += 512) data[i] = i;  // touch every page
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<uint64_t> sums(threads);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const size_t begin = n * t / threads, end = n * (t + 1) / threads;
        uint64_t a = 0, b = 0, c = 0, d = 0;  // four chains keep several loads in flight
        for (size_t i = begin; i + 4 <= end; i += 4) {
          a += data[i];
          b += data[i + 1];
          c += data[i + 2];
          d += data[i + 3];
        }
        sums[t] = a + b + c + d;
      });
    }
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    volatile uint64_t sink = 0;
    for (uint64_t v : sums) sink = sink + v;
    best = std::max(best, kBytes / s / 1e9);
  }
  return best;
}

}  // namespace cera::cli
