// What the Q4_0 serving kernels share (gemm_rows_direct.cu, gemm_rows_direct_ring.cu and
// gemm_rows_stream.cu): the launch parameters, the block shape, the work decomposition, the
// decode of a Q4_0 code pair, the activations' shared-memory order and the epilogue (split-k
// fix-up and stores), so that they sum in the same order and store the same bits for the same
// split plan.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include <span>

#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gemm_rows.h"
#include "ops/cuda/mma.cuh"

namespace cera::ops::cuda::direct {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRowsWarp = 32;                    // two m16 tiles
constexpr int kRowsBlock = kWarps * kRowsWarp;  // 128 weight rows a block
constexpr int kSuperK = 128;                     // k of a superstep: 4 Q4_0 blocks, one a lane of a quad

struct DirectPart {
  const uint4* qs;    // [n_out][n_blocks] 16 code bytes a block (weight_layout.h region 0)
  const __half* d;    // [n_out][n_blocks] scales (region 1)
  float* out;         // [n_tokens rows of n_out], out_stride floats apart
  int64_t out_stride;
  const float* bias;  // [n_out] or nullptr
  int* arrivals;      // [tiles] blocks of a tile done (zero between launches); n_splits > 1 only
  float* partial;     // [n_splits][tiles][kRowsBlock x token tile] in accumulator order
  int n_out, n_tiles, n_splits, first_block;
};

struct DirectParams {
  DirectPart part[kMaxGemvParts];
  int n_parts;
  const __half* x;  // [n_tokens][n_in] f16, packed
  int64_t n_in;
  int n_tokens, n_blocks, n_super, m_tiles;  // n_blocks: Q4_0 blocks a row; n_super: supersteps a row
};

// A launch's parameters from its split plan (parts' outputs, weights' regions, scratch) and the
// activations xh (f16, [n_tokens][n_in]): gemm_rows_direct.cu.
DirectParams direct_params(std::span<const RowsTarget> parts, const SplitPlan& plan, const SplitScratch& scratch,
                           const void* xh, int64_t n_tokens, int64_t m_tiles);

// A kernel of either kind as the launcher sees it.
struct DirectKernel {
  void (*kernel)(DirectParams);
  int tokens;        // a tile
  size_t smem;       // dynamic shared memory a block
  int blocks_sm;     // resident blocks an SM (the split plan's wave)
};

// The ring kernel for n_tokens at ring configuration `ring` (rows_direct_ring(): 3, 4 or 8),
// its shared-memory limit raised and its occupancy read once (gemm_rows_direct_ring.cu).
DirectKernel direct_ring_kernel_for(int64_t n_tokens, int ring);

// Where work item `index` lies (a block of the direct kernels; a queue item of the stream
// kernel, gemm_rows_stream.cu): its part, weight-row tile, token tile and range of k steps
// (`steps` a row: supersteps, or the stream kernel's stages), the parts' items one after another
// from first_block, token tiles innermost.
struct BlockWork {
  int pi, m_tile, n_tile, split, m0, n0, s0, n_s;
};
__device__ __forceinline__ BlockWork work_of(const DirectParams& p, int token_tile, int index, int steps) {
  BlockWork w;
  w.pi = 0;
#pragma unroll
  for (int i = 1; i < kMaxGemvParts; ++i) w.pi += i < p.n_parts && index >= p.part[i].first_block;
  const DirectPart& P = p.part[w.pi];
  const int local = index - P.first_block;
  w.m_tile = local % p.m_tiles;
  w.n_tile = local / p.m_tiles % P.n_tiles;
  w.split = local / p.m_tiles / P.n_tiles;
  w.m0 = w.m_tile * token_tile;
  w.n0 = w.n_tile * kRowsBlock;
  w.s0 = int(int64_t(steps) * w.split / P.n_splits);
  w.n_s = int(int64_t(steps) * (w.split + 1) / P.n_splits) - w.s0;
  return w;
}
__device__ __forceinline__ BlockWork block_work(const DirectParams& p, int token_tile) {
  return work_of(p, token_tile, int(blockIdx.x), p.n_super);
}

template <int kNN>
__device__ __forceinline__ void zero_acc(float (&acc)[2][kNN][4]) {
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int ni = 0; ni < kNN; ++ni) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][ni][e] = 0.0f;
    }
  }
}

// Q4_0 codes c (two per half, at bits 0-3 and 16-19) to the f16 pair (c - 8) d: 1024 + c by
// the exponent trick, then the subtraction exactly, then the scale (one rounding, as the
// prefill GEMM's decoders).
__device__ __forceinline__ uint32_t q4_pair(uint32_t codes, __half2 d) {
  const uint32_t h = codes | 0x64006400u;
  __half2 v;
  std::memcpy(&v, &h, 4);
  v = __hmul2(__hsub2(v, __half2half2(__ushort_as_half(0x6408))), d);  // 0x6408: 1032
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

// 16-byte piece p (elements 8p .. 8p+7) of block j of token t in a chunk of kc elements a token:
// the XOR spreads the 8 lanes of each phase of a 16-byte load (tokens g, g+1 x 4 blocks) over
// distinct bank groups.
template <int kKC>
__device__ __forceinline__ int x_piece(int t, int j, int p) {
  return t * (kKC / 8) + 4 * j + (p ^ ((((j >> 1) & 1) << 1) | (t & 1)));
}

// One superstep of one lane: its quad's block j of its four weight rows (rows g, g + 8 of both
// m16 tiles: codes q, scales d) times tokens 8 ni + g of the activations' chunk `buf`, added to
// acc. 8 k16 steps (word w of the code words, low then high nibbles): step (hb, w) takes
// elements 16 hb + 4 w + {0, 2 | 1, 3} of the block. Every Q4_0 serving kernel (the direct
// ones and gemm_rows_stream.cu) sums through this, so their k order is one.
template <int kNN, int kKC>
__device__ __forceinline__ void superstep_mma(const uint4 (&q)[2][2], const __half2 (&d)[2][2], const uint4* buf,
                                              int j, int g, float (&acc)[2][kNN][4]) {
#pragma unroll
  for (int hb = 0; hb < 2; ++hb) {
#pragma unroll
    for (int qp = 0; qp < 2; ++qp) {
      uint4 xv[kNN];  // token 8 ni + g: elements 16 hb + 8 qp .. + 7 of block j
#pragma unroll
      for (int ni = 0; ni < kNN; ++ni) xv[ni] = buf[x_piece<kKC>(8 * ni + g, j, 2 * hb + qp)];
#pragma unroll
      for (int qq = 0; qq < 2; ++qq) {
        const int qi = 2 * qp + qq;
        uint32_t a[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint32_t* qw = &q[mt][h].x;
            const uint32_t w = qw[qi] >> (4 * hb);
            a[mt][h] = q4_pair(w & 0x000F000Fu, d[mt][h]);            // elements +0, +2
            a[mt][2 + h] = q4_pair((w >> 8) & 0x000F000Fu, d[mt][h]);  // elements +1, +3
          }
        }
#pragma unroll
        for (int ni = 0; ni < kNN; ++ni) {
          const uint32_t lo = qq == 0 ? xv[ni].x : xv[ni].z, hi = qq == 0 ? xv[ni].y : xv[ni].w;
          const uint32_t b0 = __byte_perm(lo, hi, 0x5410), b1 = __byte_perm(lo, hi, 0x7632);
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) mma::mma16816(acc[mt][ni], a[mt], b0, b1);
        }
      }
    }
  }
}

// A warp's partial tile of split `split` (kAcc floats a lane, in accumulator order) to the split
// scratch, and the sum of a tile's splits in split order (deterministic) from it.
template <int kNN>
__device__ __forceinline__ float* partial_at(const DirectParams& p, const BlockWork& w, int split, int warp) {
  const DirectPart& P = p.part[w.pi];
  const int tile = w.n_tile * p.m_tiles + w.m_tile, tiles = P.n_tiles * p.m_tiles;
  return P.partial + (int64_t(split) * tiles + tile) * (int64_t(kRowsBlock) * 8 * kNN) + warp * (2 * kNN * 4) * 32;
}
template <int kNN>
__device__ __forceinline__ void sum_splits(const DirectParams& p, const BlockWork& w, int warp, int lane,
                                           float (&acc)[2][kNN][4]) {
  float* flat = &acc[0][0][0];
  zero_acc<kNN>(acc);
  for (int z = 0; z < p.part[w.pi].n_splits; ++z) {
    const float* src = partial_at<kNN>(p, w, z, warp);
#pragma unroll
    for (int i = 0; i < 2 * kNN * 4; ++i) flat[i] += __ldcg(src + i * 32 + lane);
  }
}

// The warp's accumulators (mt, ni): e 0, 1 at weight row g, tokens 2c, 2c+1 of n8 tile ni; e 2, 3
// at row g+8; stored (+ bias) where the row and token exist.
template <int kNN>
__device__ __forceinline__ void store_acc(const DirectParams& p, const BlockWork& w, int warp, int lane,
                                          const float (&acc)[2][kNN][4]) {
  const DirectPart& P = p.part[w.pi];
  const int g = lane >> 2, c = lane & 3;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int o = w.n0 + kRowsWarp * warp + 16 * mt + g + 8 * h;
      if (o >= P.n_out) continue;
      const float bias = P.bias != nullptr ? P.bias[o] : 0.0f;
#pragma unroll
      for (int ni = 0; ni < kNN; ++ni) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int t = w.m0 + 8 * ni + 2 * c + e;
          if (t < p.n_tokens) P.out[int64_t(t) * P.out_stride + o] = acc[mt][ni][2 * h + e] + bias;
        }
      }
    }
  }
}

// The barrier of the kThreads threads that compute a tile: the whole block in the direct
// kernels; the stream kernel passes a named barrier of its consumer warps.
struct BlockSync {
  __device__ __forceinline__ void operator()() const { __syncthreads(); }
};

// The end of a tile (threads 0 .. kThreads - 1): with splits, each stores its partial tile and
// the last of a tile's splits to arrive adds them in split order, then stores.
template <int kNN, typename Sync = BlockSync>
__device__ __forceinline__ void direct_epilogue(const DirectParams& p, const BlockWork& w, float (&acc)[2][kNN][4],
                                                Sync sync = {}) {
  constexpr int kAcc = 2 * kNN * 4;
  const DirectPart& P = p.part[w.pi];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (P.n_splits > 1) {
    __shared__ int last;
    const int tile = w.n_tile * p.m_tiles + w.m_tile;
    float* dst = partial_at<kNN>(p, w, w.split, warp);
    const float* flat = &acc[0][0][0];
#pragma unroll
    for (int i = 0; i < kAcc; ++i) dst[i * 32 + lane] = flat[i];
    __threadfence();
    sync();
    if (tid == 0) last = atomicAdd(&P.arrivals[tile], 1) == P.n_splits - 1;
    sync();
    if (!last) return;
    __threadfence();
    sum_splits<kNN>(p, w, warp, lane, acc);
    if (tid == 0) P.arrivals[tile] = 0;  // for the next launch (which waits for this grid)
  }
  store_acc<kNN>(p, w, warp, lane, acc);
}

}  // namespace cera::ops::cuda::direct
