// Attention over the paged KV cache (F32 or F16 rows), for decode and for the prompt batches that
// the tensor-core kernel (attention_prefill.cu) does not take. Two kernels share the split grid and
// the merges (attention_common.cuh): F16 rows at head_dim 64/128 go to attention_tc_kernel
// (attention_tc.cu: mma.sync, up to 16 query heads a block), the rest to the float kernel here:
// one block of 4 warps per (kv head, group chunk of <= 8 query heads, token, context split). The
// block copies its cache rows into shared memory by cp.async, two stages ahead; each warp takes 4
// entries of a stage at a time, the group's query heads share every K/V row it reads, and the
// online softmax state is merged across warps in shared memory. When (tokens x kv heads) cannot
// fill the GPU (decode), the context is split and the last split of each (head group, token) to
// finish merges the splits' partial results (an arrival counter per group and token). The split
// count depends on shapes only and each token derives its split length from its own position on the
// device, so a decode step's launch parameters do not change with the position and a captured graph
// replays unchanged (graph.h). F16 rows are converted to float as they are read from shared memory;
// the math is float32 for both row types.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>
#include <vector>
#include <string>

#include "ops/cuda/attention_common.cuh"
#include "ops/cuda/attention_prefill.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/mma.cuh"

namespace cera::ops::cuda {
namespace {

using namespace mma;
using namespace attn;

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
  static constexpr int kEntries =
      kRaw < 8 ? 8 : (kRaw > 64 ? 64 : kRaw);       // rows of K (and V) per stage
  static constexpr int kPer = 16 / int(sizeof(T));  // elements per 16-byte chunk
};

// Row pitch in shared memory, elements: head_dim rounded up to 8 (16-byte rows for F16, 32 for
// F32).
__host__ __device__ inline int32_t stage_pitch(int32_t head_dim) {
  return (head_dim + 7) / 8 * 8;
}

// Copies the K and V rows of entries e0 .. e0 + kEntries - 1 (clamped to hi: rows past hi are
// masked by the readers) of this block's kv head into a stage: [kEntries][pitch] of K, then of V;
// only the entries in [from, to) (after the clamp) when those are given.
// Aligned rows (vec_rows) go by cp.async; others element by element through registers (odd
// head_dim with F16 rows: correct, not fast).
template <class T, int D>
__device__ __forceinline__ void stage_rows(const AttnParams& p, T* stage, const int32_t* table,
                                           int e0, int hi, int64_t koff, int from = kAllRows,
                                           int to = kNoRows) {
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
        x[d] = v.x;
        x[d + 1] = v.y;
        x[d + 2] = v.z;
        x[d + 3] = v.w;
      }
      return;
    } else if constexpr (D == 2) {
      const float2 v = *reinterpret_cast<const float2*>(r + lane * D);
      x[0] = v.x;
      x[1] = v.y;
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
        w[0] = raw.x;
        w[1] = raw.y;
        w[2] = raw.z;
        w[3] = raw.w;
      } else if constexpr (D == 4) {
        const uint2 raw = *reinterpret_cast<const uint2*>(r + lane * D);
        w[0] = raw.x;
        w[1] = raw.y;
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

// T: the cache element (float or __half). D: elements of a head per lane (head_dim <= 32 D).
// G: query heads per block (4 or kMaxGroup): q and the accumulators of G heads live in registers,
// so the common GQA group of 4 (Llama 3 8B / 1B shapes) instantiates G = 4 and keeps occupancy.
// Dynamic shared memory: the stages (attention_smem()), reused by the merge of the warps after the
// loop.
template <class T, int D, int G>
__global__ void __launch_bounds__(kAttnWarps * 32)
    attention_kernel(const __grid_constant__ AttnParams p) {
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
      if (s < n_tiles)
        stage_rows<T, D>(p, stages + s * stage_elems, w.table, w.lo + s * S::kEntries, w.hi, koff,
                         from, to);
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
      qr[g][d] = g < w.ng && i < p.head_dim
                     ? p.q.data[w.t * p.q.token_stride + (w.h0 + g) * p.q.head_stride + i]
                     : 0.0f;
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
      stage_rows<T, D>(p, stages + (j % kStages) * stage_elems, w.table,
                       w.lo + (j + kStages) * S::kEntries, w.hi, koff);
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

HeadsView heads_of(const TensorView& v, int64_t head_dim, int64_t n_head, int64_t n_tokens,
                   const char* what) {
  check_f32_device(v, what);
  const bool per_head =
      v.cols() == head_dim && v.rows() == n_head * n_tokens && (n_head == 1 || v.packed());
  const bool per_token = v.cols() == n_head * head_dim && v.rows() == n_tokens;
  CERA_CHECK_MSG(per_head || per_token,
                 std::string(what) + ": expected [head_dim, n_head, n_tokens]");
  const int64_t s = v.stride() / 4;
  if (v.cols() == head_dim) return {reinterpret_cast<float*>(v.data), n_head * s, s};
  return {reinterpret_cast<float*>(v.data), s, head_dim};
}

// Dynamic shared memory of attention_kernel<T, D, G>: the stages, or the merge of the warps
// (accumulators and (max, sum) pairs) that reuses them, whichever is larger.
template <class T, int D, int G>
size_t attention_smem(int32_t head_dim) {
  const size_t stages =
      size_t(kStages) * 2 * Staging<T, D>::kEntries * stage_pitch(head_dim) * sizeof(T);
  const size_t merge = size_t(kAttnWarps) * G * (head_dim * sizeof(float) + sizeof(float2));
  return std::max(stages, merge);
}

template <class T, int D, int G>
void launch_attention(CudaContext& ctx, dim3 grid, const AttnParams& p) {
  // Four blocks an SM (the register limit) need ~4 x 33 KB of shared memory: ask for the largest
  // carveout once (the default left ~100 KB, three blocks).
  static const bool carveout = [] {
    CERA_CUDA_CHECK(cudaFuncSetAttribute(attention_kernel<T, D, G>,
                                         cudaFuncAttributePreferredSharedMemoryCarveout,
                                         int(cudaSharedmemCarveoutMaxShared)));
    return true;
  }();
  (void)carveout;
  launch(ctx.stream(), attention_kernel<T, D, G>, grid, kAttnWarps * 32,
         attention_smem<T, D, G>(p.head_dim), p);
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
               const AttentionBatch& batch_in, const AttentionParams& a) {
  // Bidirectional (encoders): the causal kernels with each token's sequence end as its position.
  CERA_CHECK_MSG(a.causal || a.sliding_window == 0, "attention: a sliding window needs causal attention");
  std::vector<int32_t> last;
  AttentionBatch batch = batch_in;
  if (!a.causal) {
    last = bidirectional_last(batch_in);
    batch.positions = last;
  }
  CERA_CHECK_MSG(layer.k.device == Device::kCuda && layer.v.device == Device::kCuda,
                 "attention: kv layer not on CUDA");
  CERA_CHECK_MSG(layer.k.dtype == layer.v.dtype &&
                     (layer.k.dtype == DType::kF32 || layer.k.dtype == DType::kF16),
                 "attention: kv layer K and V must both be F32 or both F16, got " +
                     std::string(dtype_name(layer.k.dtype)) + " and " +
                     std::string(dtype_name(layer.v.dtype)));
  CERA_CHECK(layer.k.cols() == layer.v.cols() && layer.k.rows() == layer.v.rows() &&
             layer.block_size > 0);
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
    CERA_CHECK_MSG(pos >= 0 && pos / layer.block_size < t1 - t0,
                   "attention: position beyond the sequence's block table");
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
  // Prompt batches: the tensor-core flash-attention kernel (attention_prefill.cu) when it suits
  // them.
  if (n_tokens > kGemvMaxTokens && !batch_invariant()) {
    const PrefillIo io{.q = p.q.data,
                       .q_token_stride = p.q.token_stride,
                       .q_head_stride = p.q.head_stride,
                       .out = p.out.data,
                       .out_token_stride = p.out.token_stride,
                       .out_head_stride = p.out.head_stride,
                       .positions = p.positions,
                       .token_seq = p.token_seq,
                       .block_tables = p.block_tables,
                       .table_offset = p.table_offset};
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
  const bool tc = f16 && tc_on && (a.head_dim == 64 || a.head_dim == 128) &&
                  layer.k.stride() % 16 == 0 && layer.v.stride() % 16 == 0 &&
                  reinterpret_cast<uintptr_t>(p.k) % 16 == 0 &&
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
  // Batch-invariant: the splits of one token's context must not depend on the other tokens.
  const int64_t units = int64_t(a.n_head_kv) * p.n_chunks * (batch_invariant() ? 1 : n_tokens);
  int64_t n_split = 1;
  if (units < fill * ctx.sm_count()) {
    n_split = std::min<int64_t>((fill * ctx.sm_count() + units - 1) / units, kMaxSplits);
  }
  // Vector loads need every lane's first element aligned to its load: 4 floats (16 bytes) or 8
  // halves (16 bytes) cover every D.
  const int64_t vec_elems = f16 ? 8 : 4;
  p.vec_rows = a.head_dim % vec_elems == 0 && p.k_stride % vec_elems == 0 &&
               p.v_stride % vec_elems == 0 && reinterpret_cast<uintptr_t>(p.k) % 16 == 0 &&
               reinterpret_cast<uintptr_t>(p.v) % 16 == 0;
  p.n_split = int32_t(n_split);
  const dim3 grid(unsigned(a.n_head_kv * p.n_chunks), unsigned(n_tokens), unsigned(n_split));
  // CERA_CUDA_ATTN_MERGE=kernel: the splits merged by a second kernel (the v4 path), for A/B runs.
  static const bool merge_kernel = [] {
    const char* e = std::getenv("CERA_CUDA_ATTN_MERGE");
    return e != nullptr && std::string(e) == "kernel";
  }();
  p.merge_in_block = !merge_kernel;
  // The tensor-core kernel's splits are one 64-entry stage at least, so that all 4 warps of a
  // block work on a short context: 8B depth 0 472 -> 480 t/s, 1B 1,732 -> 1,777, depth 4096
  // unchanged (same call, through CERA_CUDA_ATTN_MINSPLIT, which overrides both kernels' minimum).
  static const int32_t min_split_env = [] {
    const char* e = std::getenv("CERA_CUDA_ATTN_MINSPLIT");
    const int v = e != nullptr ? std::atoi(e) : 0;
    return v >= 1 ? v : 0;
  }();
  p.min_split = min_split_env > 0 ? min_split_env : tc ? kTcEntries : kMinSplitLen;
  p.early_rows = attention_early_mode() >= 1 && n_tokens <= kGemvMaxTokens && !batch_invariant();
  if (n_split > 1) {
    const int64_t n_part = n_tokens * a.n_head * n_split;
    auto* buf = static_cast<float*>(
        ctx.scratch(ScratchKind::kAttnPartial, uint64_t(n_part) * (a.head_dim + 2) * 4));
    p.partial_acc = buf;
    p.partial_ml = reinterpret_cast<float2*>(buf + n_part * a.head_dim);
    p.arrivals = static_cast<int32_t*>(
        ctx.zeroed_scratch(ScratchKind::kAttnArrivals, uint64_t(n_tokens) * grid.x * 4));
  }
  CERA_CHECK_MSG(n_tokens < 65536, "attention: at most 65535 tokens per call");
  if (!ctx.launching()) return;
  if (tc) {
    attention_tc(ctx, grid, p, a.head_dim);
  } else if (f16) {
    group_cap == 4 ? launch_attention<__half, 4>(ctx, grid, p, a.head_dim)
                   : launch_attention<__half, kMaxGroup>(ctx, grid, p, a.head_dim);
  } else {
    group_cap == 4 ? launch_attention<float, 4>(ctx, grid, p, a.head_dim)
                   : launch_attention<float, kMaxGroup>(ctx, grid, p, a.head_dim);
  }
  CERA_CUDA_LAUNCHED();
  if (n_split > 1 && !p.merge_in_block) {
    launch(ctx.stream(), attention_merge_kernel, dim3(unsigned(a.n_head), unsigned(n_tokens)), 128,
           0, p);
    CERA_CUDA_LAUNCHED();
  }
}

}  // namespace cera::ops::cuda
