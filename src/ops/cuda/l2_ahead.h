// L2 prefetch of the weights the next decode GEMVs read, as a side branch of a captured graph.
// A decode step alternates weight-bound GEMVs with small latency-bound kernels (norms, RoPE + KV
// write, attention, the gated activation); while those run, DRAM idles. After each launch of a
// captured log, a small kernel on a side stream (forked from that launch, joined at the end of
// the capture, so it delays nothing on the main chain) prefetches into L2 the weight bytes of the
// next matmuls, up to a window of W bytes from the start of the next one, so those GEMVs find
// their first W bytes in L2. The weights of the log's decode matmuls (<= kGemvMaxTokens tokens)
// are treated as one byte stream in call order; each weight's regions (weight_layout.h) are taken
// in proportion, so a prefix of the stream is a prefix of every region's rows.
// Decision: a side branch rather than a kernel in the chain or extra work in the GEMVs: a kernel
// in the programmatic chain adds its completion to the critical path, and GEMV blocks that
// prefetch on exit would overlap the prefetch with their own streaming instead of the idle time.
// The window is CudaBackendOptions::l2_ahead_bytes / CERA_CUDA_L2_AHEAD_MB (0: off).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <vector>

#include "ops/cuda/graph.h"

namespace cera::ops::cuda {

// The window from CERA_CUDA_L2_AHEAD_MB when set, else `fallback` bytes.
uint64_t l2_ahead_window(uint64_t fallback);

class L2Ahead {
 public:
  L2Ahead(CudaContext& ctx, uint64_t window_bytes);
  ~L2Ahead();
  L2Ahead(const L2Ahead&) = delete;
  L2Ahead& operator=(const L2Ahead&) = delete;

  // A capture of `calls` begins on ctx's stream (inside the capture): plans the weight stream.
  void begin(std::span<const Call> calls);
  // The calls before `next` are launched: forks a prefetch of the window ahead of the first
  // decode matmul at or after `next` where it reaches bytes not yet prefetched.
  void launched(size_t next);
  // Joins the side stream into ctx's stream; must come before the capture ends (also on errors).
  void end();

  uint64_t window() const { return window_; }
  // What the last capture forked: prefetch launches and the bytes they cover.
  uint64_t forks() const { return forks_; }
  uint64_t bytes() const { return bytes_; }

 private:
  struct Region {
    const uint8_t* base;
    uint64_t bytes;
  };
  // One matmul's weight: its place in the stream and its regions.
  struct Part {
    size_t call = 0;
    uint64_t offset = 0, bytes = 0;  // stream position and total region bytes
    Region region[3] = {};
    int n_regions = 0;
  };
  void prefetch(uint64_t lo, uint64_t hi);

  CudaContext& ctx_;
  uint64_t window_ = 0;
  bool evict_last_ = false;
  cudaStream_t side_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
  std::vector<Part> parts_;
  uint64_t total_ = 0, cursor_ = 0;
  size_t next_part_ = 0;
  bool forked_ = false;
  uint64_t forks_ = 0, bytes_ = 0;
};

}  // namespace cera::ops::cuda
