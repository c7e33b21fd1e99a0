// Per-verb device time of eager runs (CERA_CUDA_PROFILE=1, which also turns graphs off): CUDA
// events around each verb, summed by verb, weight type and token count, printed as a table when
// the backend goes away. Eager verbs are unfused, so the table says where the work is, not what
// a graph replay costs; the difference to a graph run's token time is launch overhead.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ops/cuda/graph.h"

namespace cera::ops::cuda {

class VerbProfiler {
 public:
  explicit VerbProfiler(cudaStream_t stream) : stream_(stream) {}
  ~VerbProfiler();  // prints the table to stderr
  VerbProfiler(const VerbProfiler&) = delete;
  VerbProfiler& operator=(const VerbProfiler&) = delete;

  void begin(const Call& call);
  void end();

  static bool requested();  // CERA_CUDA_PROFILE=1

 private:
  struct Pending {
    std::string key;
    cudaEvent_t start, stop;
  };
  struct Total {
    double ms = 0;
    int64_t calls = 0;
  };
  void drain();  // waits for the pending events and adds them up

  cudaStream_t stream_;
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> free_events_;
  std::map<std::string, Total> totals_;
};

}  // namespace cera::ops::cuda
