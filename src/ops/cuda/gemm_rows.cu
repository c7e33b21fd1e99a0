// The tensor-core GEMM of serving batches (gemm_rows.h): out[t][o] = sum_k x[t][k] W[o][k]
// (+ bias[o]) for 2..256 rows, with the weight decoded inside the kernel by gemm_q's decoders
// (GemmChunk<T>, gemm_q.cuh: every block format and F16/BF16 straight to f16 pairs).
//
// Shape of the work: a block takes kBM = 16 kMT rows (tokens) x kBN weight rows and walks k in
// stages of kBK; its 8 warps split the stage as kWN along the weight rows (32 each) by kWK along
// k (32 each: one 32-weight chunk; kWK = 4, kBN = 64, kBK = 128 as used), so that each of the 256
// threads decodes exactly one chunk a stage, and each warp multiplies its 32 rows x 32 k for all
// kBM tokens with mma.sync m16n8k16 (f16 or bf16 operands, f32 accumulation). The kWK partial
// sums are added through shared memory at the end, in a fixed order. One launch may take up to
// three weights of one type and width on the same x (RowsPart: Q/K/V, gate/up).
// Where it stands (H200, docs/benchmarks/serving_batch_h200.md): 8B Q4_0 gate/up at 16 rows,
// 68 us for 66 MB (ncu: DRAM at 20 % of its peak, ~1 us a stage of 128 k); the batch's step is
// 2.1x the GEMV's speed at 16 rows, but far from the weights' ceiling. The bound is per stage,
// not the DRAM latency (contiguous L2 prefetches ahead did not help): the next step is a
// producer warp filling a deeper ring of raw stages by cp.async/TMA while the others decode and
// multiply, without a block-wide barrier each stage.
// Decisions:
// - The weight streams from DRAM once per step: at <= 64 tokens one block row covers every token,
//   so each weight byte is loaded and decoded once (above, once per 64 tokens, the repeats from
//   L2). Raw bytes of the next stages are in flight in registers (issued before the PDL wait
//   for the first stages: weights are never written by kernels), the next stage is decoded into
//   shared memory while the tensor cores work on this one, and the activations come by
//   cp.async, three stages ahead.
//   gemm_q's 128 x 128 tiles, one stage ahead, made 64 rows of the 8B gate matrix 45 us
//   (733 GB/s, 32 blocks for 4096 rows); the GEMV took 97 us for 16 rows.
// - Few weight rows (4096 and less) leave SMs idle, so k is split until there are two blocks an
//   SM: each split writes its partial tile to scratch and the last block of a tile to arrive
//   (a counter, left at zero again) adds the splits in split order, so results do not depend on
//   which block finishes first (the same bits on every run, and in every batch: config_of).
// - f16 operands with float accumulation, not int8 on 8-bit activations: one kernel for every
//   weight type through the prefill GEMM's decoders, with the prefill path's accuracy (the
//   matmul test's 1e-2 of sum |w x|). The activations are converted once per input and shared
//   by Q/K/V and gate/up (gemm_activations, the activation cache).
#include <algorithm>
#include <cstdlib>
#include <span>

#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gemm_q.cuh"
#include "ops/cuda/gemm_q.h"
#include "ops/cuda/gemm_rows.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/mma.cuh"

namespace cera::ops::cuda {
namespace {

using namespace qgemm;
using namespace mma;

constexpr int kThreads = 256;  // 8 warps
constexpr int kMaxSplits = 16;

// One weight of a launch (Q/K/V, gate/up: weights of one type and width on the same x).
struct RowsPart {
  QWeight w;
  float* out;  // [n_tokens rows of n_out], out_stride floats apart
  int64_t out_stride;
  const float* bias;  // [n_out] or nullptr
  int* arrivals;      // [tiles] blocks of a tile done (zero between launches); n_splits > 1 only
  float* partial;     // [n_splits][tiles][kBM * kBN] partial tiles in accumulator order
  int n_out, n_tiles, n_splits, first_block;  // blocks: m_tiles x n_tiles x n_splits, from first_block
  bool out_pairs;  // float2 stores allowed (even stride, 8-byte aligned base)
};

struct RowsParams {
  RowsPart part[kMaxGemvParts];
  int n_parts;
  const __half* x;  // [n_tokens][n_in] f16 (bf16 bits for BF16 weights), packed
  int64_t n_in;
  int n_tokens, n_ktiles, m_tiles;
  int window;  // stages the L2 prefetches run ahead (prefetch_window(); 0: none)
};

// Asks L2 for the whole 16-byte units of [p, p + bytes) in one instruction. Regions start
// 256-byte aligned (weight_layout.cu), so the rounded-down start stays inside the weight; the
// rounded-off tail is left to the loads.
__device__ __forceinline__ void bulk_prefetch_l2(const uint8_t* p, int64_t bytes) {
  const uint64_t a = reinterpret_cast<uint64_t>(p), lo = a & ~uint64_t{15}, hi = (a + uint64_t(bytes)) & ~uint64_t{15};
  if (bytes <= 0 || hi <= lo) return;
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(lo), "r"(uint32_t(hi - lo)) : "memory");
}

// The bytes that GemmChunk<T>::load reads for chunks j0 .. j1-1 of `row` (gemm_q.cuh: codes and
// scales), one contiguous range a region.
template <DType T>
__device__ __forceinline__ void prefetch_chunks(const QWeight& w, int64_t row, int64_t j0, int64_t j1, int64_t n_in) {
  if (j1 <= j0) return;
  if constexpr (T == DType::kF16 || T == DType::kBF16) {
    const int64_t end = min(j1 * 64, n_in * 2);
    bulk_prefetch_l2(w.r0 + row * w.row_stride + j0 * 64, end - j0 * 64);
  } else if constexpr (T == DType::kQ4_K || T == DType::kQ5_K || T == DType::kQ6_K) {
    constexpr int kBlock = T == DType::kQ4_K ? 144 : (T == DType::kQ5_K ? 176 : 208);
    const int64_t b0 = row * w.blocks_per_row + j0 / 8, b1 = row * w.blocks_per_row + (j1 - 1) / 8 + 1;
    bulk_prefetch_l2(w.r0 + b0 * kBlock, (b1 - b0) * kBlock);
    if constexpr (T == DType::kQ6_K) bulk_prefetch_l2(w.r1 + b0 * 2, (b1 - b0) * 2);
  } else {
    // The 32-element formats: codes in region 0, then d (and m, qh) in regions 1 and 2.
    constexpr int kCode = T == DType::kQ8_0 ? 32 : 16;
    constexpr int kR1 = T == DType::kQ4_0 || T == DType::kQ8_0 ? 2 : 4;
    const int64_t b0 = row * w.blocks_per_row + j0, n = j1 - j0;
    bulk_prefetch_l2(w.r0 + b0 * kCode, n * kCode);
    bulk_prefetch_l2(w.r1 + b0 * kR1, n * kR1);
    if constexpr (T == DType::kQ5_0) bulk_prefetch_l2(w.r2 + b0 * 2, n * 2);
    if constexpr (T == DType::kQ5_1) bulk_prefetch_l2(w.r2 + b0 * 4, n * 4);
  }
}

// Half offset of 16-byte column c of row r in a [rows][kBK] tile: the XOR on the low three bits
// of c puts the 8 rows of one ldmatrix phase on distinct bank groups.
template <int kBK>
__device__ __forceinline__ int swz(int r, int c) {
  return r * kBK + ((c ^ (r & 7)) << 3);
}

template <int kMT, int kWK>
struct Tiles {
  static constexpr int kWN = 8 / kWK, kBN = 32 * kWN, kBK = 32 * kWK, kBM = 16 * kMT;
  static constexpr int kXHalves = kBM * kBK, kWHalves = kBN * kBK;
  static constexpr int kXStages = 4;  // activation stages: their loads go out 3 stages ahead
  static constexpr int kStageBytes = 2 * (kXStages * kXHalves + 2 * kWHalves);  // and two of w
  static constexpr int kAcc = 16 * kMT;                              // accumulators a thread
  static constexpr int kReduceBytes = kWN * (kWK - 1) * kAcc * 32 * 4;
  static constexpr int kSmemBytes = kStageBytes > kReduceBytes ? kStageBytes : kReduceBytes;
  static_assert(kXHalves / 8 % kThreads == 0, "whole 16-byte activation pieces a thread");
};

template <DType T, int kMT, int kWK>
__global__ void __launch_bounds__(kThreads, 2) gemm_rows_kernel(const __grid_constant__ RowsParams p) {
  using Tl = Tiles<kMT, kWK>;
  constexpr int kBN = Tl::kBN, kBK = Tl::kBK, kBM = Tl::kBM, kAcc = Tl::kAcc;
  using Chunk = GemmChunk<T>;
  using Raw = typename Chunk::Raw;
  extern __shared__ __align__(128) uint8_t smem[];
  __half* xs = reinterpret_cast<__half*>(smem);  // [kXStages][kBM][kBK] swizzled
  __half* ws = xs + Tl::kXStages * Tl::kXHalves;  // [2][kBN][kBK] swizzled
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wn = warp / kWK, wk = warp % kWK;
  // This block's part, then its token tile, weight tile and split (the token tiles of a weight
  // tile adjacent, so that they read its bytes from L2 after the first).
  int pi = 0;
#pragma unroll
  for (int i = 1; i < kMaxGemvParts; ++i) pi += i < p.n_parts && int(blockIdx.x) >= p.part[i].first_block;
  const RowsPart& P = p.part[pi];
  const int local = int(blockIdx.x) - P.first_block;
  const int m_tile = local % p.m_tiles, n_tile = local / p.m_tiles % P.n_tiles, split = local / p.m_tiles / P.n_tiles;
  const int m0 = m_tile * kBM, n0 = n_tile * kBN;
  const int kt0 = int(int64_t(p.n_ktiles) * split / P.n_splits);
  const int n_kt = int(int64_t(p.n_ktiles) * (split + 1) / P.n_splits) - kt0;

  // This thread's chunk of every stage: weight row w_row, chunk w_col of the stage (rows past
  // n_out re-read the last row; their products are never stored).
  const int w_row = tid / kWK, w_col = tid % kWK;
  const int64_t w_grow = min(n0 + w_row, P.n_out - 1);
  const int64_t n_chunks = (p.n_in + 31) / 32;
  auto load_w = [&](int kt) -> Raw {
    const int64_t j = int64_t(kt0 + kt) * kWK + w_col;
    if (j < n_chunks) return Chunk::load(P.w, w_grow, j, p.n_in);
    return Raw{};  // all-zero bytes decode to zeros in every format
  };
  auto store_w = [&](const Raw& raw, __half* wt) {
    uint32_t v[16];
    Chunk::decode(raw, v);
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      *reinterpret_cast<uint4*>(wt + swz<kBK>(w_row, 4 * w_col + g)) =
          make_uint4(v[4 * g], v[4 * g + 1], v[4 * g + 2], v[4 * g + 3]);
    }
  };
  // Optional L2 prefetches (prefetch_window(), off by default), one thread a weight row, each a
  // contiguous range of the row: the first `window` stages before the PDL wait, then window / 2
  // stages at a time, window ahead. Tried because every stage takes ~1 us and the kernel reads
  // DRAM at 20 % of its peak (ncu, 8B gate/up at 16 rows: 68 us for 66 MB, with a 16-byte
  // prefetch per chunk 8 stages ahead); the contiguous ranges did not help (measured, see
  // prefetch_window), so the bound is not the DRAM latency of the loads.
  const int window = p.window, half_window = max(window / 2, 1);
  auto prefetch = [&](int s0, int s1) {
    if (window == 0 || tid >= kBN || n0 + tid >= P.n_out) return;
    const int64_t j0 = int64_t(kt0 + s0) * kWK, j1 = min(int64_t(kt0 + min(s1, n_kt)) * kWK, n_chunks);
    prefetch_chunks<T>(P.w, n0 + tid, j0, j1, p.n_in);
  };
  // Tokens past n_tokens and k past n_in (n_in % 8 == 0) land as zeros.
  auto load_x = [&](int kt, __half* xt) {
#pragma unroll
    for (int i = 0; i < Tl::kXHalves / 8 / kThreads; ++i) {
      const int id = tid + kThreads * i, r = id / (kBK / 8), c = id % (kBK / 8);
      const int64_t k = int64_t(kt0 + kt) * kBK + 8 * c;
      const bool in = m0 + r < p.n_tokens && k < p.n_in;
      const __half* src = in ? p.x + int64_t(m0 + r) * p.n_in + k : p.x;
      cp_async16_zfill(smem_addr(xt + swz<kBK>(r, c)), src, in ? 16 : 0);
    }
  };

  constexpr bool kBf16 = T == DType::kBF16;
  float acc[kMT][4][4];
#pragma unroll
  for (int mi = 0; mi < kMT; ++mi) {
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0f;
    }
  }
  // The warp's 32 weight rows x its 32 k of the stage (two k16 steps), for every token tile.
  auto compute = [&](const __half* xt, const __half* wt) {
    const uint32_t xb = smem_addr(xt), wb = smem_addr(wt);
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      const int ks = 2 * wk + kk;
      uint32_t b[4][2];
#pragma unroll
      for (int nj = 0; nj < 2; ++nj) {
        // Matrices: rows 0-7 k 0-7, rows 0-7 k 8-15, rows 8-15 k 0-7, rows 8-15 k 8-15.
        const int r = 32 * wn + 16 * nj + (lane & 7) + ((lane >> 4) << 3), c = 2 * ks + ((lane >> 3) & 1);
        uint32_t t[4];
        ldsm_x4(wb + 2 * swz<kBK>(r, c), t);
        b[2 * nj][0] = t[0];
        b[2 * nj][1] = t[1];
        b[2 * nj + 1][0] = t[2];
        b[2 * nj + 1][1] = t[3];
      }
#pragma unroll
      for (int mi = 0; mi < kMT; ++mi) {
        // Matrices: tokens 0-7 k 0-7, 8-15 k 0-7, 0-7 k 8-15, 8-15 k 8-15 (the a0..a3 order).
        const int r = 16 * mi + (lane & 15), c = 2 * ks + (lane >> 4);
        uint32_t a[4];
        ldsm_x4(xb + 2 * swz<kBK>(r, c), a);
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) mma16816<kBf16>(acc[mi][ni], a, b[ni][0], b[ni][1]);
      }
    }
  };

  // Pipeline: while stage kt multiplies, stage kt+1 is decoded into the other weight buffer and
  // the raw bytes of the kDepth stages after it are in flight in registers, as are the
  // activations of stages kt+1 .. kt+3. kDepth 4 for the small chunks (Q4_0 .. Q5_1: 20-24 bytes),
  // 2 for the large ones, and less at 64 tokens, where the accumulators take 64 registers (ptxas
  // -v: no spills). Measured (8B gate at 16 rows, eager profile): activations one stage ahead and
  // raw chunks two, 44.7 us; activations three ahead, 41.8 us.
  constexpr int kDepth = kMT == 4 ? (sizeof(Raw) > 32 ? 1 : 2) : (sizeof(Raw) > 32 ? 2 : 4);
  constexpr int kXS = Tl::kXStages;
  auto x_stage = [&](int kt) { return xs + (kt % kXS) * Tl::kXHalves; };
  Raw ring[kDepth];  // ring[s % kDepth]: the raw bytes of stage s
#pragma unroll
  for (int d = 0; d < kDepth; ++d) ring[d] = d < n_kt ? load_w(d) : Raw{};
  prefetch(kDepth, window);
  pdl_entry();
#pragma unroll
  for (int kt = 0; kt < kXS - 1; ++kt) {
    if (kt < n_kt) load_x(kt, x_stage(kt));
    cp_async_commit();  // one group a stage, empty past n_kt, so that the waits count stages
  }
  store_w(ring[0], ws);
  if (n_kt > kDepth) ring[0] = load_w(kDepth);
  cp_async_wait<kXS - 2>();  // stage 0's activations
  __syncthreads();
  // next: ring[(kt + 1) % kDepth], the raw bytes of stage kt + 1 (a static index: the caller's
  // loop is unrolled by kDepth).
  auto step = [&](int kt, Raw& next) {
    const int s = kt & 1;
    if (kt % half_window == 0) prefetch(kt + window, kt + window + half_window);
    // Into the buffer of stage kt - 1, which every warp is past (the barrier ending the last step).
    if (kt + kXS - 1 < n_kt) load_x(kt + kXS - 1, x_stage(kt + kXS - 1));
    cp_async_commit();
    compute(x_stage(kt), ws + s * Tl::kWHalves);
    if (kt + 1 < n_kt) {
      store_w(next, ws + (s ^ 1) * Tl::kWHalves);
      if (kt + 1 + kDepth < n_kt) next = load_w(kt + 1 + kDepth);
    }
    cp_async_wait<kXS - 2>();  // stage kt + 1's activations
    __syncthreads();
  };
  for (int k0 = 0; k0 < n_kt; k0 += kDepth) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      if (k0 + d < n_kt) step(k0 + d, ring[(d + 1) % kDepth]);
    }
  }
  cp_async_wait<0>();  // (only empty groups are left)

  // The kWK k-slices of each warp column summed into the wk == 0 warp (slices in order), through
  // the stage buffers (free: the loop ended on a barrier with no copy in flight). Layout
  // [slice][accumulator][lane]: each store and load instruction of a warp is 128 contiguous bytes.
  float* flat = &acc[0][0][0];
  if constexpr (kWK > 1) {
    float* red = reinterpret_cast<float*>(smem);
    if (wk > 0) {
      float* dst = red + (wn * (kWK - 1) + wk - 1) * kAcc * 32;
#pragma unroll
      for (int i = 0; i < kAcc; ++i) dst[i * 32 + lane] = flat[i];
    }
    __syncthreads();
    if (wk == 0) {
#pragma unroll
      for (int j = 0; j < kWK - 1; ++j) {
        const float* src = red + (wn * (kWK - 1) + j) * kAcc * 32;
#pragma unroll
        for (int i = 0; i < kAcc; ++i) flat[i] += src[i * 32 + lane];
      }
    }
  }

  if (P.n_splits > 1) {
    // Split k: this block's tile to scratch; the last of the tile's blocks adds them up.
    __shared__ int last;
    const int tile = n_tile * p.m_tiles + m_tile, tiles = P.n_tiles * p.m_tiles;
    const int64_t tile_floats = int64_t(kBM) * kBN;
    if (wk == 0) {
      float* dst = P.partial + (int64_t(split) * tiles + tile) * tile_floats + wn * kAcc * 32;
#pragma unroll
      for (int i = 0; i < kAcc; ++i) dst[i * 32 + lane] = flat[i];
    }
    __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(&P.arrivals[tile], 1) == P.n_splits - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    if (wk != 0) return;
#pragma unroll
    for (int i = 0; i < kAcc; ++i) flat[i] = 0.0f;
    for (int z = 0; z < P.n_splits; ++z) {
      const float* src = P.partial + (int64_t(z) * tiles + tile) * tile_floats + wn * kAcc * 32;
#pragma unroll
      for (int i = 0; i < kAcc; ++i) flat[i] += __ldcg(src + i * 32 + lane);
    }
    if (lane == 0) P.arrivals[tile] = 0;  // for the next launch (which waits for this grid)
  } else if (wk != 0) {
    return;
  }

  // Accumulator (mi, ni): e 0, 1 at token lane / 4, rows 2 (lane % 4) + {0, 1}; e 2, 3 8 tokens on.
#pragma unroll
  for (int ni = 0; ni < 4; ++ni) {
    const int o = n0 + 32 * wn + 8 * ni + 2 * (lane & 3);
    if (o >= P.n_out) continue;
    const bool both = o + 1 < P.n_out;
    float2 bias = make_float2(0.0f, 0.0f);
    if (P.bias != nullptr) {
      bias.x = P.bias[o];
      if (both) bias.y = P.bias[o + 1];
    }
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int t = m0 + 16 * mi + (lane >> 2) + 8 * h;
        if (t >= p.n_tokens) continue;
        const float v0 = acc[mi][ni][2 * h] + bias.x, v1 = acc[mi][ni][2 * h + 1] + bias.y;
        float* dst = P.out + int64_t(t) * P.out_stride + o;
        if (both && P.out_pairs) {
          *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);
        } else {
          dst[0] = v0;
          if (both) dst[1] = v1;
        }
      }
    }
  }
}

// The tile shape by batch: 16, 32 or 64 tokens (up to 16, 32, above) x 64 weight rows x k 128 a
// stage. Decision: the k order of a row's sum (4 chunk warps a stage, then the warps in order,
// then the splits in order) and the number of splits depend on the weight's shape alone, never
// on the batch, so each row's result is the same bits in any batch: gemm_rows is batch
// invariant (CERA_CUDA_BATCH_INVARIANT routes every matmul through it, cuda_ops.h).
struct Config {
  int mt, wk;
};
Config config_of(int64_t n_tokens) {
  if (n_tokens <= 16) return {1, 4};
  if (n_tokens <= 32) return {2, 4};
  return {4, 4};
}

using RowsKernel = void (*)(RowsParams);
struct KernelInfo {
  RowsKernel kernel;
  int bm, bn, bk, smem;
};

template <int kMT, int kWK>
KernelInfo info_of(DType t) {
  KernelInfo k{nullptr, 16 * kMT, 32 * (8 / kWK), 32 * kWK, 0};
  switch (t) {
    case DType::kF16: k.kernel = gemm_rows_kernel<DType::kF16, kMT, kWK>; break;
    case DType::kBF16: k.kernel = gemm_rows_kernel<DType::kBF16, kMT, kWK>; break;
    case DType::kQ4_0: k.kernel = gemm_rows_kernel<DType::kQ4_0, kMT, kWK>; break;
    case DType::kQ4_1: k.kernel = gemm_rows_kernel<DType::kQ4_1, kMT, kWK>; break;
    case DType::kQ5_0: k.kernel = gemm_rows_kernel<DType::kQ5_0, kMT, kWK>; break;
    case DType::kQ5_1: k.kernel = gemm_rows_kernel<DType::kQ5_1, kMT, kWK>; break;
    case DType::kQ8_0: k.kernel = gemm_rows_kernel<DType::kQ8_0, kMT, kWK>; break;
    case DType::kQ4_K: k.kernel = gemm_rows_kernel<DType::kQ4_K, kMT, kWK>; break;
    case DType::kQ5_K: k.kernel = gemm_rows_kernel<DType::kQ5_K, kMT, kWK>; break;
    case DType::kQ6_K: k.kernel = gemm_rows_kernel<DType::kQ6_K, kMT, kWK>; break;
    default: return k;
  }
  k.smem = Tiles<kMT, kWK>::kSmemBytes;
  // The dynamic shared-memory limit, raised once per kernel (one device per process).
  static bool raised[32] = {};
  if (!raised[size_t(t) % 32]) {
    CERA_CUDA_CHECK(cudaFuncSetAttribute(k.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, k.smem));
    raised[size_t(t) % 32] = true;
  }
  return k;
}

KernelInfo kernel_info(DType t, Config c) {
  if (c.mt == 1) return info_of<1, 4>(t);
  if (c.mt == 2) return info_of<2, 4>(t);
  return info_of<4, 4>(t);
}

// CERA_CUDA_ROWS_PREFETCH: how many stages ahead the L2 prefetches run, at most 64; default 0
// (none). Measured on the H200 in one call (8B Q4_0, 16 rows, decode step): 6.10 ms with 16,
// 5.87 with 32, 5.69 with none (docs/benchmarks/serving_batch_h200.md).
int prefetch_window() {
  static const int v = int(env_int("CERA_CUDA_ROWS_PREFETCH", 0, 0, 64));
  return v;
}

}  // namespace

int64_t env_int(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == '\0') return fallback;
  const long long v = std::atoll(e);
  return v < lo ? lo : (v > hi ? hi : v);
}

int64_t rows_min() {
  static const int64_t v = env_int("CERA_CUDA_ROWS_MIN", 5, 1, kRowsMaxLimit + 1);  // 257: never
  return v;
}
int64_t rows_max() {
  static const int64_t v = env_int("CERA_CUDA_ROWS_MAX", 128, 1, kRowsMaxLimit);
  return v;
}

bool gemm_rows_supports(const TensorView& weight) { return gemm_q_supports(weight); }

MatmulPath matmul_path(const TensorView& weight, int64_t n_tokens) {
  if (gemm_rows_supports(weight)) {
    // Batch invariant: every batch of at most 256 rows (larger ones in chunks of 256, matmul.cu).
    if (batch_invariant()) return n_tokens <= kRowsMaxLimit ? MatmulPath::kRows : MatmulPath::kPrefill;
    if (n_tokens >= rows_min() && n_tokens <= rows_max()) return MatmulPath::kRows;
  }
  return n_tokens <= kGemvMaxTokens ? MatmulPath::kGemv : MatmulPath::kPrefill;
}

SplitScratch split_scratch(CudaContext& ctx, int64_t counters, int64_t partial_floats, size_t n_parts) {
  // A weight splits only at `slots` / 2 tiles or fewer (slots: at most four blocks an SM, the
  // ring kernel of gemm_rows_direct at RING=3), so at most 3 SMs' worth of counters a token tile
  // (of 8 tokens at least) and part.
  const uint64_t counter_bytes = uint64_t(kMaxGemvParts) * uint64_t(3 * ctx.sm_count()) * (kRowsMaxLimit / 8) * 4;
  CERA_CHECK(uint64_t(counters) * 4 <= counter_bytes);
  if (counters == 0) return {};
  const uint64_t partial_bytes = uint64_t(partial_floats) * 4 * (n_parts == 1 ? kMaxGemvParts : 1);
  auto* base = static_cast<std::byte*>(ctx.zeroed_scratch(ScratchKind::kGemmSplit, counter_bytes + partial_bytes));
  return {reinterpret_cast<int*>(base), reinterpret_cast<float*>(base + counter_bytes)};
}

SplitPlan plan_splits(std::span<const RowsTarget> parts, const SplitShape& shape) {
  const TensorView& w0 = parts[0].weight;
  SplitPlan plan;
  for (size_t i = 0; i < parts.size(); ++i) {
    const TensorView& w = parts[i].weight;
    CERA_CHECK_MSG(w.dtype == w0.dtype && w.cols() == w0.cols(), "gemm_rows: the weights of a launch differ in type or width");
    const int64_t n_out = w.rows(), n_tiles = (n_out + shape.tile_rows - 1) / shape.tile_rows;
    CERA_CHECK_MSG(n_out < (int64_t{1} << 31) && n_tiles * shape.m_tiles < (int64_t{1} << 24),
                   "gemm_rows: weight too large for one launch");
    const int64_t splits = std::max<int64_t>(1, std::min({shape.slots / n_tiles, shape.k_steps / 2, int64_t(kMaxSplits)}));
    PartSplit& s = plan.part[i];
    s.n_out = int(n_out);
    s.n_tiles = int(n_tiles);
    s.n_splits = int(splits);
    s.first_block = int(plan.blocks);
    plan.blocks += shape.m_tiles * n_tiles * splits;
    if (splits > 1) {
      s.counter_at = plan.counters;
      s.partial_at = plan.partial_floats;
      plan.counters += shape.m_tiles * n_tiles;
      plan.partial_floats += splits * shape.m_tiles * n_tiles * shape.tile_floats;
    }
  }
  CERA_CHECK_MSG(plan.blocks < (int64_t{1} << 31), "gemm_rows: too many blocks for one launch");
  return plan;
}

void gemm_rows_parts(CudaContext& ctx, const TensorView& x, std::span<const RowsTarget> parts) {
  CERA_CHECK_MSG(!parts.empty() && parts.size() <= size_t(kMaxGemvParts), "gemm_rows: 1 to 3 weights a launch");
  const TensorView& w0 = parts[0].weight;
  const int64_t n_in = w0.cols(), n_tokens = x.rows();
  if (gemm_rows_stream_takes(w0, n_tokens)) return gemm_rows_stream_parts(ctx, x, parts);
  if (gemm_rows_direct_takes(w0.dtype, n_tokens)) return gemm_rows_direct_parts(ctx, x, parts);
  CERA_CHECK_MSG(n_tokens <= kRowsMaxLimit, "gemm_rows: more than 256 rows");
  CERA_CHECK_MSG(n_in % 8 == 0, "gemm_rows: the weight's rows are not a multiple of 8 elements");
  const KernelInfo k = kernel_info(w0.dtype, config_of(n_tokens));
  CERA_CHECK_MSG(k.kernel != nullptr, "gemm_rows: no kernel for weight type " + std::string(dtype_name(w0.dtype)));
  const int64_t m_tiles = (n_tokens + k.bm - 1) / k.bm, n_ktiles = (n_in + k.bk - 1) / k.bk;
  // Two blocks an SM (the launch bounds'): rounding the splits up left a second wave of a few
  // blocks (320 blocks on 264 slots for 4096 rows).
  const SplitPlan plan = plan_splits(parts, {.tile_rows = k.bn, .m_tiles = m_tiles, .k_steps = n_ktiles,
                                             .tile_floats = int64_t(k.bm) * k.bn, .slots = 2 * int64_t(ctx.sm_count())});
  const bool bf16 = w0.dtype == DType::kBF16;
  const void* xh = gemm_activations(ctx, x, bf16);
  const SplitScratch scratch = split_scratch(ctx, plan.counters, plan.partial_floats, parts.size());
  if (!ctx.launching()) return;
  const bool plain = dtype_block_size(w0.dtype) == 1;
  RowsParams p{};
  p.n_parts = int(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    const RowsTarget& t = parts[i];
    const PartSplit& s = plan.part[i];
    RowsPart& P = p.part[i];
    P.n_out = s.n_out;
    P.n_tiles = s.n_tiles;
    P.n_splits = s.n_splits;
    P.first_block = s.first_block;
    P.w = qweight_of(t.weight.dtype, t.weight.data, n_in, t.weight.rows(), plain ? t.weight.stride() : 0);
    P.out = reinterpret_cast<float*>(t.out.data);
    P.out_stride = t.out.stride() / 4;
    P.bias = t.bias != nullptr ? reinterpret_cast<const float*>(t.bias->data) : nullptr;
    P.out_pairs = P.out_stride % 2 == 0 && reinterpret_cast<uintptr_t>(t.out.data) % 8 == 0;
    if (s.n_splits > 1) {
      P.arrivals = scratch.counters + s.counter_at;
      P.partial = scratch.partials + s.partial_at;
    }
  }
  p.x = static_cast<const __half*>(xh);
  p.n_in = n_in;
  p.n_tokens = int(n_tokens);
  p.n_ktiles = int(n_ktiles);
  p.m_tiles = int(m_tiles);
  p.window = prefetch_window();
  launch(ctx.stream(), k.kernel, unsigned(plan.blocks), kThreads, size_t(k.smem), p);
  CERA_CUDA_LAUNCHED();
}

void gemm_rows(CudaContext& ctx, const TensorView& out, const TensorView& weight, const TensorView& x,
               const TensorView* bias) {
  const RowsTarget part{out, weight, bias};
  gemm_rows_parts(ctx, x, std::span(&part, 1));
}

}  // namespace cera::ops::cuda
