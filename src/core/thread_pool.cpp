// ThreadPool implementation: generation-counter dispatch with a short spin before blocking.
// The spin (about 50 us) covers the gap between consecutive verbs of one decode step, so workers
// are usually awake when the next dispatch comes; after it they sleep and cost nothing.
#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

namespace cera {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

constexpr auto kSpinTime = std::chrono::microseconds(50);

// Spins until pred() holds or kSpinTime passes; true if pred() held. The clock is read only
// every 64 iterations so that spinning stays cheap.
template <class Pred>
bool spin_until(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (int i = 1;; ++i) {
    if (pred()) return true;
    cpu_relax();
    if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) return false;
  }
}

}  // namespace

int available_cores() {
  int n = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  if (n <= 0) n = hw;
  if (hw > 0) n = std::min(n, hw);
  return std::max(n, 1);
}

ThreadPool::ThreadPool(int n_threads) {
  const int n = n_threads > 0 ? n_threads : available_cores();
  workers_.reserve(static_cast<size_t>(n - 1));
  for (int i = 1; i < n; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::drain() {
  for (;;) {
    const int64_t begin = next_.fetch_add(grain_, std::memory_order_relaxed);
    if (begin >= n_) return;
    call_(ctx_, begin, std::min(begin + grain_, n_));
  }
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
      generation_.wait(seen, std::memory_order_acquire);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_relaxed)) return;
    drain();
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ThreadPool::run(int64_t n, int64_t grain, ChunkFn call, void* ctx) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (workers_.empty() || n <= grain) {  // nothing to share: no hand-off is worth its latency
    for (int64_t begin = 0; begin < n; begin += grain) call(ctx, begin, std::min(begin + grain, n));
    return;
  }
  call_ = call;
  ctx_ = ctx;
  n_ = n;
  grain_ = grain;
  next_.store(0, std::memory_order_relaxed);
  pending_.store(static_cast<int32_t>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  drain();
  if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
    for (int32_t p = pending_.load(std::memory_order_acquire); p != 0;
         p = pending_.load(std::memory_order_acquire)) {
      pending_.wait(p, std::memory_order_acquire);
    }
  }
}

}  // namespace cera
