// Streaming GEMV for 1-2 tokens (decode), v7 in docs/benchmarks/cuda.md. A few blocks per SM take
// groups of 8 output rows from a queue (an atomic counter). A block's producer warp streams each
// group's weight in tiles (8 rows x ku units, one row per consumer warp) into a ring of
// shared-memory stages with bulk asynchronous copies (cp.async.bulk, the TMA's one-dimensional
// form) that complete on mbarriers; 8 consumer warps dot each tile with the activations, which they
// copy once into shared memory. A queue, not a fixed range a block: blocks are not placed one an SM
// (two may share an SM while another is still busy with the previous kernel), and fixed ranges
// made the launch as slow as its most crowded SM (first version: 8B decode 478 -> 327 t/s).
// Why not one warp a row (gemv_kernels.cuh): there each warp keeps ~2 KB of loads in flight in
// registers and blocks turn over row by row. Here the bytes in flight are the ring (~96 KB a
// block, independent of registers), the copies start before the PDL wait (weights are constant,
// launch.cuh), and the queue balances the rows over whatever SMs are free, so there is no last
// wave. Measured alone (tools/cuda/gemv_bench, launches chained with PDL): 8B Q4_0 gate/up 21.4 ->
// 18.2 us (72 -> 84 % of 4.3 TB/s), F16 65 -> 54 us; but slower on the small launches (8B Q4_0
// Q/K/V 7.3 -> 8.2 us, 1B Q4_0 gate/up 8.1 -> 9.6 us), so gemv.cu takes it only where it pays.
// Shapes it takes (plan_stream): 32-element block types whose rows are a multiple of 256 elements
// (every plane's row is then a multiple of 16 bytes), F16/BF16 rows of a multiple of 8 elements.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "ops/cuda/act_quant.cuh"
#include "ops/cuda/gemv_kernels.cuh"
#include "ops/cuda/mma.cuh"

namespace cera::ops::cuda::gemv_stream {

using gemv_detail::GemvParams;
using gemv_detail::GemvPart;

constexpr int kConsumerWarps = 8;                    // rows of a tile
constexpr int kThreads = (kConsumerWarps + 1) * 32;  // + the producer warp
constexpr int kMaxTokens = 2;

// ---- mbarriers and bulk copies (PTX ISA 8.0, sm_90) ---------------------------------------------
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(mma::smem_addr(bar)), "r"(count));
}
// The barrier init made visible to the async proxy (the bulk copies complete on it).
__device__ __forceinline__ void mbar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(mma::smem_addr(bar)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(mma::smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred done;\n WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra WAIT;\n}\n" ::"r"(mma::smem_addr(bar)),
      "r"(parity)
      : "memory");
}
// Weights are read once a token: evict them first, so the activations and the K/V cache stay in L2.
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar,
                                          uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1], %2, [%3], %4;" ::"r"(mma::smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(mma::smem_addr(bar)), "l"(policy)
      : "memory");
}
__device__ __forceinline__ void consumers_sync() {  // named barrier 1: the consumer warps only
  asm volatile("bar.sync 1, %0;" ::"n"(kConsumerWarps * 32) : "memory");
}

// ---- units as they lie in shared memory ---------------------------------------------------------
// A stage holds, per plane p, the tile's 8 row segments of ku units (kB<p> bytes a unit) one after
// another. Quantized types reuse Unit<T>::Raw and Unit<T>::dotx (quant_units.cuh); activations
// are the quantized codes split into low and high 16-byte halves (conflict-free 16-byte reads).
__device__ __forceinline__ uint4 lds16(const uint8_t* p) { return *reinterpret_cast<const uint4*>(p); }
__device__ __forceinline__ float lds_f16(const uint8_t* p) { return __half2float(*reinterpret_cast<const __half*>(p)); }

struct Planes {
  const uint8_t* p[3];
};

template <DType T>
struct Stream;

template <>
struct Stream<DType::kQ4_0> {
  static constexpr int kB0 = 16, kB1 = 2, kB2 = 0;
  using Raw = Unit<DType::kQ4_0>::Raw;
  __device__ static Raw load(const Planes& s, int u) { return {lds16(s.p[0] + u * 16), lds_f16(s.p[1] + u * 2)}; }
};
template <>
struct Stream<DType::kQ4_1> {
  static constexpr int kB0 = 16, kB1 = 4, kB2 = 0;
  using Raw = Unit<DType::kQ4_1>::Raw;
  __device__ static Raw load(const Planes& s, int u) {
    const __half2 dm = *reinterpret_cast<const __half2*>(s.p[1] + u * 4);
    return {lds16(s.p[0] + u * 16), __low2float(dm), __high2float(dm)};
  }
};
template <>
struct Stream<DType::kQ5_0> {
  static constexpr int kB0 = 16, kB1 = 4, kB2 = 2;
  using Raw = Unit<DType::kQ5_0>::Raw;
  __device__ static Raw load(const Planes& s, int u) {
    return {lds16(s.p[0] + u * 16), *reinterpret_cast<const uint32_t*>(s.p[1] + u * 4), lds_f16(s.p[2] + u * 2)};
  }
};
template <>
struct Stream<DType::kQ5_1> {
  static constexpr int kB0 = 16, kB1 = 4, kB2 = 4;
  using Raw = Unit<DType::kQ5_1>::Raw;
  __device__ static Raw load(const Planes& s, int u) {
    const __half2 dm = *reinterpret_cast<const __half2*>(s.p[2] + u * 4);
    return {lds16(s.p[0] + u * 16), *reinterpret_cast<const uint32_t*>(s.p[1] + u * 4), __low2float(dm),
            __high2float(dm)};
  }
};
template <>
struct Stream<DType::kQ8_0> {
  static constexpr int kB0 = 32, kB1 = 2, kB2 = 0;
  using Raw = Unit<DType::kQ8_0>::Raw;
  __device__ static Raw load(const Planes& s, int u) {
    return {lds16(s.p[0] + u * 32), lds16(s.p[0] + u * 32 + 16), lds_f16(s.p[1] + u * 2)};
  }
};
// Plain types: a unit is 8 weights (16 bytes) dotted with 8 float activations.
template <DType T>
  requires(T == DType::kF16 || T == DType::kBF16)
struct Stream<T> {
  static constexpr int kB0 = 16, kB1 = 0, kB2 = 0;
};

template <DType T>
constexpr bool is_plain() {
  return T == DType::kF16 || T == DType::kBF16;
}
template <DType T>
constexpr int unit_bytes() {
  return Stream<T>::kB0 + Stream<T>::kB1 + Stream<T>::kB2;
}
template <DType T>
__host__ __device__ constexpr int plane_bytes(int plane) {
  return plane == 0 ? Stream<T>::kB0 : plane == 1 ? Stream<T>::kB1 : Stream<T>::kB2;
}
template <DType T>
constexpr int unit_elems() {
  return is_plain<T>() ? 8 : 32;
}

// ---- parameters ---------------------------------------------------------------------------------
// Gated mode (fused.cu: gate ; up ; gated_activation, CERA_CUDA_FUSE_GATED=1): the launch's two
// parts are the gate and the up weight of n_ff rows each. A row group holds gate rows 4g .. 4g+3
// and the up rows of the same outputs, and its epilogue also writes h = act(gate) * up and, with
// q, h's Q8_0 codes: the last of a 32-output block's 8 groups to finish quantizes the block
// (an arrival counter a block, as the attention kernel merges its splits).
struct GatedOut {
  float* h;            // token t, output j at h[t * h_stride + j]
  int64_t h_stride;    // floats
  int8_t* q;           // null, or codes [n_tokens, n_ff] and (d, sum) ds [n_tokens, n_ff / 32]
  float2* ds;
  int32_t* arrivals;   // [n_ff / 32] groups done; zero between launches
  int32_t n_ff;
  bool gelu;
};

struct StreamParams {
  GemvParams g;                            // parts (weights, outputs, bias, residual) and activations
  int64_t first_row[kMaxGemvParts + 1];    // part i: the launch's rows [first_row[i], first_row[i + 1])
  int32_t* queue;                          // [2]: next row group, blocks done; zero between launches
  int32_t units;                           // per row
  int32_t ku;                              // units of a tile column (a multiple of 8)
  int32_t n_col_tiles;
  int32_t n_stages;
  uint32_t stage_bytes;                    // 8 x ku x unit bytes
  uint32_t act_bytes;                      // activation region, per token
  GatedOut gated;                          // gated mode (gemv_stream_kernel<T, B, true>) only
};

// Shared memory: n_stages full and empty mbarriers and tile headers, then the activations, then the ring.
constexpr int kMaxStages = 16;
constexpr uint32_t kHeaderBytes = kMaxStages * (8 + 8 + 8);
constexpr int kQueueSlots = 512;         // a launch's queue: slot = launch ordinal % kQueueSlots (gemv.cu)
constexpr size_t kMaxSmem = 227 * 1024;  // shared memory a block may have on sm_90
constexpr size_t kStaticSmem = 256;      // room for the kernel's static shared memory (vals)
constexpr int kMaxArrivalBlocks = 8192;  // gated mode: n_ff / 32 at most (gemv.cu)

// The tile a stage holds: row group (-1: no more work) and tile column.
struct TileHeader {
  int32_t group;
  int32_t col;
};

// The plane base and byte address of (local row, unit) of part w.
template <DType T>
__device__ __forceinline__ const uint8_t* plane_at(const QWeight& w, int plane, int64_t local, int64_t units,
                                                   int64_t unit) {
  if constexpr (is_plain<T>()) {
    return w.r0 + local * w.row_stride + unit * 16;
  } else {
    const uint8_t* base = plane == 0 ? w.r0 : plane == 1 ? w.r1 : w.r2;
    return base + (local * units + unit) * plane_bytes<T>(plane);
  }
}

__device__ __forceinline__ int part_of_row(const StreamParams& p, int64_t row) {
  int i = 0;
  while (i + 1 < p.g.n_parts && row >= p.first_row[i + 1]) ++i;
  return i;
}

// Gated mode: row i (0..7) of row group g, its part (0 gate, 1 up) and row within the part.
struct RowRef {
  bool valid;
  int part;
  int64_t local;
};
__device__ __forceinline__ RowRef gated_row(const StreamParams& p, int64_t g, int i) {
  const int64_t j = 4 * g + (i & 3);
  return {j < p.gated.n_ff, i >> 2, j};
}

// The rows and units of row group g, tile column c: the group's valid rows (outside gated mode
// row0 .. row0 + rows - 1 of the launch).
struct Tile {
  int64_t row0;
  int rows;
  int col;
  int ku_this;
};
template <bool kGated>
__device__ __forceinline__ Tile tile_of(const StreamParams& p, int64_t g, int c) {
  if constexpr (kGated) {
    const int64_t left = p.gated.n_ff - 4 * g;
    return {0, 2 * int(left < 4 ? left : 4), c, min(p.ku, p.units - c * p.ku)};
  } else {
    const int64_t row0 = g * kConsumerWarps, total = p.first_row[p.g.n_parts];
    return {row0, int(total - row0 < kConsumerWarps ? total - row0 : kConsumerWarps), c, min(p.ku, p.units - c * p.ku)};
  }
}

// The producer warp: takes row groups from the queue and streams their tiles into the ring, then
// posts a header with group -1 (consumers stop there).
template <DType T, bool kGated>
__device__ __forceinline__ void produce(const StreamParams& p, uint8_t* ring, uint64_t* full, uint64_t* empty,
                                        TileHeader* header) {
  const int lane = threadIdx.x & 31;
  const uint64_t policy = evict_first_policy();
  const int64_t total = p.first_row[p.g.n_parts],
                n_groups = kGated ? (p.gated.n_ff + 3) / 4 : (total + kConsumerWarps - 1) / kConsumerWarps;
  // A block's first group is its own (no queue round trip before the first copies); the next one
  // is asked for once this one's copies are issued (asking earlier reserved groups ahead of the
  // blocks that would finish first: 8B down 13.5 -> 17.0 us).
  int32_t g = int32_t(blockIdx.x);
  for (int64_t k = 0;;) {
    for (int c = 0; c < (g < n_groups ? p.n_col_tiles : 1); ++c, ++k) {
      const int s = int(k % p.n_stages);
      if (k >= p.n_stages) mbar_wait(&empty[s], uint32_t((k / p.n_stages) & 1) ^ 1u);
      if (g >= n_groups) {
        if (lane == 0) {
          header[s] = {-1, 0};
          mbar_arrive(&full[s]);
        }
        return;
      }
      const Tile t = tile_of<kGated>(p, g, c);
      if (lane == 0) {
        header[s] = {g, c};
        mbar_arrive_expect_tx(&full[s], uint32_t(t.rows) * t.ku_this * unit_bytes<T>());
      }
      __syncwarp();
      if constexpr (kGated) {
        // Lane i copies row i of the group (gate rows 0-3, up rows 4-7), one copy a plane.
        const RowRef r = gated_row(p, g, lane);
        if (lane < kConsumerWarps && r.valid) {
          const QWeight& w = p.g.part[r.part].w;
          uint8_t* dst = ring + size_t(s) * p.stage_bytes;
#pragma unroll
          for (int pl = 0; pl < 3; ++pl) {
            const int bytes = plane_bytes<T>(pl);
            if (bytes == 0) continue;
            const uint8_t* src = plane_at<T>(w, pl, r.local, p.units, int64_t(t.col) * p.ku);
            bulk_copy(dst + lane * p.ku * bytes, src, uint32_t(t.ku_this * bytes), &full[s], policy);
            dst += kConsumerWarps * p.ku * bytes;
          }
        }
        continue;
      }
      // One copy a plane when the group's rows are one contiguous run (one tile column, one part),
      // else one a row and plane.
      const int p0 = part_of_row(p, t.row0);
      const bool whole = p.n_col_tiles == 1 && p0 == part_of_row(p, t.row0 + t.rows - 1) && !is_plain<T>();
      if (lane < (whole ? 1 : t.rows)) {
        const int64_t row = t.row0 + lane;
        const int pi = whole ? p0 : part_of_row(p, row);
        const QWeight& w = p.g.part[pi].w;
        uint8_t* dst = ring + size_t(s) * p.stage_bytes;
        const uint32_t n_rows = whole ? uint32_t(t.rows) : 1u;
#pragma unroll
        for (int pl = 0; pl < 3; ++pl) {
          const int bytes = plane_bytes<T>(pl);
          if (bytes == 0) continue;
          const uint8_t* src = plane_at<T>(w, pl, row - p.first_row[pi], p.units, int64_t(t.col) * p.ku);
          bulk_copy(dst + lane * p.ku * bytes, src, n_rows * uint32_t(t.ku_this * bytes), &full[s], policy);
          dst += kConsumerWarps * p.ku * bytes;
        }
      }
    }
    int32_t next = 0;
    if (lane == 0) next = atomicAdd(&p.queue[0], 1) + int32_t(gridDim.x);
    g = __shfl_sync(0xffffffffu, next, 0);
  }
}

// Activations into shared memory: quantized codes as [token][unit] low halves, high halves and
// (d, sum); float activations as [token][unit] elements 0-3 and 4-7.
template <DType T, int B>
__device__ __forceinline__ void load_activations(const StreamParams& p, uint8_t* act) {
  const int n_units = int(p.g.n_in / unit_elems<T>());
  for (int t = 0; t < B; ++t) {
    uint8_t* a = act + size_t(t) * p.act_bytes;
    for (int u = threadIdx.x; u < n_units; u += kConsumerWarps * 32) {
      if constexpr (is_plain<T>()) {
        const float4* x = reinterpret_cast<const float4*>(p.g.xf + t * p.g.xf_stride + int64_t(u) * 8);
        reinterpret_cast<float4*>(a)[u] = x[0];
        reinterpret_cast<float4*>(a)[n_units + u] = x[1];
      } else {
        const uint4* x = reinterpret_cast<const uint4*>(p.g.xq + t * p.g.n_in + int64_t(u) * 32);
        reinterpret_cast<uint4*>(a)[u] = x[0];
        reinterpret_cast<uint4*>(a)[n_units + u] = x[1];
        reinterpret_cast<float2*>(a + size_t(n_units) * 32)[u] = p.g.xds[t * (p.g.n_in / 32) + u];
      }
    }
  }
}

template <DType T, int B>
__device__ __forceinline__ void dot_tile(const StreamParams& p, const uint8_t* stage, const uint8_t* act, int warp,
                                         const Tile& t, float (&acc)[B]) {
  const int lane = threadIdx.x & 31;
  const int n_units = int(p.g.n_in / unit_elems<T>());
  const int u0 = t.col * p.ku;  // the tile's first unit of the row
  Planes s;
  s.p[0] = stage + warp * p.ku * Stream<T>::kB0;
  s.p[1] = stage + kConsumerWarps * p.ku * Stream<T>::kB0 + warp * p.ku * Stream<T>::kB1;
  s.p[2] = stage + kConsumerWarps * p.ku * (Stream<T>::kB0 + Stream<T>::kB1) + warp * p.ku * Stream<T>::kB2;
#pragma unroll 4
  for (int u = lane; u < t.ku_this; u += 32) {
    if constexpr (is_plain<T>()) {
      float wf[8];
      gemv_detail::plain8<T>(lds16(s.p[0] + u * 16), wf);
#pragma unroll
      for (int b = 0; b < B; ++b) {
        const float4* a = reinterpret_cast<const float4*>(act + size_t(b) * p.act_bytes);
        const float4 x0 = a[u0 + u], x1 = a[n_units + u0 + u];
        acc[b] += wf[0] * x0.x + wf[1] * x0.y + wf[2] * x0.z + wf[3] * x0.w + wf[4] * x1.x + wf[5] * x1.y +
                  wf[6] * x1.z + wf[7] * x1.w;
      }
    } else {
      const typename Stream<T>::Raw r = Stream<T>::load(s, u);
#pragma unroll
      for (int b = 0; b < B; ++b) {
        const uint8_t* a = act + size_t(b) * p.act_bytes;
        const XUnit x{reinterpret_cast<const uint4*>(a)[u0 + u], reinterpret_cast<const uint4*>(a)[n_units + u0 + u],
                      reinterpret_cast<const float2*>(a + size_t(n_units) * 32)[u0 + u]};
        acc[b] += Unit<T>::dotx(r, x);
      }
    }
  }
}

// Gated mode, warp 0 after the group's 8 rows are stored: vals[i][b] holds row i's output of
// token b (gate rows 0-3, up rows 4-7). Writes h for the group's 4 outputs; with codes, counts
// the group in its 32-output block and the block's last group quantizes the block.
template <int B>
__device__ __forceinline__ void gated_epilogue(const StreamParams& p, int64_t g,
                                               const float (&vals)[kConsumerWarps][B]) {
  const GatedOut& o = p.gated;
  const int lane = threadIdx.x & 31;
  const int64_t j = 4 * g + lane;
  if (lane < 4 && j < o.n_ff) {
    for (int b = 0; b < B; ++b) {
      const float gate = vals[lane][b], up = vals[4 + lane][b];
      o.h[b * o.h_stride + j] = o.gelu ? gelu_tanh(gate) * up : silu_gated(gate, up);
    }
  }
  if (o.q == nullptr) return;
  __threadfence();  // this group's h visible to the block that quantizes, before it is counted
  __syncwarp();
  const int64_t blk = 4 * g / 32;
  int last = 0;
  if (lane == 0) {
    const int64_t left = o.n_ff - 32 * blk;  // outputs from the block's first on
    const int groups = int(left >= 32 ? 8 : (left + 3) / 4);
    last = atomicAdd(&o.arrivals[blk], 1) == groups - 1;
  }
  if (!__shfl_sync(0xffffffffu, last, 0)) return;
  __threadfence();
  for (int b = 0; b < B; ++b) {
    const float v = __ldcg(o.h + b * o.h_stride + 32 * blk + lane);  // other blocks' writes: from L2
    quantize_q8_0_lane(v, o.q + b * o.n_ff + 32 * blk, o.ds + b * (o.n_ff / 32) + blk);
  }
  if (lane == 0) o.arrivals[blk] = 0;  // every group of the block has counted: ready for the next launch
}

template <DType T, int B, bool kGated = false>
__global__ void __launch_bounds__(kThreads) gemv_stream_kernel(const __grid_constant__ StreamParams p) {
  extern __shared__ __align__(128) uint8_t smem[];
  auto* full = reinterpret_cast<uint64_t*>(smem);
  uint64_t* empty = full + kMaxStages;
  auto* header = reinterpret_cast<TileHeader*>(empty + kMaxStages);
  uint8_t* act = smem + kHeaderBytes;
  uint8_t* ring = act + size_t(B) * p.act_bytes;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {
    for (int s = 0; s < p.n_stages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], kConsumerWarps);
    }
    mbar_fence_init();
  }
  __syncthreads();
#if CERA_CUDA_ABLATE == 2
  pdl_entry();  // ends the block (see launch.cuh)
#endif
  // Let the next launch be scheduled now: its blocks may start their copies beside this one.
  asm volatile("griddepcontrol.launch_dependents;" :::);
  if (warp == kConsumerWarps) {
    produce<T, kGated>(p, ring, full, empty, header);  // weights only: no PDL wait
  } else {
    asm volatile("griddepcontrol.wait;" ::: "memory");  // the activations are the previous kernel's
    load_activations<T, B>(p, act);
    consumers_sync();
    float (*vals)[kConsumerWarps][B] = nullptr;  // gated: the group's outputs, by group parity
    if constexpr (kGated) {
      __shared__ float buffers[2][kConsumerWarps][B];
      vals = buffers;
    }
    int parity = 0;
    float acc[B];
    for (int64_t k = 0;; ++k) {
      const int s = int(k % p.n_stages);
      mbar_wait(&full[s], uint32_t((k / p.n_stages) & 1));
      const TileHeader h = header[s];
      if (h.group < 0) break;
      const Tile t = tile_of<kGated>(p, h.group, h.col);
      if (t.col == 0) {
        for (int b = 0; b < B; ++b) acc[b] = 0.0f;
      }
      const bool valid = kGated ? gated_row(p, h.group, warp).valid : warp < t.rows;
      if (valid) dot_tile<T, B>(p, ring + size_t(s) * p.stage_bytes, act, warp, t, acc);
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[s]);
      if (t.col == p.n_col_tiles - 1 && valid) {
        if constexpr (kGated) {
          const RowRef r = gated_row(p, h.group, warp);
          for (int b = 0; b < B; ++b) {
            const float v = gemv_detail::warp_sum(acc[b]);
            if (lane == 0) vals[parity][warp][b] = gemv_detail::store_value(p.g.part[r.part], b, r.local, v);
          }
        } else {
          const int64_t row = t.row0 + warp;
          const int pi = part_of_row(p, row);
          for (int b = 0; b < B; ++b) {
            const float v = gemv_detail::warp_sum(acc[b]);
            if (lane == 0) gemv_detail::store_value(p.g.part[pi], b, row - p.first_row[pi], v);
          }
        }
      }
      if constexpr (kGated) {
        // Every consumer warp reaches this once a group; vals is double-buffered, so warp 0
        // reading this group's outputs never races the next group's writes.
        if (t.col == p.n_col_tiles - 1) {
          consumers_sync();
          if (warp == 0) gated_epilogue<B>(p, h.group, vals[parity]);
          parity ^= 1;
        }
      }
    }
  }
  // The last block out leaves the queue zero for the launch that next uses this slot.
  __syncthreads();
  if (threadIdx.x == 0 && atomicAdd(&p.queue[1], 1) == int(gridDim.x) - 1) {
    p.queue[0] = 0;
    p.queue[1] = 0;
  }
}

// ---- host side ----------------------------------------------------------------------------------
// Ring bytes per block: CERA_CUDA_GEMV_RING_KB (default 96: two blocks fit an SM). Rings sized to
// a block's share of the launch lost (8B Q4_0 501.6 -> 494.4 t/s, 1B 1,769 -> 1,610 with every
// launch streaming; docs/benchmarks/cuda.md v8).
inline uint32_t ring_budget() {
  static const uint32_t bytes = [] {
    const char* e = std::getenv("CERA_CUDA_GEMV_RING_KB");
    const int v = e != nullptr ? std::atoi(e) : 0;
    return uint32_t(v > 0 ? v : 96) * 1024;
  }();
  return bytes;
}

// Blocks a launch per SM: CERA_CUDA_GEMV_BLOCKS (default 2).
inline int blocks_per_sm() {
  static const int n = [] {
    const char* e = std::getenv("CERA_CUDA_GEMV_BLOCKS");
    const int v = e != nullptr ? std::atoi(e) : 0;
    return v > 0 ? v : 2;
  }();
  return n;
}

// Tile geometry and shared memory of a launch of n_in-element rows; false when the shape or type
// does not stream (the caller takes gemv_kernels.cuh).
struct StreamPlan {
  size_t smem = 0;
  unsigned grid = 0;
};
template <DType T, int B>
bool plan_stream(StreamParams& p, int64_t total_rows, int sm_count, StreamPlan& plan) {
  static_assert(sizeof(TileHeader) * kMaxStages + 2 * 8 * kMaxStages <= kHeaderBytes);
  const int64_t n_in = p.g.n_in;
  if (n_in % (is_plain<T>() ? 8 : 256) != 0) return false;
  const int units = int(n_in / unit_elems<T>());
  const int ub = unit_bytes<T>();
  const int ku_target = std::max(32, 16384 / (kConsumerWarps * ub));
  int nct = std::max(1, (units + ku_target / 2) / ku_target);
  int ku = (units + nct - 1) / nct;
  ku = (ku + 7) / 8 * 8;
  nct = (units + ku - 1) / ku;
  p.units = units;
  p.ku = ku;
  p.n_col_tiles = nct;
  p.stage_bytes = uint32_t(kConsumerWarps) * ku * ub;
  p.act_bytes = uint32_t(is_plain<T>() ? n_in * 4 : units * 40);
  if (p.act_bytes * B > 64 * 1024) return false;
  const int64_t groups = (total_rows + kConsumerWarps - 1) / kConsumerWarps;
  plan.grid = unsigned(std::clamp<int64_t>(groups, 1, int64_t(blocks_per_sm()) * sm_count));
  p.n_stages = int(std::clamp<uint32_t>(ring_budget() / p.stage_bytes, 2, kMaxStages));
  plan.smem = kHeaderBytes + size_t(B) * p.act_bytes + size_t(p.n_stages) * p.stage_bytes;
  return plan.smem + kStaticSmem <= kMaxSmem;
}

}  // namespace cera::ops::cuda::gemv_stream
