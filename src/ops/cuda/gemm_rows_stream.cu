// gemm_rows' streaming kernel for Q4_0 weights at serving batches (gemm_rows.h:
// gemm_rows_stream_parts): out[t][o] = sum_k x[t][k] W[o][k] (+ bias[o]), the weight as the A
// operand of mma.sync m16n8k16, through the same fragments, k order and decode as
// gemm_rows_direct (direct::superstep_mma), but fed by a producer warp.
//
// The one decision: the blocks are persistent (as many as are resident at once) and take work items
// from a queue; a producer warp per block streams each item's weights into a ring of shared-memory
// stages with 16-byte cp.async (128 bytes of codes and 16 of scales a row a stage, the token tile's
// activations likewise), completing on mbarriers, and runs on into the next item without a break,
// while 4 consumer warps (32 weight rows each) decode and multiply. Why: the direct kernels launch
// one block per (row tile, token tile, k split), each ~3-11 supersteps long, so every block pays
// the DRAM latency of its first stage and its epilogue with nothing in flight, the blocks come in
// 1.6-3.4 waves of ~400 slots (a last partial wave), and each warp reads 64 bytes of 32 rows a
// superstep; at 16 rows the 8B gate/up weights streamed at 1.4-1.6 TB/s
// (docs/benchmarks/serving_batch_h200.md). Here the ring never drains between items, the queue ends
// the launch within one item of balance, and a row is read 128 contiguous bytes at a time.
// Items: (weight, 128-row tile, token tile, k split); a token tile is 8, 16, 32 or 64 tokens (one
// tile up to 64 rows: the weights are read and decoded once). k splits are the direct kernels'
// fix-up (partials in split_scratch, the last to arrive adds them in split order), per warp.
// Shapes it takes: Q4_0 rows of a multiple of 256 elements (a stage is 8 blocks of every row; the
// scale copies are then 16-byte aligned).
// Status (docs/benchmarks/serving_batch_h200.md): correct on an H100 (the serving-rows sweep,
// memcheck clean) but, with the weights as 256 bulk copies of 128 and 16 bytes a stage, 3-6x
// slower than the direct kernels (DRAM at 7 %, ~100 cycles a copy). The weights now travel by
// cp.async, not yet run on a GPU (the session's device time ran out). Off by default
// (CERA_CUDA_ROWS_STREAM=1 or 2 turns it on) until scripts/cuda-check.sh's `stream` section has
// checked and measured it.
#include <algorithm>
#include <cstdlib>
#include <span>

#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gemm_rows.h"
#include "ops/cuda/gemm_rows_direct.cuh"
#include "ops/cuda/gemv_stream.cuh"
#include "ops/cuda/mma.cuh"
#include "ops/cuda/weight_layout.h"

namespace cera::ops::cuda {
namespace rows_stream {
namespace {

using namespace mma;
using namespace direct;
using gemv_stream::mbar_arrive;
using gemv_stream::mbar_fence_init;
using gemv_stream::mbar_init;
using gemv_stream::mbar_wait;

constexpr int kConsumers = kWarps;                 // consumer warps, 32 weight rows each
constexpr int kGroupRows = kRowsBlock;             // weight rows of an item (128)
constexpr int kStreamThreads = (kConsumers + 1) * 32;    // + the producer warp
constexpr int kStageBlocks = 8;                    // Q4_0 blocks of a row a stage (2 supersteps)
constexpr int kStageK = kStageBlocks * 32;         // 256
// A row's codes at a stride of 192 bytes: the 8 lanes of a phase of a 16-byte load read rows g
// and g + 1 (64 bytes each), which then lie in opposite halves of the banks.
constexpr int kCodeStride = kStageBlocks * 16 + 64;
constexpr int kCodeBytes = kGroupRows * kCodeStride;  // 24,576
constexpr int kScaleStride = kStageBlocks * 2;        // 16: 8 rows of a load's lanes, 8 bank groups
constexpr int kScaleBytes = kGroupRows * kScaleStride;  // 2,048
constexpr int kMaxStages = 12;
constexpr int kHeaderBytes = 384;  // full[kMaxStages], empty[kMaxStages] mbarriers, then the item headers
static_assert(kMaxStages * (8 + 8 + 8) <= kHeaderBytes);
constexpr int kQueueSlots = 512;  // a launch's queue: slot = launch ordinal % kQueueSlots
constexpr size_t kMaxSmem = 227 * 1024;

// A stage's bytes and the ring's depth, fixed by the token tile and the resident blocks an SM
// (1 KB of shared memory a block is the system's): compile-time, so the stage index and phase are
// shifts and masks in the loops, and nothing derived travels in the parameters.
template <int kTT>
constexpr int stage_bytes() {
  return kCodeBytes + kScaleBytes + kTT * kStageK * 2;
}
template <int kTT, int kBlocksSM>
constexpr int ring_stages() {
  const int n = int((kMaxSmem / kBlocksSM - 1024 - kHeaderBytes) / stage_bytes<kTT>());
  return n < kMaxStages ? n : kMaxStages;
}

// The direct kernels' parameters (d: parts, activations, token tiles; part[i].first_block is
// the part's first item) and the stream's own.
struct StreamParams {
  DirectParams d;
  int n_items;     // the launch's items
  int32_t* queue;  // [2]: next item, blocks done; zero between launches
};

// An item's work; its k steps are stages (d.n_blocks / kStageBlocks a row).
template <int kTT>
__device__ __forceinline__ BlockWork item_of(const StreamParams& p, int it) {
  return work_of(p.d, kTT, it, p.d.n_blocks / kStageBlocks);
}

__device__ __forceinline__ void cp_async_mbar_arrive_noinc(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void prefetch_l2(const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
}

// The producer warp: items from the queue (a block's first is its own), each stage's weights by
// cp.async and its activations likewise (x_piece order, tokens past n_tokens as zeros), then a
// header with item -1 (consumers stop there). full[s] completes when lane 0 has arrived (after
// writing the header) and every lane's cp.async copies have landed (33 arrivals).
template <int kTT, int kStages>
__device__ __forceinline__ void produce(const StreamParams& p, uint8_t* ring, uint64_t* full, uint64_t* empty,
                                        int2* header) {
  const int lane = threadIdx.x & 31;
  int item = int(blockIdx.x);
  // The weights of the first item's first stages into L2 before the PDL wait: no kernel writes
  // them (launch.cuh); the activations are the previous kernel's output.
  if (item < p.n_items) {
    const BlockWork w = item_of<kTT>(p, item);
    const DirectPart& P = p.d.part[w.pi];
    const int n = min(w.n_s, kStages);
    for (int r = lane; r < kGroupRows; r += 32) {
      const int64_t b = int64_t(min(w.n0 + r, P.n_out - 1)) * p.d.n_blocks + int64_t(w.s0) * kStageBlocks;
      prefetch_l2(P.qs + b, uint32_t(n * kStageBlocks * 16));
      prefetch_l2(P.d + b, uint32_t(n * kStageBlocks * 2));
    }
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");
  for (int64_t k = 0;;) {
    if (item >= p.n_items) {
      const int s = int(k % kStages);
      if (k >= kStages) mbar_wait(&empty[s], uint32_t((k / kStages) & 1) ^ 1u);
      if (lane == 0) {
        header[s] = make_int2(-1, 0);
        mbar_arrive(&full[s]);
      }
      cp_async_mbar_arrive_noinc(&full[s]);  // no copies pending: arrives at once
      return;
    }
    const BlockWork w = item_of<kTT>(p, item);
    const DirectPart& P = p.d.part[w.pi];
    for (int j = 0; j < w.n_s; ++j, ++k) {
      const int s = int(k % kStages);
      if (k >= kStages) mbar_wait(&empty[s], uint32_t((k / kStages) & 1) ^ 1u);
      uint8_t* st = ring + size_t(s) * stage_bytes<kTT>();
      const int64_t kb0 = int64_t(w.s0 + j) * kStageBlocks;
      if (lane == 0) {
        header[s] = make_int2(item, j);
        mbar_arrive(&full[s]);
      }
      // Weights by 16-byte cp.async: 8 lanes a row's 128 bytes of codes, the first of them its 16
      // bytes of scales too. As 256 bulk copies of 128 and 16 bytes a stage the copies were the
      // bound (H100, 4096 x 6144 at 16 tokens: 84 us against the direct kernel's 21 us, DRAM at
      // 7 %, ~100 cycles a copy). Rows past n_out re-read the last row: their products are never
      // stored.
      for (int i = lane; i < kGroupRows * kStageBlocks; i += 32) {
        const int r = i / kStageBlocks, j = i % kStageBlocks;
        const int64_t b = int64_t(min(w.n0 + r, P.n_out - 1)) * p.d.n_blocks + kb0;
        cp_async16(smem_addr(st + r * kCodeStride + j * 16), P.qs + b + j);
        if (j == 0) cp_async16(smem_addr(st + kCodeBytes + r * kScaleStride), P.d + b);
      }
      uint4* xs = reinterpret_cast<uint4*>(st + kCodeBytes + kScaleBytes);
      const __half* x0 = p.d.x + kb0 * 32;
#pragma unroll 4
      for (int i = lane; i < kTT * kStageK / 8; i += 32) {
        const int t = i / (kStageK / 8), r = i % (kStageK / 8);
        const bool in = w.m0 + t < p.d.n_tokens;
        const __half* src = in ? x0 + int64_t(w.m0 + t) * p.d.n_in + 8 * r : p.d.x;
        cp_async16_zfill(smem_addr(xs + direct::x_piece<kStageK>(t, r / 4, r % 4)), src, in ? 16 : 0);
      }
      cp_async_mbar_arrive_noinc(&full[s]);
    }
    int next = 0;
    if (lane == 0) next = atomicAdd(&p.queue[0], 1) + int(gridDim.x);
    item = __shfl_sync(0xffffffffu, next, 0);
  }
}

// The consumer warps' barrier (named barrier 1; the producer warp is busy elsewhere).
struct ConsumerSync {
  __device__ __forceinline__ void operator()() const {
    asm volatile("bar.sync 1, %0;" ::"n"(kStreamThreads - 32) : "memory");
  }
};

template <int kNN, int kBlocksSM>
__global__ void __launch_bounds__(kStreamThreads, kBlocksSM)
    gemm_rows_stream_kernel(const __grid_constant__ StreamParams p) {
  constexpr int kTT = 8 * kNN;
  constexpr int kStages = ring_stages<kTT, kBlocksSM>();
  static_assert(kStages >= 2, "a ring of fewer than 2 stages");
  extern __shared__ __align__(128) uint8_t smem[];
  auto* full = reinterpret_cast<uint64_t*>(smem);
  uint64_t* empty = full + kMaxStages;
  auto* header = reinterpret_cast<int2*>(empty + kMaxStages);
  uint8_t* ring = smem + kHeaderBytes;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 33);
      mbar_init(&empty[s], kConsumers);
    }
    mbar_fence_init();
  }
  __syncthreads();
  // Let the next launch be scheduled now: its blocks may start their copies beside this one.
  asm volatile("griddepcontrol.launch_dependents;" :::);
  if (warp == kConsumers) {
    produce<kTT, kStages>(p, ring, full, empty, header);
  } else {
    asm volatile("griddepcontrol.wait;" ::: "memory");  // outputs and partials: the previous kernel's
    float acc[2][kNN][4];
    BlockWork w{};
    for (int64_t k = 0;; ++k) {
      const int s = int(k % kStages);
      mbar_wait(&full[s], uint32_t((k / kStages) & 1));
      const int2 h = header[s];
      if (h.x < 0) break;
      if (h.y == 0) {
        w = item_of<kTT>(p, h.x);
        zero_acc<kNN>(acc);
      }
      const uint8_t* st = ring + size_t(s) * stage_bytes<kTT>();
      const uint4* xs = reinterpret_cast<const uint4*>(st + kCodeBytes + kScaleBytes);
#pragma unroll
      for (int ls = 0; ls < kStageBlocks / 4; ++ls) {
        uint4 q[2][2];
        __half2 d[2][2];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const int r = 32 * warp + 16 * mt + g + 8 * hh, j = 4 * ls + c;
            q[mt][hh] = *reinterpret_cast<const uint4*>(st + r * kCodeStride + j * 16);
            d[mt][hh] = __half2half2(*reinterpret_cast<const __half*>(st + kCodeBytes + r * kScaleStride + j * 2));
          }
        }
        direct::superstep_mma<kNN, kStageK>(q, d, xs, 4 * ls + c, g, acc);
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[s]);
      if (h.y == w.n_s - 1) direct_epilogue<kNN>(p.d, w, acc, ConsumerSync{});
    }
  }
  // The last block out leaves the queue zero for the launch that next uses this slot.
  __syncthreads();
  if (threadIdx.x == 0 && atomicAdd(&p.queue[1], 1) == int(gridDim.x) - 1) {
    p.queue[0] = 0;
    p.queue[1] = 0;
  }
}

struct StreamKernel {
  void (*kernel)(StreamParams);
  int tokens;     // a token tile
  size_t smem;    // dynamic shared memory a block
  int blocks_sm;  // resident blocks an SM (the grid is this times the SM count)
};

template <int kNN, int kBlocksSM>
StreamKernel kernel_of() {
  static const StreamKernel k = [] {
    constexpr int kTT = 8 * kNN;
    StreamKernel r{gemm_rows_stream_kernel<kNN, kBlocksSM>, kTT,
                   size_t(kHeaderBytes) + size_t(ring_stages<kTT, kBlocksSM>()) * stage_bytes<kTT>(), 0};
    CERA_CUDA_CHECK(cudaFuncSetAttribute(r.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(r.smem)));
    CERA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&r.blocks_sm, r.kernel, kStreamThreads, r.smem));
    CERA_CHECK_MSG(r.blocks_sm >= 1, "gemm_rows_stream: the kernel does not fit an SM");
    r.blocks_sm = std::min(r.blocks_sm, kBlocksSM);
    return r;
  }();
  return k;
}

// Two blocks an SM leave each ~112 KB: a ring of 3 stages up to 16 tokens, 2 at 32; tiles of 64
// tokens (58 KB a stage) run one block an SM.
StreamKernel kernel_for(int64_t n_tokens) {
  const bool two = rows_stream_blocks() == 2;
  if (n_tokens <= 8) return two ? kernel_of<1, 2>() : kernel_of<1, 1>();
  if (n_tokens <= 16) return two ? kernel_of<2, 2>() : kernel_of<2, 1>();
  if (n_tokens <= 32) return two ? kernel_of<4, 2>() : kernel_of<4, 1>();
  return kernel_of<8, 1>();
}

}  // namespace
}  // namespace rows_stream

int rows_stream_blocks() {
  static const int v = [] {
    const char* e = std::getenv("CERA_CUDA_ROWS_STREAM");
    if (e == nullptr || *e == '\0') return 0;  // off until measured on a GPU (gemm_rows.h)
    const int n = std::atoi(e);
    return n == 0 || n == 2 ? n : 1;
  }();
  return v;
}

int64_t rows_stream_max() {
  static const int64_t v = env_int("CERA_CUDA_ROWS_STREAM_MAX", 64, 0, kRowsMaxLimit);
  return v;
}

bool gemm_rows_stream_takes(const TensorView& weight, int64_t n_tokens) {
  return weight.dtype == DType::kQ4_0 && !batch_invariant() && rows_stream_blocks() > 0 &&
         n_tokens <= rows_stream_max() && weight.cols() % rows_stream::kStageK == 0;
}

void gemm_rows_stream_parts(CudaContext& ctx, const TensorView& x, std::span<const RowsTarget> parts) {
  using namespace rows_stream;
  CERA_CHECK_MSG(!parts.empty() && parts.size() <= size_t(kMaxGemvParts), "gemm_rows: 1 to 3 weights a launch");
  const TensorView& w0 = parts[0].weight;
  const int64_t n_in = w0.cols(), n_tokens = x.rows();
  CERA_CHECK_MSG(w0.dtype == DType::kQ4_0 && n_in % kStageK == 0,
                 "gemm_rows_stream: Q4_0 weights of a multiple of 256 elements a row only");
  const StreamKernel k = kernel_for(n_tokens);
  const int64_t grid = int64_t(k.blocks_sm) * ctx.sm_count();
  const int64_t m_tiles = (n_tokens + k.tokens - 1) / k.tokens;
  const int64_t n_stages_row = n_in / kStageK;
  // k splits as the direct kernels plan them (plan_splits: from the weight's shape alone), for
  // about 4 items a block (2 with tiles of 32 and 64 tokens, whose partial tiles are large) and
  // at least a stage an item.
  const int64_t per_block = k.tokens >= 32 ? 2 : 4;
  const SplitPlan plan = plan_splits(parts, {.tile_rows = kGroupRows, .m_tiles = m_tiles, .k_steps = 2 * n_stages_row,
                                             .tile_floats = int64_t(kGroupRows) * k.tokens,
                                             .slots = std::max<int64_t>(1, per_block * grid / m_tiles)});
  const void* xh = gemm_activations(ctx, x, false);
  const SplitScratch scratch = split_scratch(ctx, plan.counters, plan.partial_floats, parts.size());
  auto* queues =
      static_cast<int32_t*>(ctx.zeroed_scratch(ScratchKind::kRowsQueues, uint64_t(2 * kQueueSlots) * sizeof(int32_t)));
  if (!ctx.launching()) return;
  StreamParams p{};
  p.d = direct_params(parts, plan, scratch, xh, n_tokens, m_tiles);
  p.n_items = int(plan.blocks);
  p.queue = queues + 2 * (ctx.next_launch_slot() % kQueueSlots);
  launch(ctx.stream(), k.kernel, unsigned(std::min(grid, plan.blocks)), kStreamThreads, k.smem, p);
  CERA_CUDA_LAUNCHED();
}

}  // namespace cera::ops::cuda
