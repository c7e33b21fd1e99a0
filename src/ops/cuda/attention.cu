// Attention over the paged KV cache (F32 or F16 rows), for decode and for the prompt batches that the
// tensor-core kernel (attention_prefill.cu) does not take. Two kernels share the split grid, the
// staging of cache rows and the merges: F16 rows at head_dim 64/128 go to attention_tc_kernel
// (mma.sync, up to 16 query heads a block; below), the rest to the float kernel: one block of 4 warps
// per (kv head, group chunk of <= 8 query heads, token, context split). The block copies its
// cache rows into shared memory by cp.async, two stages ahead; each warp takes 4 entries of a
// stage at a time, the group's query heads share every K/V row it reads, and the online softmax
// state is merged across warps in shared memory. When (tokens x kv heads) cannot fill the
// GPU (decode), the context is split and the last split of each (head group, token) to finish
// merges the splits' partial results (an arrival counter per group and token).
// The split count depends on shapes only and each token derives its split length from its own
// position on the device, so a decode step's launch parameters do not change with the position
// and a captured graph replays unchanged (graph.h). F16 rows are converted to float as they are
// read from shared memory; the math is float32 for both row types.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "ops/cuda/attention_prefill.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/mma.cuh"

namespace cera::ops::cuda {
namespace {

using namespace mma;

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
  bool vec_rows;       // cache rows and head offsets aligned: lanes load D elements at once
  float* partial_acc;  // [n_tokens, n_head, n_split, head_dim]
  float2* partial_ml;  // [n_tokens, n_head, n_split] (max, sum)
  int32_t* arrivals;   // [n_tokens, gridDim.x] live splits done so far; zero between launches
  bool merge_in_block; // the last live split merges (else attention_merge_kernel does)
  int32_t min_split;   // kMinSplitLen (float kernel) or kTcEntries (tensor cores); CERA_CUDA_ATTN_MINSPLIT for A/B runs
  bool early_rows;     // the first stages' rows of earlier steps are copied before the PDL wait (fresh_row)
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
  const int split_len = max(p.min_split, (pos + p.n_split) / p.n_split);  // ceil((pos + 1) / n_split)
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
  return {kvh, min(G, p.n_group - g0), kvh * p.n_group + g0, split, r.lo, r.hi, r.n_live, t, r.table};
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
__device__ __forceinline__ void split_weights(const float2* ml_base, int n_live, float* s_f, float* s_inv) {
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

// Cache rows are staged in shared memory: a stage holds kEntries rows of K and as many of V,
// copied by cp.async (16-byte chunks, every thread of the block issuing its share) two stages
// ahead of the warps that read them. Decision: the v5 kernel loaded each warp's rows straight into
// registers, 4 entries a round, and the rounds formed a dependent chain of DRAM latencies with ~16
// warps an SM (122 registers); at depth 4096 it read the F32 cache at 25 % of the bandwidth and the
// F16 cache at 10 % (ncu, 8B shapes). With the rows copied ahead a block keeps two stages (16 KB
// each) in flight whatever the registers, and the reads from shared memory are short.
constexpr int kStageBytes = 8192;  // of K (and of V) per stage at the widest row of the kernel's D
constexpr int kStages = 2;

template <class T, int D>
struct Staging {
  static constexpr int kRaw = kStageBytes / int(32 * D * sizeof(T));
  static constexpr int kEntries = kRaw < 8 ? 8 : (kRaw > 64 ? 64 : kRaw);  // rows of K (and V) per stage
  static constexpr int kPer = 16 / int(sizeof(T));                         // elements per 16-byte chunk
};

// Row pitch in shared memory, elements: head_dim rounded up to 8 (16-byte rows for F16, 32 for F32).
__host__ __device__ inline int32_t stage_pitch(int32_t head_dim) { return (head_dim + 7) / 8 * 8; }

// Copies the K and V rows of entries e0 .. e0 + kEntries - 1 (clamped to hi: rows past hi are
// masked by the readers) of this block's kv head into a stage: [kEntries][pitch] of K, then of V;
// only the entries in [from, to) (after the clamp) when those are given.
// Aligned rows (vec_rows) go by cp.async; others element by element through registers (odd
// head_dim with F16 rows: correct, not fast).
template <class T, int D>
__device__ __forceinline__ void stage_rows(const AttnParams& p, T* stage, const int32_t* table, int e0, int hi,
                                           int64_t koff, int from = kAllRows, int to = kNoRows) {
  using S = Staging<T, D>;
  const T* cache_k = static_cast<const T*>(p.k) + koff;
  const T* cache_v = static_cast<const T*>(p.v) + koff;
  const int pitch = stage_pitch(p.head_dim);
  T* sk = stage;
  T* sv = stage + S::kEntries * pitch;
  if (p.vec_rows) {
    const int cpr = p.head_dim / S::kPer;  // chunks per row
    for (int c = threadIdx.x; c < S::kEntries * cpr; c += blockDim.x) {
      const int r = c / cpr, col = (c - r * cpr) * S::kPer;
      const int e = min(e0 + r, hi);
      if (e < from || e >= to) continue;
      const int64_t slot = int64_t(table[e / p.block_size]) * p.block_size + e % p.block_size;
      cp_async16(smem_addr(sk + r * pitch + col), cache_k + slot * p.k_stride + col);
      cp_async16(smem_addr(sv + r * pitch + col), cache_v + slot * p.v_stride + col);
    }
  } else {
    for (int c = threadIdx.x; c < S::kEntries * p.head_dim; c += blockDim.x) {
      const int r = c / p.head_dim, i = c - r * p.head_dim;
      const int e = min(e0 + r, hi);
      if (e < from || e >= to) continue;
      const int64_t slot = int64_t(table[e / p.block_size]) * p.block_size + e % p.block_size;
      sk[r * pitch + i] = cache_k[slot * p.k_stride + i];
      sv[r * pitch + i] = cache_v[slot * p.v_stride + i];
    }
  }
}

// Elements lane * D .. lane * D + D - 1 of a staged row (zeros past head_dim): one vector load
// from shared memory when they lie inside the row (rows are 16-byte aligned).
template <int D>
__device__ __forceinline__ void load_head(const float* r, int lane, int head_dim, float (&x)[D]) {
  if (lane * D + D <= head_dim) {
    if constexpr (D % 4 == 0) {
#pragma unroll
      for (int d = 0; d < D; d += 4) {
        const float4 v = *reinterpret_cast<const float4*>(r + lane * D + d);
        x[d] = v.x; x[d + 1] = v.y; x[d + 2] = v.z; x[d + 3] = v.w;
      }
      return;
    } else if constexpr (D == 2) {
      const float2 v = *reinterpret_cast<const float2*>(r + lane * D);
      x[0] = v.x; x[1] = v.y;
      return;
    }
  }
#pragma unroll
  for (int d = 0; d < D; ++d) x[d] = lane * D + d < head_dim ? r[lane * D + d] : 0.0f;
}

// The same for fp16 rows: D halves are one 16-, 8- or 4-byte load, converted to float in registers.
template <int D>
__device__ __forceinline__ void load_head(const __half* r, int lane, int head_dim, float (&x)[D]) {
  if constexpr (D >= 2) {
    if (lane * D + D <= head_dim) {
      static_assert(D == 2 || D == 4 || D == 8);
      uint32_t w[D / 2];  // two halves per word, the lower element in the low bits
      if constexpr (D == 8) {
        const uint4 raw = *reinterpret_cast<const uint4*>(r + lane * D);
        w[0] = raw.x; w[1] = raw.y; w[2] = raw.z; w[3] = raw.w;
      } else if constexpr (D == 4) {
        const uint2 raw = *reinterpret_cast<const uint2*>(r + lane * D);
        w[0] = raw.x; w[1] = raw.y;
      } else {
        w[0] = *reinterpret_cast<const unsigned int*>(r + lane * D);
      }
#pragma unroll
      for (int d = 0; d < D; d += 2) {
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[d / 2]));
        x[d] = f.x;
        x[d + 1] = f.y;
      }
      return;
    }
  }
#pragma unroll
  for (int d = 0; d < D; ++d) x[d] = lane * D + d < head_dim ? __half2float(r[lane * D + d]) : 0.0f;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The end of a block of attention_kernel / attention_tc_kernel, once each warp has written its
// unnormalised accumulators to smem ([kAttnWarps][G][head_dim] floats) and its (max, sum) pairs
// after them (natural-log domain): merges the warps, stores the result (one split) or this split's
// partials, and the last live split of the (head group, token) merges the splits.
// The block's warps merged, element by element: store(g, i, a, max, sum) with a the unnormalised
// accumulator of head g's element i at the merged max (natural-log domain).
template <int G, class Store>
__device__ __forceinline__ void merge_warps(const AttnParams& p, const float* smem, const BlockWork& bw, Store&& store) {
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

template <int G>
__device__ __forceinline__ void finish_block(const AttnParams& p, const float* smem, const BlockWork& bw) {
  const int hd = p.head_dim, warp = threadIdx.x / 32;
  merge_warps<G>(p, smem, bw, [&](int g, int i, float a, float mx, float sum) {
    const int h = bw.h0 + g;
    if (p.n_split == 1) {
      p.out.data[bw.t * p.out.token_stride + h * p.out.head_stride + i] = sum > 0.0f ? a / sum : 0.0f;
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
    split_weights(p.partial_ml + (bw.t * p.n_head + bw.h0 + g) * p.n_split, bw.n_live, s_f[g], &s_inv[g]);
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
      a[0] += v.x * f; a[1] += v.y * f; a[2] += v.z * f; a[3] += v.w * f;
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

// Cluster form (attention_tc_kernel's kCluster > 0; CERA_CUDA_ATTN_CLUSTER, an A/B variant written
// after v9's device time ran out, not yet run): the kCluster context splits of a (kv head chunk,
// token) are one thread-block cluster. Each block merges its warps into its partial in shared
// memory; after a cluster barrier every block merges one slice of the elements from all the
// cluster's partials through distributed shared memory, and a second barrier keeps each block's
// shared memory alive until the others have read it. Against finish_block's merge, no partials
// go through global memory, and no fence, arrival counter or dependent L2 rounds follow the
// last split (1B at depth 4096 spends ~4.8 us a layer in attention, v9).
constexpr int kMaxCluster = 16;  // blocks a cluster at most (non-portable size)
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// The shared-memory address `local` (this block's) in block `rank` of the cluster.
__device__ __forceinline__ uint32_t cluster_addr(uint32_t local, uint32_t rank) {
  uint32_t a;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(local), "r"(rank));
  return a;
}
__device__ __forceinline__ float ld_cluster_f32(uint32_t addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ float2 ld_cluster_f32x2(uint32_t addr) {
  float2 v;
  asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr) : "memory");
  return v;
}
// part: this block's partial, [G][head_dim] accumulators then G (max, sum) pairs, beside the
// warps' merge area.
template <int G, int kCluster>
__device__ __forceinline__ void finish_cluster(const AttnParams& p, const float* smem, float* part, const BlockWork& bw) {
  static_assert(kCluster <= kMaxCluster, "sm_90 clusters hold at most 16 blocks");
  const int hd = p.head_dim;
  float2* part_ml = reinterpret_cast<float2*>(part + G * hd);
  merge_warps<G>(p, smem, bw, [&](int g, int i, float a, float mx, float sum) {
    part[g * hd + i] = a;
    if (i == 0) part_ml[g] = make_float2(mx, sum);
  });
  cluster_sync();
  const uint32_t rank = cluster_rank();
  const int items = bw.ng * hd;
  const int lo = int(rank) * items / kCluster, hi = (int(rank) + 1) * items / kCluster;
  for (int idx = lo + threadIdx.x; idx < hi; idx += blockDim.x) {
    const int g = idx / hd, i = idx % hd;
    float2 ml[kCluster];
    float mx = -INFINITY;
#pragma unroll
    for (int r = 0; r < kCluster; ++r) {
      ml[r] = ld_cluster_f32x2(cluster_addr(smem_addr(part_ml + g), uint32_t(r)));
      mx = fmaxf(mx, ml[r].x);
    }
    float sum = 0.0f, a = 0.0f;
#pragma unroll
    for (int r = 0; r < kCluster; ++r) {
      const float f = ml[r].x == -INFINITY ? 0.0f : __expf(ml[r].x - mx);  // splits with no entries weigh 0
      sum += ml[r].y * f;
      a += ld_cluster_f32(cluster_addr(smem_addr(part + g * hd + i), uint32_t(r))) * f;
    }
    p.out.data[bw.t * p.out.token_stride + (bw.h0 + g) * p.out.head_stride + i] = sum > 0.0f ? a / sum : 0.0f;
  }
  cluster_sync();
}

// T: the cache element (float or __half). D: elements of a head per lane (head_dim <= 32 D).
// G: query heads per block (4 or kMaxGroup): q and the accumulators of G heads live in registers,
// so the common GQA group of 4 (Llama 3 8B / 1B shapes) instantiates G = 4 and keeps occupancy.
// Dynamic shared memory: the stages (attention_smem()), reused by the merge of the warps after the loop.
template <class T, int D, int G>
__global__ void __launch_bounds__(kAttnWarps * 32) attention_kernel(const __grid_constant__ AttnParams p) {
  using S = Staging<T, D>;
  // Entries a warp takes per step from a stage; at D = 8 the registers of 4 would not fit beside
  // G heads' q and accumulators.
  constexpr int kE = D >= 8 ? 2 : 4;
  extern __shared__ __align__(16) float smem[];
  T* stages = reinterpret_cast<T*>(smem);
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  // Positions and block tables are copied to the device before the step's first kernel (no
  // kernel writes them), so they are read before the PDL wait, and so are the cache rows of earlier
  // steps (fresh_row); this step's rows, q and the partial results are read and written after it.
  const BlockWork w = block_work<G>(p);
  if (w.idle(p)) return;
  const int64_t koff = int64_t(w.kvh) * p.head_dim;
  const int pitch = stage_pitch(p.head_dim);
  const int stage_elems = 2 * S::kEntries * pitch;
  const int n_tiles = w.hi >= w.lo ? (w.hi - w.lo) / S::kEntries + 1 : 0;
  // The first stages' rows [from, to), one group per stage, empty or not: the loop's wait for the
  // (kStages - 1)th newest group then covers both passes' copies of stage j.
  auto first_stages = [&](int from, int to) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      if (s < n_tiles) stage_rows<T, D>(p, stages + s * stage_elems, w.table, w.lo + s * S::kEntries, w.hi, koff, from, to);
      cp_async_commit();
    }
  };
  // Rows of earlier steps before the PDL wait, this step's after it (fresh_row).
  const int fresh = p.early_rows ? fresh_row(p, w.t) : kAllRows;
  first_stages(kAllRows, fresh);
  pdl_entry();
  if (fresh <= min(w.hi, w.lo + kStages * S::kEntries - 1)) first_stages(fresh, kNoRows);

  float qr[G][D], acc[G][D], m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int i = lane * D + d;
      acc[g][d] = 0.0f;
      qr[g][d] = g < w.ng && i < p.head_dim ? p.q.data[w.t * p.q.token_stride + (w.h0 + g) * p.q.head_stride + i] : 0.0f;
    }
  }
  for (int j = 0; j < n_tiles; ++j) {
    cp_async_wait<kStages - 1>();  // stage j landed (the one after it may still be in flight)
    __syncthreads();
    const T* sk = stages + (j % kStages) * stage_elems;
    const T* sv = sk + S::kEntries * pitch;
    const int e0 = w.lo + j * S::kEntries, count = min(S::kEntries, w.hi - e0 + 1);
    for (int r0 = warp * kE; r0 < count; r0 += kAttnWarps * kE) {
      float kk[kE][D], vv[kE][D];
#pragma unroll
      for (int jj = 0; jj < kE; ++jj) {
        const int r = min(r0 + jj, count - 1);  // rows past count: a valid row, masked below
        load_head<D>(sk + r * pitch, lane, p.head_dim, kk[jj]);
        load_head<D>(sv + r * pitch, lane, p.head_dim, vv[jj]);
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        if (g >= w.ng) break;
        float s[kE], mx = m[g];
#pragma unroll
        for (int jj = 0; jj < kE; ++jj) {
          float dot = 0.0f;
#pragma unroll
          for (int d = 0; d < D; ++d) dot += qr[g][d] * kk[jj][d];
          float x = p.scale * warp_sum(dot);
          if (p.softcap > 0.0f) x = p.softcap * tanhf(x / p.softcap);
          s[jj] = r0 + jj < count ? x : -INFINITY;
          mx = fmaxf(mx, s[jj]);
        }
        const float corr = __expf(m[g] - mx);  // 0 while m is -inf
        float psum = 0.0f;
#pragma unroll
        for (int d = 0; d < D; ++d) acc[g][d] *= corr;
#pragma unroll
        for (int jj = 0; jj < kE; ++jj) {
          const float pj = __expf(s[jj] - mx);
          psum += pj;
#pragma unroll
          for (int d = 0; d < D; ++d) acc[g][d] += pj * vv[jj][d];
        }
        l[g] = l[g] * corr + psum;
        m[g] = mx;
      }
    }
    __syncthreads();  // every warp is done with stage j before it is refilled
    if (j + kStages < n_tiles) {
      stage_rows<T, D>(p, stages + (j % kStages) * stage_elems, w.table, w.lo + (j + kStages) * S::kEntries, w.hi, koff);
    }
    cp_async_commit();
  }
  cp_async_wait<0>();  // nothing in flight into the stages the merge below reuses
  // Merge the warps: smem = [warps][G][head_dim] accumulators, then (max, sum) pairs.
  const int hd = p.head_dim;
  float* s_acc = smem;
  float2* s_ml = reinterpret_cast<float2*>(smem + kAttnWarps * G * hd);
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (g >= w.ng) break;
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int i = lane * D + d;
      if (i < hd) s_acc[(warp * G + g) * hd + i] = acc[g][d];
    }
    if (lane == 0) s_ml[warp * G + g] = make_float2(m[g], l[g]);
  }
  finish_block<G>(p, smem, w);
}

// Decode over F16 rows on tensor cores (head_dim 64 or 128): up to 16 query heads of a GQA group
// are the rows of m16n8k16 products, so S = Q·Kᵀ and O += P·V for 16 cache entries cost a warp
// 2 x head_dim / 16 + head_dim / 8 mma instructions where the float kernel above spends a warp
// reduction (5 shuffles) per (head, entry). The block stages 64 entries a stage (16 a warp) by
// cp.async, two stages ahead; Q·scale and the softmax weights P are rounded to f16, sums are f32,
// the softmax is online in the log2 domain (as attention_prefill.cu). Decision: the float kernel
// ran at 25 % (F32 rows) and 13 % (F16 rows) of the DRAM bandwidth at depth 4096 (8B shapes,
// ncu), issue-bound on its shuffles with 4 warps a scheduler.
constexpr int kTcRows = 16;     // query heads a block (one m16 tile; rows past the group are zeros)
constexpr int kTcEntries = 64;  // cache entries a stage: 16 a warp
// Stages in flight (one: 8B at depth 4096 386 vs 389 t/s, 1B 1,433 vs 1,451). A kernel with 4
// (CERA_CUDA_ATTN_STAGES=4, with CERA_CUDA_ATTN_FILL=1: half the splits, each a block's 4 tiles all
// in flight, half the partials to merge) is built for A/B runs; written after v9's device time
// ran out, not yet measured.
constexpr int kTcStages = 2;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kLog2e = 1.4426950408889634f;

template <int HD, int kStages = kTcStages, int kCluster = 0>
struct TcGeometry {
  // Halves a staged row: 16 bytes of padding put the 8 rows an ldmatrix phase reads on distinct banks.
  static constexpr int kPitch = HD + 8;
  static constexpr int kStageHalves = 2 * kTcEntries * kPitch;  // K rows, then V rows
  static constexpr size_t kStageBytes = size_t(kStages) * kStageHalves * 2;
  // The warps' merge area, and in the cluster form the block's partial after it (finish_cluster).
  static constexpr size_t kMergeBytes = size_t(kAttnWarps + (kCluster > 0 ? 1 : 0)) * kTcRows * (HD * 4 + 8);
  static constexpr size_t kSmem = kStageBytes > kMergeBytes ? kStageBytes : kMergeBytes;
};

// Copies the K and V rows of entries e0 .. e0 + kTcEntries - 1 (clamped to hi) into a stage; only
// the entries in [from, to) (after the clamp) when those are given.
template <int HD>
__device__ __forceinline__ void stage_tc(const AttnParams& p, __half* stage, const int32_t* table, int e0, int hi,
                                         int64_t koff, int from = kAllRows, int to = kNoRows) {
  using Gm = TcGeometry<HD>;
  constexpr int kCpr = HD / 8;  // 16-byte chunks a row
  const __half* cache_k = static_cast<const __half*>(p.k) + koff;
  const __half* cache_v = static_cast<const __half*>(p.v) + koff;
  const uint32_t sk = smem_addr(stage), sv = smem_addr(stage + kTcEntries * Gm::kPitch);
#pragma unroll
  for (int i = 0; i < kTcEntries * kCpr / (kAttnWarps * 32); ++i) {
    const int c = threadIdx.x + i * kAttnWarps * 32;
    const int r = c / kCpr, col = (c % kCpr) * 8;
    const int e = min(e0 + r, hi);
    if (e < from || e >= to) continue;
    const int64_t slot = int64_t(table[e / p.block_size]) * p.block_size + e % p.block_size;
    cp_async16(sk + 2 * (r * Gm::kPitch + col), cache_k + slot * p.k_stride + col);
    cp_async16(sv + 2 * (r * Gm::kPitch + col), cache_v + slot * p.v_stride + col);
  }
}

template <int HD, int kStages, int kCluster = 0>
__global__ void __launch_bounds__(kAttnWarps * 32) attention_tc_kernel(const __grid_constant__ AttnParams p) {
  using Gm = TcGeometry<HD, kStages, kCluster>;
  extern __shared__ __align__(16) float smem[];
  __half* stages = reinterpret_cast<__half*>(smem);
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  // As attention_kernel: positions, tables and earlier steps' cache rows before the PDL wait.
  const BlockWork w = block_work<kTcRows>(p);
  if (w.idle(p)) return;
  const int64_t koff = int64_t(w.kvh) * HD;
  const int n_tiles = w.hi >= w.lo ? (w.hi - w.lo) / kTcEntries + 1 : 0;
  auto first_stages = [&](int from, int to) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      if (s < n_tiles) stage_tc<HD>(p, stages + s * Gm::kStageHalves, w.table, w.lo + s * kTcEntries, w.hi, koff, from, to);
      cp_async_commit();
    }
  };
  const int fresh = p.early_rows ? fresh_row(p, w.t) : kAllRows;
  first_stages(kAllRows, fresh);
  pdl_entry();
  if (fresh <= min(w.hi, w.lo + kStages * kTcEntries - 1)) first_stages(fresh, kNoRows);
  // Q fragments (rows: heads g0 + g, g = lane / 4 and + 8; scaled, f16), zeros past the group.
  const int rg = lane >> 2, cq = 2 * (lane & 3);
  const float q_scale = p.softcap > 0.0f ? p.scale : p.scale * kLog2e;
  const float cap_log2 = p.softcap * kLog2e;
  uint32_t qa[HD / 16][4];
  {
    const float* q0 = p.q.data + w.t * p.q.token_stride + int64_t(w.h0 + rg) * p.q.head_stride;
    const float* q8 = q0 + 8 * p.q.head_stride;
    const bool v0 = rg < w.ng, v8 = rg + 8 < w.ng;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      const int c = 16 * kk + cq;
      qa[kk][0] = v0 ? pack_half2(q0[c] * q_scale, q0[c + 1] * q_scale) : 0u;
      qa[kk][1] = v8 ? pack_half2(q8[c] * q_scale, q8[c + 1] * q_scale) : 0u;
      qa[kk][2] = v0 ? pack_half2(q0[c + 8] * q_scale, q0[c + 9] * q_scale) : 0u;
      qa[kk][3] = v8 ? pack_half2(q8[c + 8] * q_scale, q8[c + 9] * q_scale) : 0u;
    }
  }
  float o[HD / 8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  const int rw = 16 * warp;  // this warp's first row of a stage
  for (int j = 0; j < n_tiles; ++j) {
    cp_async_wait<kStages - 1>();
    __syncthreads();
    const int count = min(kTcEntries, w.hi - (w.lo + j * kTcEntries) + 1);
    if (rw < count) {
      const uint32_t kb = smem_addr(stages + (j % kStages) * Gm::kStageHalves);
      const uint32_t vb = kb + 2 * kTcEntries * Gm::kPitch;
      float s[2][4] = {};
#pragma unroll
      for (int kk = 0; kk < HD / 16; ++kk) {
        // Matrices: entries 0-7 d 0-7, 0-7 d 8-15, 8-15 d 0-7, 8-15 d 8-15 of this warp's 16.
        uint32_t b[4];
        ldsm_x4(kb + 2 * ((rw + (lane & 7) + ((lane >> 4) << 3)) * Gm::kPitch + (2 * kk + ((lane >> 3) & 1)) * 8), b);
        mma16816(s[0], qa[kk], b[0], b[1]);
        mma16816(s[1], qa[kk], b[2], b[3]);
      }
      // Element (n, e) of s: head rg (e < 2) or rg + 8, entry rw + 8 n + cq + (e & 1) of the stage.
#pragma unroll
      for (int n = 0; n < 2; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (p.softcap > 0.0f) s[n][e] = cap_log2 * tanhf(s[n][e] / p.softcap);
          if (rw + 8 * n + cq + (e & 1) >= count) s[n][e] = -INFINITY;
        }
      }
      online_softmax(s, m, l, o);
      // O += P·V: the accumulator layout of s is the A fragment of the 16 entries.
      const uint32_t a[4] = {pack_half2(s[0][0], s[0][1]), pack_half2(s[0][2], s[0][3]), pack_half2(s[1][0], s[1][1]),
                             pack_half2(s[1][2], s[1][3])};
#pragma unroll
      for (int dn = 0; dn < HD / 16; ++dn) {
        // Transposed matrices: entries 0-7 d 0-7, entries 8-15 d 0-7, 0-7 d 8-15, 8-15 d 8-15.
        uint32_t b[4];
        ldsm_x4_trans(vb + 2 * ((rw + (lane & 7) + (((lane >> 3) & 1) << 3)) * Gm::kPitch + (2 * dn + (lane >> 4)) * 8), b);
        mma16816(o[2 * dn], a, b[0], b[1]);
        mma16816(o[2 * dn + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();
    if (j + kStages < n_tiles) {
      stage_tc<HD>(p, stages + (j % kStages) * Gm::kStageHalves, w.table, w.lo + (j + kStages) * kTcEntries, w.hi, koff);
    }
    cp_async_commit();
  }
  cp_async_wait<0>();
  // Each warp's accumulators and (max, sum) to shared memory for finish_block (max to the natural log).
  float* s_acc = smem;
  float2* s_ml = reinterpret_cast<float2*>(smem + kAttnWarps * kTcRows * HD);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float sum = quad_sum(l[r]);
    const int g = rg + 8 * r;
    if (g >= w.ng) continue;
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) {
      s_acc[(warp * kTcRows + g) * HD + 8 * n + cq] = o[n][2 * r];
      s_acc[(warp * kTcRows + g) * HD + 8 * n + cq + 1] = o[n][2 * r + 1];
    }
    if ((lane & 3) == 0) s_ml[warp * kTcRows + g] = make_float2(m[r] * kLn2, sum);
  }
  if constexpr (kCluster > 0) {
    finish_cluster<kTcRows, kCluster>(p, smem, smem + kAttnWarps * kTcRows * (HD + 2), w);
  } else {
    finish_block<kTcRows>(p, smem, w);
  }
}

// One block per (head, token): merges the n_split partial softmax results. The splits' (max,
// sum) pairs go to shared memory first and each split's weight is computed once, so the loop
// over splits is branch-free loads the compiler batches (the first version, a branch and a
// dependent (max, sum) load per split and element, cost ~0.5 ms a token at 8B, depth 4096).
__global__ void attention_merge_kernel(const __grid_constant__ AttnParams p) {
  pdl_entry();
  __shared__ float s_f[kMaxSplits];
  __shared__ float s_inv;
  const int h = blockIdx.x;
  const int64_t t = blockIdx.y;
  const int64_t base = (t * p.n_head + h) * p.n_split;
  // Splits past the token's position hold nothing (same split length as attention_kernel).
  const int n_live = split_range(p, t, 0).n_live;
  if (threadIdx.x < 32) split_weights(p.partial_ml + base, n_live, s_f, &s_inv);
  __syncthreads();
  for (int i = threadIdx.x; i < p.head_dim; i += blockDim.x) {
    float a = 0.0f;
#pragma unroll 8
    for (int s = 0; s < n_live; ++s) a += p.partial_acc[(base + s) * p.head_dim + i] * s_f[s];
    p.out.data[t * p.out.token_stride + h * p.out.head_stride + i] = a * s_inv;
  }
}

HeadsView heads_of(const TensorView& v, int64_t head_dim, int64_t n_head, int64_t n_tokens, const char* what) {
  check_f32_device(v, what);
  const bool per_head = v.cols() == head_dim && v.rows() == n_head * n_tokens && (n_head == 1 || v.packed());
  const bool per_token = v.cols() == n_head * head_dim && v.rows() == n_tokens;
  CERA_CHECK_MSG(per_head || per_token, std::string(what) + ": expected [head_dim, n_head, n_tokens]");
  const int64_t s = v.stride() / 4;
  if (v.cols() == head_dim) return {reinterpret_cast<float*>(v.data), n_head * s, s};
  return {reinterpret_cast<float*>(v.data), s, head_dim};
}

// Dynamic shared memory of attention_kernel<T, D, G>: the stages, or the merge of the warps
// (accumulators and (max, sum) pairs) that reuses them, whichever is larger.
template <class T, int D, int G>
size_t attention_smem(int32_t head_dim) {
  const size_t stages = size_t(kStages) * 2 * Staging<T, D>::kEntries * stage_pitch(head_dim) * sizeof(T);
  const size_t merge = size_t(kAttnWarps) * G * (head_dim * sizeof(float) + sizeof(float2));
  return std::max(stages, merge);
}

template <class T, int D, int G>
void launch_attention(CudaContext& ctx, dim3 grid, const AttnParams& p) {
  // Four blocks an SM (the register limit) need ~4 x 33 KB of shared memory: ask for the largest
  // carveout once (the default left ~100 KB, three blocks).
  static const bool carveout = [] {
    CERA_CUDA_CHECK(cudaFuncSetAttribute(attention_kernel<T, D, G>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                         int(cudaSharedmemCarveoutMaxShared)));
    return true;
  }();
  (void)carveout;
  launch(ctx.stream(), attention_kernel<T, D, G>, grid, kAttnWarps * 32, attention_smem<T, D, G>(p.head_dim), p);
}

template <int HD, int kStages>
void launch_attention_tc(CudaContext& ctx, dim3 grid, const AttnParams& p) {
  using Gm = TcGeometry<HD, kStages>;
  static const bool raised = [] {  // over 48 KB of dynamic shared memory, three blocks an SM
    CERA_CUDA_CHECK(cudaFuncSetAttribute(attention_tc_kernel<HD, kStages>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, int(Gm::kSmem)));
    CERA_CUDA_CHECK(cudaFuncSetAttribute(attention_tc_kernel<HD, kStages>,
                                         cudaFuncAttributePreferredSharedMemoryCarveout,
                                         int(cudaSharedmemCarveoutMaxShared)));
    return true;
  }();
  (void)raised;
  launch(ctx.stream(), attention_tc_kernel<HD, kStages>, grid, kAttnWarps * 32, Gm::kSmem, p);
}
// The cluster form (finish_cluster) with kCluster splits a cluster and 4 stages in flight.
// tc_cluster_fits: whether such clusters can be resident at all (else the default kernel runs).
template <int HD, int kCluster>
bool tc_cluster_fits() {
  using Gm = TcGeometry<HD, 4, kCluster>;
  auto* kernel = attention_tc_kernel<HD, 4, kCluster>;
  static const bool fits = [&] {
    CERA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(Gm::kSmem)));
    if (kCluster > 8) CERA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = 1;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = kCluster;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(1, 1, kCluster);
    config.blockDim = kAttnWarps * 32;
    config.dynamicSmemBytes = Gm::kSmem;
    config.attrs = &attr;
    config.numAttrs = 1;
    int clusters = 0;
    const bool ok = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) == cudaSuccess && clusters > 0;
    cudaGetLastError();  // a failed query leaves no error behind for the next launch
    return ok;
  }();
  return fits;
}
bool tc_cluster_fits(int head_dim, int cluster) {
  if (head_dim == 64) return cluster == 16 ? tc_cluster_fits<64, 16>() : tc_cluster_fits<64, 8>();
  return cluster == 16 ? tc_cluster_fits<128, 16>() : tc_cluster_fits<128, 8>();
}
template <int HD, int kCluster>
void launch_attention_tc_cluster(CudaContext& ctx, dim3 grid, const AttnParams& p) {
  using Gm = TcGeometry<HD, 4, kCluster>;
  launch_clustered(ctx.stream(), attention_tc_kernel<HD, 4, kCluster>, grid, kAttnWarps * 32, Gm::kSmem,
                   dim3(1, 1, kCluster), p);
}
template <int HD>
void launch_attention_tc_cluster(CudaContext& ctx, dim3 grid, const AttnParams& p, int cluster) {
  cluster == 16 ? launch_attention_tc_cluster<HD, 16>(ctx, grid, p) : launch_attention_tc_cluster<HD, 8>(ctx, grid, p);
}

// CERA_CUDA_ATTN_CLUSTER=8 or 16: decode launches on tensor cores take the cluster form with that
// many context splits (an A/B switch, off by default: 0).
int attention_cluster_env() {
  static const int n = [] {
    const char* e = std::getenv("CERA_CUDA_ATTN_CLUSTER");
    const int v = e != nullptr ? std::atoi(e) : 0;
    return v == 8 || v == 16 ? v : 0;
  }();
  return n;
}

// CERA_CUDA_ATTN_STAGES=4: the 4-stage tensor-core kernel (an A/B switch; default 2).
template <int HD>
void launch_attention_tc(CudaContext& ctx, dim3 grid, const AttnParams& p) {
  static const bool four = [] {
    const char* e = std::getenv("CERA_CUDA_ATTN_STAGES");
    return e != nullptr && std::atoi(e) == 4;
  }();
  four ? launch_attention_tc<HD, 4>(ctx, grid, p) : launch_attention_tc<HD, kTcStages>(ctx, grid, p);
}

// Instantiated: T in {float, __half} x D in {1, 2, 4, 8} (head_dim <= 32, 64, 128, 256) x G in
// {4, kMaxGroup}.
template <class T, int G>
void launch_attention(CudaContext& ctx, dim3 grid, const AttnParams& p, int32_t head_dim) {
  if (head_dim <= 32) {
    launch_attention<T, 1, G>(ctx, grid, p);
  } else if (head_dim <= 64) {
    launch_attention<T, 2, G>(ctx, grid, p);
  } else if (head_dim <= 128) {
    launch_attention<T, 4, G>(ctx, grid, p);
  } else {
    launch_attention<T, 8, G>(ctx, grid, p);
  }
}

}  // namespace

int attention_early_mode() {
  static const int mode = [] {
    const char* e = std::getenv("CERA_CUDA_ATTN_EARLY");
    return e != nullptr ? std::clamp(std::atoi(e), 0, 2) : 2;
  }();
  return mode;
}

void attention(CudaContext& ctx, const TensorView& out, const TensorView& q, const KvLayer& layer,
               const AttentionBatch& batch, const AttentionParams& a) {
  CERA_CHECK_MSG(layer.k.device == Device::kCuda && layer.v.device == Device::kCuda, "attention: kv layer not on CUDA");
  CERA_CHECK_MSG(layer.k.dtype == layer.v.dtype && (layer.k.dtype == DType::kF32 || layer.k.dtype == DType::kF16),
                 "attention: kv layer K and V must both be F32 or both F16, got " +
                     std::string(dtype_name(layer.k.dtype)) + " and " + std::string(dtype_name(layer.v.dtype)));
  CERA_CHECK(layer.k.cols() == layer.v.cols() && layer.k.rows() == layer.v.rows() && layer.block_size > 0);
  CERA_CHECK(a.n_head > 0 && a.n_head_kv > 0 && a.n_head % a.n_head_kv == 0 && a.head_dim > 0);
  CERA_CHECK_MSG(a.head_dim <= 256, "attention: CUDA kernels support head_dim <= 256");
  CERA_CHECK_MSG(layer.k.cols() == int64_t(a.n_head_kv) * a.head_dim,
                 "attention: cache rows are not n_head_kv * head_dim");
  const auto n_tokens = static_cast<int64_t>(batch.positions.size());
  CERA_CHECK(batch.token_seq.size() == batch.positions.size());
  const auto n_seqs = static_cast<int64_t>(batch.table_offset.size()) - 1;
  CERA_CHECK(n_seqs >= 0);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int32_t seq = batch.token_seq[size_t(t)], pos = batch.positions[size_t(t)];
    CERA_CHECK_MSG(seq >= 0 && seq < n_seqs, "attention: token_seq out of range");
    const int32_t t0 = batch.table_offset[size_t(seq)], t1 = batch.table_offset[size_t(seq) + 1];
    CERA_CHECK(t0 >= 0 && t0 <= t1 && t1 <= static_cast<int64_t>(batch.block_tables.size()));
    CERA_CHECK_MSG(pos >= 0 && pos / layer.block_size < t1 - t0, "attention: position beyond the sequence's block table");
    for (int32_t b = t0; b <= t0 + pos / layer.block_size; ++b) {
      const int32_t blk = batch.block_tables[size_t(b)];
      CERA_CHECK_MSG(blk >= 0 && (int64_t(blk) + 1) * layer.block_size <= layer.k.rows(),
                     "attention: block id out of range");
    }
  }
  AttnParams p{};
  p.q = heads_of(q, a.head_dim, a.n_head, n_tokens, "attention q");
  p.out = heads_of(out, a.head_dim, a.n_head, n_tokens, "attention out");
  if (n_tokens == 0) return;
  const bool f16 = layer.k.dtype == DType::kF16;
  const int64_t elem = f16 ? 2 : 4;
  CERA_CHECK(layer.k.stride() % elem == 0 && layer.v.stride() % elem == 0);
  p.k = layer.k.data;
  p.v = layer.v.data;
  p.k_stride = layer.k.stride() / elem;
  p.v_stride = layer.v.stride() / elem;
  p.positions = ctx.device_array(batch.positions);
  p.token_seq = ctx.device_array(batch.token_seq);
  p.block_tables = ctx.device_array(batch.block_tables);
  p.table_offset = ctx.device_array(batch.table_offset);
  // Prompt batches: the tensor-core flash-attention kernel (attention_prefill.cu) when it suits them.
  if (n_tokens > kGemvMaxTokens) {
    const PrefillIo io{.q = p.q.data, .q_token_stride = p.q.token_stride, .q_head_stride = p.q.head_stride,
                       .out = p.out.data, .out_token_stride = p.out.token_stride,
                       .out_head_stride = p.out.head_stride, .positions = p.positions, .token_seq = p.token_seq,
                       .block_tables = p.block_tables, .table_offset = p.table_offset};
    if (attention_prefill(ctx, io, layer, batch, a)) return;
  }
  p.block_size = layer.block_size;
  p.head_dim = a.head_dim;
  p.n_head = a.n_head;
  p.n_group = a.n_head / a.n_head_kv;
  // F16 rows of head_dim 64 or 128 take the tensor-core kernel; CERA_CUDA_ATTN_TC=0 keeps them on
  // the float kernel (an A/B switch).
  static const bool tc_on = [] {
    const char* e = std::getenv("CERA_CUDA_ATTN_TC");
    return e == nullptr || std::atoi(e) != 0;
  }();
  const bool tc = f16 && tc_on && (a.head_dim == 64 || a.head_dim == 128) && layer.k.stride() % 16 == 0 &&
                  layer.v.stride() % 16 == 0 && reinterpret_cast<uintptr_t>(p.k) % 16 == 0 &&
                  reinterpret_cast<uintptr_t>(p.v) % 16 == 0;
  const int group_cap = tc ? kTcRows : p.n_group <= 4 ? 4 : kMaxGroup;  // the kernel's G
  p.n_chunks = (p.n_group + group_cap - 1) / group_cap;
  p.window = a.sliding_window;
  p.scale = a.scale;
  p.softcap = a.softcap;
  // Split the context when the blocks would not fill the GPU `fill` times over (decode). Splits
  // past a token's position (kMinSplitLen entries each at least) find no entries and cost one
  // idle block. Fill target (blocks per SM), measured at depth 4096 with F32 rows (docs/benchmarks/
  // cuda.md, v4): 4 for every head_dim since blocks carry 4-head groups (8B 291 t/s vs 271 at 2 and
  // 293 at 8; 1B 941 vs 819 at 2 and 903 at 8); with 8-head blocks (v3) head_dim 128 ran best at 2.
  // CERA_CUDA_ATTN_FILL (1..8) overrides it: an A/B switch for benchmarks.
  static const int64_t fill_env = [] {
    const char* e = std::getenv("CERA_CUDA_ATTN_FILL");
    const int v = e != nullptr ? std::atoi(e) : 0;
    return int64_t(v >= 1 && v <= 8 ? v : 0);
  }();
  // The tensor-core kernel (3 blocks an SM, 64-entry stages) runs best at 2: 8B Q4_0 F16 at depth
  // 4096 436 t/s against 389 at 4 and 435 at 1; 1B 1,567 against 1,451 and 1,523 (same call).
  const int64_t fill = fill_env > 0 ? fill_env : tc ? 2 : 4;
  const int64_t units = int64_t(a.n_head_kv) * p.n_chunks * n_tokens;
  int64_t n_split = 1;
  if (units < fill * ctx.sm_count()) {
    n_split = std::min<int64_t>((fill * ctx.sm_count() + units - 1) / units, kMaxSplits);
  }
  // Vector loads need every lane's first element aligned to its load: 4 floats (16 bytes) or 8
  // halves (16 bytes) cover every D.
  const int64_t vec_elems = f16 ? 8 : 4;
  p.vec_rows = a.head_dim % vec_elems == 0 && p.k_stride % vec_elems == 0 && p.v_stride % vec_elems == 0 &&
               reinterpret_cast<uintptr_t>(p.k) % 16 == 0 && reinterpret_cast<uintptr_t>(p.v) % 16 == 0;
  // The cluster form: its own split count, merged in the cluster (finish_cluster).
  const int cluster = tc && n_tokens <= kGemvMaxTokens && attention_cluster_env() > 0 &&
                              tc_cluster_fits(a.head_dim, attention_cluster_env())
                          ? attention_cluster_env()
                          : 0;
  if (cluster > 0) n_split = cluster;
  p.n_split = int32_t(n_split);
  const dim3 grid(unsigned(a.n_head_kv * p.n_chunks), unsigned(n_tokens), unsigned(n_split));
  // CERA_CUDA_ATTN_MERGE=kernel: the splits merged by a second kernel (the v4 path), for A/B runs.
  static const bool merge_kernel = [] {
    const char* e = std::getenv("CERA_CUDA_ATTN_MERGE");
    return e != nullptr && std::string(e) == "kernel";
  }();
  p.merge_in_block = !merge_kernel && cluster == 0;
  // The tensor-core kernel's splits are one 64-entry stage at least, so that all 4 warps of a
  // block work on a short context: 8B depth 0 472 -> 480 t/s, 1B 1,732 -> 1,777, depth 4096
  // unchanged (same call, through CERA_CUDA_ATTN_MINSPLIT, which overrides both kernels' minimum).
  static const int32_t min_split_env = [] {
    const char* e = std::getenv("CERA_CUDA_ATTN_MINSPLIT");
    const int v = e != nullptr ? std::atoi(e) : 0;
    return v >= 1 ? v : 0;
  }();
  p.min_split = min_split_env > 0 ? min_split_env : tc ? kTcEntries : kMinSplitLen;
  p.early_rows = attention_early_mode() >= 1 && n_tokens <= kGemvMaxTokens;
  if (n_split > 1 && cluster == 0) {
    const int64_t n_part = n_tokens * a.n_head * n_split;
    auto* buf = static_cast<float*>(ctx.scratch(ScratchKind::kAttnPartial, uint64_t(n_part) * (a.head_dim + 2) * 4));
    p.partial_acc = buf;
    p.partial_ml = reinterpret_cast<float2*>(buf + n_part * a.head_dim);
    p.arrivals = static_cast<int32_t*>(ctx.zeroed_scratch(ScratchKind::kAttnArrivals, uint64_t(n_tokens) * grid.x * 4));
  }
  CERA_CHECK_MSG(n_tokens < 65536, "attention: at most 65535 tokens per call");
  if (!ctx.launching()) return;
  if (cluster > 0) {
    a.head_dim == 64 ? launch_attention_tc_cluster<64>(ctx, grid, p, cluster)
                     : launch_attention_tc_cluster<128>(ctx, grid, p, cluster);
  } else if (tc) {
    a.head_dim == 64 ? launch_attention_tc<64>(ctx, grid, p) : launch_attention_tc<128>(ctx, grid, p);
  } else if (f16) {
    group_cap == 4 ? launch_attention<__half, 4>(ctx, grid, p, a.head_dim)
                   : launch_attention<__half, kMaxGroup>(ctx, grid, p, a.head_dim);
  } else {
    group_cap == 4 ? launch_attention<float, 4>(ctx, grid, p, a.head_dim)
                   : launch_attention<float, kMaxGroup>(ctx, grid, p, a.head_dim);
  }
  CERA_CUDA_LAUNCHED();
  if (n_split > 1 && !p.merge_in_block && cluster == 0) {
    launch(ctx.stream(), attention_merge_kernel, dim3(unsigned(a.n_head), unsigned(n_tokens)), 128, 0, p);
    CERA_CUDA_LAUNCHED();
  }
}

}  // namespace cera::ops::cuda
