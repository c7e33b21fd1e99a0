// gemm_rows' kernel for Q4_0 weights at serving batches (gemm_rows.h: gemm_rows_direct_parts):
// out[t][o] = sum_k x[t][k] W[o][k] (+ bias[o]) with the weight as the A operand of mma.sync
// m16n8k16 (16 weight rows x 8 tokens), decoded from the registers its loads land in.
//
// The one decision: a weight byte goes from DRAM into a register and from there, decoded, into an
// A fragment; it never passes through shared memory, and no block barrier paces the weight
// stream. gemm_rows' f16 tiles (store, barrier, ldmatrix) cost ~255 instructions a thread per
// 32 weights a stage, issue-bound at 20 % of the DRAM bandwidth at 16 rows (ncu, 8B gate/up,
// docs/benchmarks/serving_batch_h200.md); here, counted from the code (not yet measured), a
// thread spends ~2.5 instructions a weight.
// It works because the k order of a dot product is free: each lane of a quad (lane % 4 = c)
// takes a whole Q4_0 block (block 4s + c of superstep s: 16 code bytes by one 16-byte load), and
// the fragment columns a lane owns are assigned to the block's elements in the order the nibble
// masks yield them (w & 0x000F000F gives elements 4q and 4q+2 of word q), so no byte permute is
// spent on the weights. The activations follow that order: the B fragment of lane (g, c) is
// token g's elements 4q, 4q+2 | 4q+1, 4q+3 of the same block, one 16-byte shared load per two
// words and two byte permutes. The activations of a chunk of k (32 KB) sit in shared memory,
// two chunks double-buffered by cp.async, one barrier a chunk.
// Status: measured on the H200 (docs/benchmarks/serving_batch_h200.md): at 2-16 tokens it takes
// 0.64-0.75x of gemm_rows' time on the 8B shapes (1.4 TB/s at 2 tokens, still under the GEMV's
// 2.2), equal at 64; decode at 16 rows +23 % for 8B. On by default up to 64 rows
// (CERA_CUDA_ROWS_DIRECT_MAX; 0 turns it off). CERA_CUDA_ROWS_DIRECT_RING=3/4/8 runs instead the
// ring variant (gemm_rows_direct_ring.cu: the weights through warp-private cp.async rings in shared
// memory, to keep more bytes in flight than registers allow); same fragments and k order.
// Shape of the work: a block is 4 warps x 32 weight rows (2 m16 tiles), for a token tile of 8,
// 16 or 32 tokens (1, 2 or 4 n8 tiles), over one split of k; k is split for weights with few
// rows as gemm_rows splits them, with the same deterministic fix-up (the last block of a tile
// adds the splits in order) in the same scratch (split_scratch).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <span>

#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gemm_rows.h"
#include "ops/cuda/gemm_rows_direct.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/mma.cuh"
#include "ops/cuda/weight_layout.h"

namespace cera::ops::cuda {
namespace {

using namespace mma;
using namespace direct;

constexpr int kChunkBytes = 32768;               // activations of one chunk of k (two in flight)
constexpr int kDepth = 2;  // supersteps of weights in flight in registers (3 spilled: ptxas -v)

// The four code words and the scale of one Q4_0 block of one weight row.
struct BlockRaw {
  uint4 q;
  __half d;
};

template <int kNN>
__global__ void __launch_bounds__(kThreads, 3) gemm_rows_direct_kernel(const __grid_constant__ DirectParams p) {
  constexpr int kTT = 8 * kNN;                  // tokens of a tile
  constexpr int kKC = kChunkBytes / (2 * kTT);  // k of a chunk: 2048, 1024, 512
  constexpr int kSC = kKC / kSuperK;            // supersteps a chunk
  constexpr int kPieces = kTT * kKC / 8;        // 16-byte pieces of a chunk
  static_assert(kPieces % kThreads == 0, "whole pieces a thread");
  extern __shared__ __align__(128) uint8_t smem[];
  uint4* xs = reinterpret_cast<uint4*>(smem);  // [2][kPieces] x_piece order
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;

  const BlockWork wk = block_work(p, kTT);
  const DirectPart& P = p.part[wk.pi];
  const int m0 = wk.m0, n0 = wk.n0, s0 = wk.s0, n_s = wk.n_s;

  // This lane's rows: tile mt's rows g and g + 8 (rows past n_out re-read the last row; their
  // products are never stored), block 4 s + c of each superstep s.
  const uint4* qrow[2][2];
  const __half* drow[2][2];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = min(n0 + kRowsWarp * warp + 16 * mt + g + 8 * h, P.n_out - 1);
      qrow[mt][h] = P.qs + row * p.n_blocks + c;
      drow[mt][h] = P.d + row * p.n_blocks + c;
    }
  }
  struct Raw {
    BlockRaw b[2][2];
  };
  auto load_raw = [&](int s) {  // superstep s0 + s; blocks past the row read as zeros
    Raw r;
    const int blk = 4 * (s0 + s);
    const bool in = blk + c < p.n_blocks;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        r.b[mt][h].q = in ? __ldg(qrow[mt][h] + blk) : make_uint4(0, 0, 0, 0);
        r.b[mt][h].d = in ? __ldg(drow[mt][h] + blk) : __ushort_as_half(0);
      }
    }
    return r;
  };
  // Chunk ci of this split into buffer ci & 1: tokens past n_tokens and k past n_in as zeros.
  auto load_chunk = [&](int ci) {
    uint4* dst = xs + (ci & 1) * kPieces;
    const int64_t k0 = int64_t(s0 + ci * kSC) * kSuperK;
#pragma unroll
    for (int i = 0; i < kPieces / kThreads; ++i) {
      const int id = tid + kThreads * i, t = id / (kKC / 8), r = id % (kKC / 8);
      const int64_t k = k0 + 8 * r;
      const bool in = m0 + t < p.n_tokens && k < p.n_in;
      const __half* src = in ? p.x + int64_t(m0 + t) * p.n_in + k : p.x;
      cp_async16_zfill(smem_addr(dst + x_piece<kKC>(t, r / 4, r % 4)), src, in ? 16 : 0);
    }
    cp_async_commit();
  };

  float acc[2][kNN][4];
  zero_acc<kNN>(acc);
  // Superstep ls of the chunk in buffer buf (superstep_mma).
  auto compute = [&](const Raw& r, const uint4* buf, int ls) {
    __half2 d[2][2];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) d[mt][h] = __half2half2(r.b[mt][h].d);
    }
    uint4 q[2][2];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) q[mt][h] = r.b[mt][h].q;
    }
    direct::superstep_mma<kNN, kKC>(q, d, buf, 4 * ls + c, g, acc);
  };

  Raw ring[kDepth];
#pragma unroll
  for (int i = 0; i < kDepth; ++i) ring[i] = i < n_s ? load_raw(i) : Raw{};
  pdl_entry();  // the weights are never written by kernels: their loads went out before
  load_chunk(0);
  // cur: ring[i % kDepth] (a static index: the loop is unrolled by kDepth).
  auto step = [&](int i, Raw& cur) {
    const int ls = i % kSC, ci = i / kSC;
    if (ls == 0) {
      cp_async_wait<0>();  // chunk ci has landed
      __syncthreads();     // ... for every thread, and every warp is done with chunk ci - 1
      if ((ci + 1) * kSC < n_s) load_chunk(ci + 1);  // into chunk ci - 1's buffer
    }
    compute(cur, xs + (ci & 1) * kPieces, ls);
    if (i + kDepth < n_s) cur = load_raw(i + kDepth);
  };
  for (int i0 = 0; i0 < n_s; i0 += kDepth) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      if (i0 + d < n_s) step(i0 + d, ring[d]);
    }
  }

  direct_epilogue<kNN>(p, wk, acc);
}

template <int kNN>
DirectKernel direct_kernel() {
  static const DirectKernel k = [] {  // the dynamic shared-memory limit, once per kernel
    const DirectKernel r{gemm_rows_direct_kernel<kNN>, 8 * kNN, size_t(2 * kChunkBytes), 3};
    CERA_CUDA_CHECK(cudaFuncSetAttribute(r.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(r.smem)));
    return r;
  }();
  return k;
}
// ring_fits: the ring kernel indexes a weight's blocks with 32-bit offsets.
DirectKernel direct_kernel_for(int64_t n_tokens, bool ring_fits) {
  if (const int ring = rows_direct_ring(); ring != 0 && ring_fits) return direct_ring_kernel_for(n_tokens, ring);
  if (n_tokens <= 8) return direct_kernel<1>();
  if (n_tokens <= 16) return direct_kernel<2>();
  return direct_kernel<4>();
}

}  // namespace

int64_t rows_direct_max() {
  static const int64_t v = env_int("CERA_CUDA_ROWS_DIRECT_MAX", 64, 0, kRowsMaxLimit);  // 64 measured: gemm_rows.h
  return v;
}

int rows_direct_ring() {
  static const int v = [] {
    const char* e = std::getenv("CERA_CUDA_ROWS_DIRECT_RING");
    if (e == nullptr || *e == '\0') return 4;  // measured best on the H200 (gemm_rows.h)
    const int n = std::atoi(e);
    return n == 0 || n == 3 || n == 8 ? n : 4;  // 1 (or any other value): RING=4
  }();
  return v;
}

bool gemm_rows_direct_takes(DType dtype, int64_t n_tokens) {
  return dtype == DType::kQ4_0 && !batch_invariant() && n_tokens <= rows_direct_max();
}

namespace direct {

DirectParams direct_params(std::span<const RowsTarget> parts, const SplitPlan& plan, const SplitScratch& scratch,
                           const void* xh, int64_t n_tokens, int64_t m_tiles) {
  const int64_t n_in = parts[0].weight.cols(), n_blocks = n_in / 32;
  DirectParams p{};
  p.n_parts = int(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    const RowsTarget& t = parts[i];
    const PartSplit& s = plan.part[i];
    DirectPart& P = p.part[i];
    P.n_out = s.n_out;
    P.n_tiles = s.n_tiles;
    P.n_splits = s.n_splits;
    P.first_block = s.first_block;
    const QWeight w = qweight_of(t.weight.dtype, t.weight.data, n_in, t.weight.rows(), 0);
    P.qs = reinterpret_cast<const uint4*>(w.r0);
    P.d = reinterpret_cast<const __half*>(w.r1);
    P.out = reinterpret_cast<float*>(t.out.data);
    P.out_stride = t.out.stride() / 4;
    P.bias = t.bias != nullptr ? reinterpret_cast<const float*>(t.bias->data) : nullptr;
    if (s.n_splits > 1) {
      P.arrivals = scratch.counters + s.counter_at;
      P.partial = scratch.partials + s.partial_at;
    }
  }
  p.x = static_cast<const __half*>(xh);
  p.n_in = n_in;
  p.n_tokens = int(n_tokens);
  p.n_blocks = int(n_blocks);
  p.n_super = int((n_blocks + 3) / 4);
  p.m_tiles = int(m_tiles);
  return p;
}

}  // namespace direct

void gemm_rows_direct_parts(CudaContext& ctx, const TensorView& x, std::span<const RowsTarget> parts) {
  CERA_CHECK_MSG(!parts.empty() && parts.size() <= size_t(kMaxGemvParts), "gemm_rows: 1 to 3 weights a launch");
  const TensorView& w0 = parts[0].weight;
  const int64_t n_in = w0.cols(), n_tokens = x.rows();
  CERA_CHECK_MSG(w0.dtype == DType::kQ4_0 && n_in % 32 == 0, "gemm_rows_direct: Q4_0 weights only");
  const int64_t n_blocks = n_in / 32;
  bool ring_fits = true;
  for (const RowsTarget& t : parts) ring_fits = ring_fits && t.weight.rows() * n_blocks + 8 < (int64_t{1} << 31);
  const DirectKernel k = direct_kernel_for(n_tokens, ring_fits);
  const int64_t m_tiles = (n_tokens + k.tokens - 1) / k.tokens;
  const int64_t n_super = (n_blocks + 3) / 4;
  // One wave of the kernel's resident blocks (the register kernel: three an SM, 64 KB of
  // activations each; the ring kernels: gemm_rows_direct_ring.cu).
  const SplitPlan plan = plan_splits(parts, {.tile_rows = kRowsBlock, .m_tiles = m_tiles, .k_steps = n_super,
                                             .tile_floats = int64_t(kRowsBlock) * k.tokens,
                                             .slots = k.blocks_sm * int64_t(ctx.sm_count())});
  const void* xh = gemm_activations(ctx, x, false);
  const SplitScratch scratch = split_scratch(ctx, plan.counters, plan.partial_floats, parts.size());
  if (!ctx.launching()) return;
  const DirectParams p = direct_params(parts, plan, scratch, xh, n_tokens, m_tiles);
  launch(ctx.stream(), k.kernel, unsigned(plan.blocks), kThreads, k.smem, p);
  CERA_CUDA_LAUNCHED();
}

}  // namespace cera::ops::cuda
