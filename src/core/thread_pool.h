// ThreadPool: persistent workers for parallel_for over index ranges, sized from the CPUs this
// process may run on. Decode-time verbs last microseconds, so a dispatch must not sleep-wake by
// default: workers spin briefly on a generation counter and only then block (futex via
// std::atomic::wait); a dispatch allocates nothing and makes no system call while workers spin.
// The dispatcher waits only for chunks a worker has actually claimed, never for a worker that
// has not woken yet (on a loaded machine that wait was a scheduler tick per verb).
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace cera {

// CPUs in this process's affinity mask (sched_getaffinity), capped by hardware_concurrency; >= 1.
int available_cores();

class ThreadPool {
 public:
  // n_threads counts the calling thread; 0 means available_cores().
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint chunks of at most `grain` indices covering [0, n), on the
  // pool's workers and the calling thread, and returns when all are done. Chunks are claimed
  // dynamically (an atomic counter), so uneven chunks balance. fn must not throw and must not
  // call parallel_for on the same pool (one dispatch at a time; the pool is not reentrant).
  template <class Fn>
  void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
    auto call = [](void* ctx, int64_t begin, int64_t end) { (*static_cast<Fn*>(ctx))(begin, end); };
    run(n, grain, call, &fn);
  }

 private:
  using ChunkFn = void (*)(void* ctx, int64_t begin, int64_t end);
  void run(int64_t n, int64_t grain, ChunkFn call, void* ctx);
  void worker_loop();
  void drain();  // claims and runs chunks of the current job until none are left

  std::vector<std::thread> workers_;
  // The current job; written by the dispatcher before `claim_` is published (release) and read
  // by a worker only after a successful claim (acquire), so a late worker never sees a torn job.
  ChunkFn call_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
  // (next unclaimed chunk << 32) | chunk count: one word, so a claim is one compare-exchange.
  alignas(64) std::atomic<uint64_t> claim_{0};
  alignas(64) std::atomic<int64_t> done_{0};  // chunks of the current job finished
  alignas(64) std::atomic<uint32_t> generation_{0};
  std::atomic<int32_t> sleepers_{0};  // workers blocked in generation_.wait
  std::atomic<bool> stop_{false};
};

}  // namespace cera
