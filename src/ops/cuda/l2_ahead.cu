// L2Ahead (l2_ahead.h): the weight-stream plan and the prefetch kernel of its side branch.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/l2_ahead.h"
#include "ops/cuda/weight_layout.h"

namespace cera::ops::cuda {
namespace {

constexpr int kMaxRanges = 24;              // a window over up to 8 weights of 3 regions
constexpr uint64_t kMinFork = 256ull << 10;  // smaller moves (or a quarter window) wait for a later launch
constexpr int kThreads = 128;
constexpr uint64_t kLine = 128;

struct L2Range {
  const uint8_t* p;
  uint64_t bytes;
};
struct L2PrefetchParams {
  L2Range r[kMaxRanges];
  int n;
};

// Each thread asks L2 for a strided share of the ranges' 128-byte lines (fire and forget: the
// kernel ends long before the lines arrive). Every address lies inside a range. kLast: the lines
// are marked evict_last, so that GEMVs streaming with normal priority do not push them out first.
template <bool kLast>
__global__ void __launch_bounds__(kThreads) l2_prefetch_kernel(const __grid_constant__ L2PrefetchParams p) {
  const uint64_t tid = uint64_t(blockIdx.x) * kThreads + threadIdx.x, n_threads = uint64_t(gridDim.x) * kThreads;
  for (int k = 0; k < p.n; ++k) {
    const uint64_t lines = (p.r[k].bytes + kLine - 1) / kLine;
    for (uint64_t l = tid; l < lines; l += n_threads) {
      if constexpr (kLast) {
        asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(p.r[k].p + l * kLine));
      } else {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p.r[k].p + l * kLine));
      }
    }
  }
}

// CERA_CUDA_L2_AHEAD_PRIORITY=last: prefetch with evict_last (an A/B switch; default normal).
bool evict_last_requested() {
  const char* env = std::getenv("CERA_CUDA_L2_AHEAD_PRIORITY");
  return env != nullptr && std::string(env) == "last";
}

uint64_t scaled(uint64_t x, uint64_t num, uint64_t den, bool round_up) {
  const unsigned __int128 v = static_cast<unsigned __int128>(x) * num;
  return static_cast<uint64_t>(round_up ? (v + den - 1) / den : v / den);
}

}  // namespace

uint64_t l2_ahead_window(uint64_t fallback) {
  const char* env = std::getenv("CERA_CUDA_L2_AHEAD_MB");
  if (env == nullptr || *env == '\0') return fallback;
  return uint64_t(std::max(0L, std::strtol(env, nullptr, 10))) << 20;
}

L2Ahead::L2Ahead(CudaContext& ctx, uint64_t window_bytes)
    : ctx_(ctx), window_(window_bytes), evict_last_(evict_last_requested()) {
  CERA_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  CERA_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  CERA_CUDA_CHECK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
}

L2Ahead::~L2Ahead() {
  cudaEventDestroy(fork_);
  cudaEventDestroy(join_);
  cudaStreamDestroy(side_);
}

void L2Ahead::begin(std::span<const Call> calls) {
  parts_.clear();
  total_ = cursor_ = 0;
  next_part_ = 0;
  forked_ = false;
  forks_ = bytes_ = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    const Call& c = calls[i];
    if (c.verb != Verb::kMatmul || c.b.rows() == 0 || c.b.rows() > kGemvMaxTokens) continue;
    if (!is_supported_weight(c.a.dtype)) continue;
    const WeightLayout l = weight_layout(c.a.dtype, c.a.cols(), c.a.rows());
    Part p;
    p.call = i;
    p.offset = total_;
    p.bytes = l.total_bytes;
    const auto* base = reinterpret_cast<const uint8_t*>(c.a.data);
    if (!l.repacked) {
      p.region[p.n_regions++] = {base, l.total_bytes};
    } else {
      // Regions follow one another: each ends where the next used one starts (or at the end).
      for (int r = 0; r < 3 && (r == 0 || l.region_offset[r] > 0); ++r) {
        const uint64_t end = r + 1 < 3 && l.region_offset[r + 1] > 0 ? l.region_offset[r + 1] : l.total_bytes;
        p.region[p.n_regions++] = {base + l.region_offset[r], end - l.region_offset[r]};
      }
    }
    total_ += p.bytes;
    parts_.push_back(p);
  }
}

void L2Ahead::launched(size_t next) {
  while (next_part_ < parts_.size() && parts_[next_part_].call < next) ++next_part_;
  if (next_part_ == parts_.size()) return;
  const uint64_t start = parts_[next_part_].offset;
  const uint64_t lo = std::max(cursor_, start), hi = std::min(start + window_, total_);
  const uint64_t min_fork = std::min(kMinFork, window_ / 4);
  if (hi <= lo || (hi - lo < min_fork && hi < total_)) return;
  prefetch(lo, hi);
}

void L2Ahead::prefetch(uint64_t lo, uint64_t hi) {
  L2PrefetchParams p{};
  for (size_t k = next_part_; k < parts_.size() && parts_[k].offset < hi; ++k) {
    const Part& part = parts_[k];
    if (part.offset + part.bytes <= lo) continue;
    if (p.n + part.n_regions > kMaxRanges) {
      hi = part.offset;  // the rest waits for a later launch
      break;
    }
    const uint64_t a = std::max(lo, part.offset) - part.offset;
    const uint64_t b = std::min(hi, part.offset + part.bytes) - part.offset;
    for (int r = 0; r < part.n_regions; ++r) {
      const Region& g = part.region[r];
      const uint64_t from = scaled(a, g.bytes, part.bytes, false), to = scaled(b, g.bytes, part.bytes, true);
      if (to > from) {
        p.r[p.n++] = {g.base + from, to - from};
        bytes_ += to - from;
      }
    }
  }
  if (p.n == 0) return;
  CERA_CUDA_CHECK(cudaEventRecord(fork_, ctx_.stream()));
  CERA_CUDA_CHECK(cudaStreamWaitEvent(side_, fork_, 0));
  const auto kernel = evict_last_ ? l2_prefetch_kernel<true> : l2_prefetch_kernel<false>;
  kernel<<<unsigned(ctx_.sm_count()), kThreads, 0, side_>>>(p);
  CERA_CUDA_LAUNCHED();
  forked_ = true;
  ++forks_;
  cursor_ = hi;
}

void L2Ahead::end() {
  if (!forked_) return;
  forked_ = false;
  CERA_CUDA_CHECK(cudaEventRecord(join_, side_));
  CERA_CUDA_CHECK(cudaStreamWaitEvent(ctx_.stream(), join_, 0));
}

}  // namespace cera::ops::cuda
