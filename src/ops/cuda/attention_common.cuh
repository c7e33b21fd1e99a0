// The parts of the decode attention kernels over the paged KV cache that the float kernel
// (attention.cu) and the tensor-core kernel (attention_tc.cu) share: the launch parameters, the
// split grid (each token derives its context split from its own position), the boundary between
// the cache rows copied before and after the PDL wait, and the merges of a block's warps and of
// the context splits. attention.cu picks the kernel and fills the parameters.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "ops/cuda/cuda_context.h"

namespace cera::ops::cuda::attn {

constexpr int kAttnWarps = 4;
constexpr int kMaxGroup = 8;  // query heads per block; larger groups take several chunks
constexpr int kMaxSplits = 64;
// Entries per split at least. 16 = one round of a block's 4 warps x 4 entries in flight (head_dim
// <= 128): short contexts spread over many blocks instead of a chain of rounds in one (8B decode
// at depths 0-128 spent ~15 us a layer in attention with 64, v5); from 1,024 entries on the
// splits grow and their count stays kMaxSplits.
constexpr int kMinSplitLen = 16;

struct HeadsView {
  float* data;
  int64_t token_stride;  // floats
  int64_t head_stride;
};

struct AttnParams {
  HeadsView q, out;
  const void* k;  // cache rows of n_head_kv * head_dim elements of the kernel's type T
  const void* v;
  int64_t k_stride, v_stride;  // elements per cache row
  const int32_t* positions;
  const int32_t* token_seq;
  const int32_t* block_tables;
  const int32_t* table_offset;
  int32_t block_size, head_dim, n_head, n_group, n_chunks, window;
  float scale, softcap;
  int32_t n_split;
  bool vec_rows;        // cache rows and head offsets aligned: lanes load D elements at once
  float* partial_acc;   // [n_tokens, n_head, n_split, head_dim]
  float2* partial_ml;   // [n_tokens, n_head, n_split] (max, sum)
  int32_t* arrivals;    // [n_tokens, gridDim.x] live splits done so far; zero between launches
  bool merge_in_block;  // the last live split merges (else attention_merge_kernel does)
  int32_t min_split;    // kMinSplitLen (float kernel) or kTcEntries (tensor cores);
                        // CERA_CUDA_ATTN_MINSPLIT for A/B runs
  bool early_rows;      // the first stages' rows of earlier steps are copied before the PDL wait
                        // (fresh_row)
};

// Split `split` of token t: its cache entries lo .. hi (none when lo > hi), from the token's block
// table, and how many splits start at or before the token's position (the merge reads those). The
// split length depends on the position only, so every block of the token agrees on it.
struct SplitRange {
  const int32_t* table;
  int lo, hi, n_live;
};
__device__ __forceinline__ SplitRange split_range(const AttnParams& p, int64_t t, int split) {
  const int32_t pos = p.positions[t];
  const int first = p.window > 0 ? max(0, pos - p.window + 1) : 0;
  const int split_len =
      max(p.min_split, (pos + p.n_split) / p.n_split);  // ceil((pos + 1) / n_split)
  return {p.block_tables + p.table_offset[p.token_seq[t]], max(first, split * split_len),
          min(pos, (split + 1) * split_len - 1), min(p.n_split, pos / split_len + 1)};
}

// What a block of the split grid works on: blockIdx = (kv head x group chunk of G heads, token,
// split); heads h0 .. h0 + ng - 1 of kv head kvh, and its split's range.
struct BlockWork {
  int kvh, ng, h0, split, lo, hi, n_live;
  int64_t t;
  const int32_t* table;
  // A split past the token's position holds nothing: with the merge in the last live block it has
  // nothing to do either (the merge reads n_live splits).
  __device__ bool idle(const AttnParams& p) const { return p.merge_in_block && split >= n_live; }
};
template <int G>
__device__ __forceinline__ BlockWork block_work(const AttnParams& p) {
  const int kvh = blockIdx.x / p.n_chunks, g0 = (blockIdx.x % p.n_chunks) * G;
  const int64_t t = blockIdx.y;
  const int split = blockIdx.z;
  const SplitRange r = split_range(p, t, split);
  return {kvh,    min(G, p.n_group - g0), kvh * p.n_group + g0, split, r.lo, r.hi, r.n_live, t,
          r.table};
}

// Cache rows copied before the PDL wait. The kernel just before attention is the one that stores
// this step's K/V rows (kv_store, or the fused RoPE + store): it writes the rows of the batch's
// positions and nothing else. The kernels that may still run when this one is scheduled are that
// store kernel and, when it lets attention start at its own start (attention_early_mode 2), the
// Q/K/V GEMV and the norm before it; none of them writes a cache row. The kernels that move cache
// rows (kv_copy, kv_rerotate) run before a step's embed, and the norm kernels between wait for
// their predecessor before letting the next one be scheduled. So a token's rows below the first
// position its sequence has in this batch are final before the wait; copying them first starts
// the DRAM reads while the kernels before run, instead of after them. Rows from fresh_row on, q
// and the partial results are touched after the wait. Positions and tables are read before the
// wait anyway (block_work). Only batches of at most kGemvMaxTokens tokens (attention() sets
// early_rows for those alone), so the scan over the batch's tokens stays short.
__device__ __forceinline__ int fresh_row(const AttnParams& p, int64_t t) {
  const int seq = p.token_seq[t];
  int fresh = p.positions[t];
  for (int i = 0; i < int(gridDim.y); ++i) {
    if (p.token_seq[i] == seq) fresh = min(fresh, p.positions[i]);
  }
  return fresh;
}
// Rows [from, to) of a stage are copied in one call; the whole stage is [kAllRows, kNoRows).
constexpr int kAllRows = -1;
constexpr int kNoRows = 0x7fffffff;

// The weights of n_live splits' partial results (max, sum) at ml: s_f[s] = exp(max_s - max) and
// the inverse of the merged sum. One warp; the expressions of the merge are those of
// attention_merge_kernel and the in-block merge alike, so both give the same bits.
__device__ __forceinline__ void split_weights(const float2* ml_base, int n_live, float* s_f,
                                              float* s_inv) {
  const int lane = threadIdx.x & 31;
  float2 ml[kMaxSplits / 32];
  float mx = -INFINITY;
#pragma unroll
  for (int k = 0; k < kMaxSplits / 32; ++k) {
    const int s = lane + 32 * k;
    ml[k] = s < n_live ? __ldcg(ml_base + s) : make_float2(-INFINITY, 0.0f);
    mx = fmaxf(mx, ml[k].x);
  }
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxSplits / 32; ++k) {
    const float f = ml[k].x == -INFINITY ? 0.0f : __expf(ml[k].x - mx);
    sum += ml[k].y * f;
    if (lane + 32 * k < n_live) s_f[lane + 32 * k] = f;
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) *s_inv = sum > 0.0f ? 1.0f / sum : 0.0f;
}

// The tensor-core kernel's block shape (attention_tc.cu), which the host's split grid reads.
constexpr int kTcRows = 16;     // query heads a block (one m16 tile; rows past the group are zeros)
constexpr int kTcEntries = 64;  // cache entries a stage: 16 a warp

// The block's warps merged, element by element: store(g, i, a, max, sum) with a the unnormalised
// accumulator of head g's element i at the merged max (natural-log domain).
template <int G, class Store>
__device__ __forceinline__ void merge_warps(const AttnParams& p, const float* smem,
                                            const BlockWork& bw, Store&& store) {
  const int hd = p.head_dim;
  const float* s_acc = smem;
  const float2* s_ml = reinterpret_cast<const float2*>(smem + kAttnWarps * G * hd);
  __syncthreads();
  for (int idx = threadIdx.x; idx < bw.ng * hd; idx += blockDim.x) {
    const int g = idx / hd, i = idx % hd;
    float mx = -INFINITY;
    for (int w = 0; w < kAttnWarps; ++w) mx = fmaxf(mx, s_ml[w * G + g].x);
    float sum = 0.0f, a = 0.0f;
    if (mx > -INFINITY) {
      for (int w = 0; w < kAttnWarps; ++w) {
        const float2 ml = s_ml[w * G + g];
        const float f = __expf(ml.x - mx);
        sum += ml.y * f;
        a += s_acc[(w * G + g) * hd + i] * f;
      }
    }
    store(g, i, a, mx, sum);
  }
}

// The end of a block of attention_kernel / attention_tc_kernel, once each warp has written its
// unnormalised accumulators to smem ([kAttnWarps][G][head_dim] floats) and its (max, sum) pairs
// after them (natural-log domain): merges the warps, stores the result (one split) or this split's
// partials, and the last live split of the (head group, token) merges the splits.
template <int G>
__device__ __forceinline__ void finish_block(const AttnParams& p, const float* smem,
                                             const BlockWork& bw) {
  const int hd = p.head_dim, warp = threadIdx.x / 32;
  merge_warps<G>(p, smem, bw, [&](int g, int i, float a, float mx, float sum) {
    const int h = bw.h0 + g;
    if (p.n_split == 1) {
      p.out.data[bw.t * p.out.token_stride + h * p.out.head_stride + i] =
          sum > 0.0f ? a / sum : 0.0f;
    } else {
      const int64_t pi = (bw.t * p.n_head + h) * p.n_split + bw.split;
      p.partial_acc[pi * hd + i] = a;
      if (i == 0) p.partial_ml[pi] = make_float2(mx, sum);
    }
  });
  if (p.n_split == 1 || !p.merge_in_block) return;
  // The last live split of this (kv head chunk, token) to finish merges them all: one launch a
  // layer instead of two (a dependent kernel boundary costs a few us in a decode step). Each
  // block publishes its partials (fence), then counts itself; the block that counts last sees
  // every other block's partials after its own fence.
  __shared__ int s_last;
  __shared__ float s_f[G][kMaxSplits];
  __shared__ float s_inv[G];
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t* arrived = p.arrivals + bw.t * gridDim.x + blockIdx.x;
    s_last = atomicAdd(arrived, 1) == bw.n_live - 1;
    if (s_last) *arrived = 0;  // every live split has counted: ready for the next launch
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  for (int g = warp; g < bw.ng; g += kAttnWarps) {
    split_weights(p.partial_ml + (bw.t * p.n_head + bw.h0 + g) * p.n_split, bw.n_live, s_f[g],
                  &s_inv[g]);
  }
  __syncthreads();
  // Four elements a thread (one 16-byte load per split, 16 splits in flight): this one block reads
  // every live split's partials, so its loads must not form a long dependent chain (with one
  // element a thread and 8 loads in flight, the merge cost 8B 3 % at depth 4096, v5).
  const int quads = hd % 4 == 0 ? hd / 4 : 0;
  for (int idx = threadIdx.x; idx < bw.ng * quads; idx += blockDim.x) {
    const int g = idx / quads, i = (idx % quads) * 4;
    const float* src = p.partial_acc + (bw.t * p.n_head + bw.h0 + g) * p.n_split * hd + i;
    float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 16
    for (int s = 0; s < bw.n_live; ++s) {
      const float4 v = __ldcg(reinterpret_cast<const float4*>(src + int64_t(s) * hd));
      const float f = s_f[g][s];
      a[0] += v.x * f;
      a[1] += v.y * f;
      a[2] += v.z * f;
      a[3] += v.w * f;
    }
    float* o = p.out.data + bw.t * p.out.token_stride + (bw.h0 + g) * p.out.head_stride + i;
    for (int k = 0; k < 4; ++k) o[k] = a[k] * s_inv[g];
  }
  for (int idx = threadIdx.x; quads == 0 && idx < bw.ng * hd; idx += blockDim.x) {
    const int g = idx / hd, i = idx % hd;
    const float* src = p.partial_acc + (bw.t * p.n_head + bw.h0 + g) * p.n_split * hd + i;
    float a = 0.0f;
#pragma unroll 8
    for (int s = 0; s < bw.n_live; ++s) a += __ldcg(src + int64_t(s) * hd) * s_f[g][s];
    p.out.data[bw.t * p.out.token_stride + (bw.h0 + g) * p.out.head_stride + i] = a * s_inv[g];
  }
}

// attention_tc.cu: launches the tensor-core kernel (head_dim 64 or 128).
void attention_tc(CudaContext& ctx, dim3 grid, const AttnParams& p, int head_dim);

}  // namespace cera::ops::cuda::attn
