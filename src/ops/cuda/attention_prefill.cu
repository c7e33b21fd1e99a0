// Flash attention (FlashAttention-2 style) for prompt batches over the paged KV cache: one block of
// 4 warps per (query head, chunk of 64 consecutive query tokens); each warp owns 16 query rows.
// Q (scaled, f16) stays in shared memory; K/V tiles of kBc entries are gathered through the block
// table into swizzled f16 tiles (F16 rows by cp.async, double-buffered; F32 rows by cp.async into
// a float staging tile that each thread converts itself at the wait point), S = Q·Kᵀ and O += P·V
// are mma.sync m16n8k16 (f16 in, f32 accumulate) and the softmax is online, in f32 registers, in
// the log2 domain. Decision: the block finds the runs of consecutive positions of one sequence in
// its 64 tokens on the device and processes each run in turn (one run for a plain prompt), so the
// launch depends on shapes only and any batch is computed correctly; the host only chooses this
// kernel when runs are long (attention_prefill.h). Heads of a GQA group share K/V through L2.
#include <cuda_fp16.h>

#include <climits>
#include <cstdlib>
#include <type_traits>

#include "ops/cuda/attention_prefill.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/mma.cuh"

namespace cera::ops::cuda {
namespace {

using namespace mma;

constexpr int kBr = 64;  // query tokens per block, 16 per warp
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr float kLog2e = 1.4426950408889634f;

struct PrefillParams {
  PrefillIo io;
  const void* k;  // cache rows of the kernel's type T
  const void* v;
  int64_t k_stride, v_stride;  // elements per cache row
  int32_t n_tokens, block_size, n_group, window;
  float q_scale;  // scale * log2(e) without softcap, scale with it
  float softcap;  // 0: none
  float cap_log2;  // softcap * log2(e)
  bool q_vec;     // q rows and heads 16-byte aligned: float4 loads
  bool out_pairs;  // out 8-byte aligned with even strides: float2 stores
};

// Tile geometry per head_dim. kBc: cache entries per K/V tile (32 at 256 keeps the O accumulators
// and S of a warp within 255 registers).
template <class T, int D>
struct Geometry {
  static constexpr int kBc = D == 256 ? 32 : 64;
  static constexpr int kChunks = D / 8;  // 16-byte f16 chunks per row
  static constexpr int kTileHalves = kBc * D;
  static constexpr bool kF32 = std::is_same_v<T, float>;
  static constexpr int kBufs = kF32 ? 1 : 2;  // F32: the float staging tile is the second buffer
  static constexpr int kLoads = kBc * kChunks / kThreads;  // chunks per thread per K or V tile
  static constexpr int kQLoads = kBr * kChunks / kThreads;
  static constexpr size_t kSmem =
      size_t(kBr * D + 2 * kBufs * kTileHalves) * 2 + (kF32 ? size_t(2 * kTileHalves) * 4 : 0);
  static_assert(kThreads % kChunks == 0 && kLoads * kThreads == kBc * kChunks);
};

// Half offset of 16-byte chunk c of row r in a [rows][D] f16 tile. The XOR swizzle puts the 8 rows
// one ldmatrix phase reads on distinct bank groups (D >= 64: at least 8 chunks per row).
template <int D>
__device__ __forceinline__ int swz(int r, int c) {
  return r * D + ((c ^ (r & 7)) << 3);
}

// T: the cache element (float or __half); D: head_dim (64, 128 or 256).
template <class T, int D>
__global__ void __launch_bounds__(kThreads) attention_prefill_kernel(const __grid_constant__ PrefillParams p) {
  using G = Geometry<T, D>;
  constexpr int kBc = G::kBc, kChunks = G::kChunks;
  pdl_entry();
  extern __shared__ __align__(128) uint8_t smem[];
  __half* qs = reinterpret_cast<__half*>(smem);  // [kBr][D] swizzled
  __half* ks = qs + kBr * D;                     // [kBufs][kBc][D] swizzled
  __half* vs = ks + G::kBufs * G::kTileHalves;   // [kBufs][kBc][D] swizzled
  float* stage = reinterpret_cast<float*>(vs + G::kBufs * G::kTileHalves);  // F32: K, V [kBc][D] plain
  __shared__ int32_t s_pos[kBr], s_seq[kBr];
  __shared__ uint32_t s_starts[2];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int h = blockIdx.x, kvh = h / p.n_group;
  const int chunk = int(gridDim.y - 1 - blockIdx.y);  // later chunks see more entries: start them first
  const int t0 = chunk * kBr, nt = min(kBr, p.n_tokens - t0);

  // The chunk's tokens, and where runs of consecutive positions of one sequence start.
  if (tid < kBr) {
    const bool valid = tid < nt;
    s_pos[tid] = valid ? p.io.positions[t0 + tid] : 0;
    s_seq[tid] = valid ? p.io.token_seq[t0 + tid] : -1;
  }
  // Q rows, scaled and rounded to f16 (rows past the batch are zeros, never stored).
#pragma unroll
  for (int i = 0; i < G::kQLoads; ++i) {
    const int id = tid + kThreads * i, r = id / kChunks, c = id % kChunks;
    float x[8];
    if (r < nt) {
      const float* src = p.io.q + int64_t(t0 + r) * p.io.q_token_stride + int64_t(h) * p.io.q_head_stride + c * 8;
      if (p.q_vec) {
        const float4 a = *reinterpret_cast<const float4*>(src), b = *reinterpret_cast<const float4*>(src + 4);
        x[0] = a.x; x[1] = a.y; x[2] = a.z; x[3] = a.w; x[4] = b.x; x[5] = b.y; x[6] = b.z; x[7] = b.w;
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) x[e] = src[e];
      }
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) x[e] = 0.0f;
    }
    *reinterpret_cast<uint4*>(qs + swz<D>(r, c)) =
        make_uint4(pack_half2(x[0] * p.q_scale, x[1] * p.q_scale), pack_half2(x[2] * p.q_scale, x[3] * p.q_scale),
                   pack_half2(x[4] * p.q_scale, x[5] * p.q_scale), pack_half2(x[6] * p.q_scale, x[7] * p.q_scale));
  }
  __syncthreads();
  if (tid < kBr) {
    const bool start = tid < nt && (tid == 0 || s_seq[tid - 1] != s_seq[tid] || s_pos[tid - 1] + 1 != s_pos[tid]);
    const uint32_t mask = __ballot_sync(0xffffffffu, start);
    if (lane == 0) s_starts[warp] = mask;
  }
  __syncthreads();
  uint64_t rest = uint64_t(s_starts[0]) | (uint64_t(s_starts[1]) << 32);

  const T* cache_k = static_cast<const T*>(p.k) + int64_t(kvh) * D;
  const T* cache_v = static_cast<const T*>(p.v) + int64_t(kvh) * D;
  const uint32_t q_base = smem_addr(qs), k_base = smem_addr(ks), v_base = smem_addr(vs);
  const int row_a = 16 * warp + (lane >> 2);  // this thread's accumulator rows: row_a, row_a + 8
  const int col = 2 * (lane & 3);             // and columns col, col + 1 of every 8-wide n tile

  while (rest != 0) {
    const int rb = __ffsll(static_cast<long long>(rest)) - 1;
    rest &= rest - 1;
    const int re = rest != 0 ? __ffsll(static_cast<long long>(rest)) - 1 : nt;  // run: rows [rb, re)
    const int pos_b = s_pos[rb], hi = s_pos[re - 1];
    const int lo = p.window > 0 ? max(0, pos_b - p.window + 1) : 0;
    const int first_hi = p.window > 0 ? hi - p.window + 1 : 0;  // entries below it are hidden from some row
    const int32_t* table = p.io.block_tables + p.io.table_offset[s_seq[rb]];
    const int n_tiles = (hi - lo) / kBc + 1;
    // Positions of this thread's rows (rows outside the run compute garbage that is never stored).
    const int pos_a = pos_b + (row_a - rb), pos_a8 = pos_a + 8;
    const int first_a = p.window > 0 ? pos_a - p.window + 1 : INT_MIN;
    const int first_a8 = p.window > 0 ? pos_a8 - p.window + 1 : INT_MIN;

    // Issues the cp.async copies of tile entries e0 .. e0 + kBc - 1 (clamped to hi: entries past
    // hi are masked for every row) of K or V into buffer buf.
    auto load_tile = [&](const T* cache, int64_t stride, int e0, __half* buf, float* stg) {
#pragma unroll
      for (int i = 0; i < G::kLoads; ++i) {
        const int r = tid / kChunks + i * (kThreads / kChunks), c = tid % kChunks;
        const int e = min(e0 + r, hi);
        const int64_t slot = int64_t(table[e / p.block_size]) * p.block_size + e % p.block_size;
        const T* src = cache + slot * stride + c * 8;
        if constexpr (G::kF32) {
          const uint32_t dst = smem_addr(stg + r * D + c * 8);
          cp_async16(dst, src);
          cp_async16(dst + 16, src + 4);
        } else {
          cp_async16(smem_addr(buf + swz<D>(r, c)), src);
        }
      }
    };
    // F32: this thread's own staged chunks -> f16 tile (no barrier needed: same thread copied them).
    auto convert_tile = [&](const float* stg, __half* buf) {
      if constexpr (G::kF32) {
#pragma unroll
        for (int i = 0; i < G::kLoads; ++i) {
          const int r = tid / kChunks + i * (kThreads / kChunks), c = tid % kChunks;
          const float4 a = *reinterpret_cast<const float4*>(stg + r * D + c * 8);
          const float4 b = *reinterpret_cast<const float4*>(stg + r * D + c * 8 + 4);
          *reinterpret_cast<uint4*>(buf + swz<D>(r, c)) =
              make_uint4(pack_half2(a.x, a.y), pack_half2(a.z, a.w), pack_half2(b.x, b.y), pack_half2(b.z, b.w));
        }
      }
    };

    float o[D / 8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

    load_tile(cache_k, p.k_stride, lo, ks, stage);
    cp_async_commit();
    load_tile(cache_v, p.v_stride, lo, vs, stage + G::kTileHalves);
    cp_async_commit();
    for (int j = 0; j < n_tiles; ++j) {
      const int e0 = lo + j * kBc, buf = G::kF32 ? 0 : (j & 1), nbuf = G::kF32 ? 0 : ((j + 1) & 1);
      const bool more = j + 1 < n_tiles;
      cp_async_wait<1>();  // K_j landed (V_j may still be in flight)
      convert_tile(stage, ks);
      __syncthreads();

      // S = Q·K_jᵀ for this warp's 16 rows: [kBc / 8 n tiles][4].
      float s[kBc / 8][4];
#pragma unroll
      for (int n = 0; n < kBc / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
      const uint32_t kb = k_base + 2 * buf * G::kTileHalves;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t a[4];
        // Matrices: rows 0-7 d 0-7, rows 8-15 d 0-7, rows 0-7 d 8-15, rows 8-15 d 8-15 (a0..a3).
        ldsm_x4(q_base + 2 * swz<D>(16 * warp + (lane & 15), 2 * kk + (lane >> 4)), a);
#pragma unroll
        for (int nj = 0; nj < kBc / 16; ++nj) {
          // Matrices: entries 0-7 d 0-7, 0-7 d 8-15, 8-15 d 0-7, 8-15 d 8-15.
          uint32_t b[4];
          ldsm_x4(kb + 2 * swz<D>(16 * nj + (lane & 7) + ((lane >> 4) << 3), 2 * kk + ((lane >> 3) & 1)), b);
          mma16816(s[2 * nj], a, b[0], b[1]);
          mma16816(s[2 * nj + 1], a, b[2], b[3]);
        }
      }
      if (more) {
        load_tile(cache_k, p.k_stride, e0 + kBc, ks + nbuf * G::kTileHalves, stage);
        cp_async_commit();
      }

      // Softcap, mask, online softmax (log2 domain). Element (n, e) of s: row row_a (e < 2) or
      // row_a + 8, entry e0 + 8 n + col + (e & 1).
      if (p.softcap > 0.0f) {
        const float inv = 1.0f / p.softcap;
#pragma unroll
        for (int n = 0; n < kBc / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[n][e] = p.cap_log2 * tanhf(s[n][e] * inv);
      }
      if (e0 + kBc - 1 > pos_b || e0 < first_hi) {
#pragma unroll
        for (int n = 0; n < kBc / 8; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int ent = e0 + 8 * n + col + (e & 1);
            const bool visible = e < 2 ? (ent <= pos_a && ent >= first_a) : (ent <= pos_a8 && ent >= first_a8);
            if (!visible) s[n][e] = -INFINITY;
          }
        }
      }
      online_softmax(s, m, l, o);  // l: this thread's columns only; the quad is summed at the end

      if (more) {
        cp_async_wait<1>();  // V_j landed (K_j+1 may still be in flight)
      } else {
        cp_async_wait<0>();
      }
      convert_tile(stage + G::kTileHalves, vs);
      __syncthreads();

      // O += P·V_j: P's accumulator layout is the A fragment layout of m16n8k16 (two n tiles of S
      // per 16-entry k step).
      const uint32_t vb = v_base + 2 * buf * G::kTileHalves;
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) {
        const uint32_t a[4] = {pack_half2(s[2 * kk][0], s[2 * kk][1]), pack_half2(s[2 * kk][2], s[2 * kk][3]),
                               pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                               pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
        for (int dn = 0; dn < D / 16; ++dn) {
          // Transposed matrices: entries 0-7 d 0-7, entries 8-15 d 0-7, 0-7 d 8-15, 8-15 d 8-15.
          uint32_t b[4];
          ldsm_x4_trans(vb + 2 * swz<D>(16 * kk + (lane & 7) + (((lane >> 3) & 1) << 3), 2 * dn + (lane >> 4)), b);
          mma16816(o[2 * dn], a, b[0], b[1]);
          mma16816(o[2 * dn + 1], a, b[2], b[3]);
        }
      }
      if (more) {
        load_tile(cache_v, p.v_stride, e0 + kBc, vs + nbuf * G::kTileHalves, stage + G::kTileHalves);
        cp_async_commit();
      }
    }

    // O / l for the run's rows.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float sum = quad_sum(l[r]);
      const int row = row_a + 8 * r;
      if (row < rb || row >= re) continue;
      const float inv = 1.0f / sum;  // > 0: every row sees at least its own entry
      float* dst = p.io.out + int64_t(t0 + row) * p.io.out_token_stride + int64_t(h) * p.io.out_head_stride + col;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        const float x0 = o[n][2 * r] * inv, x1 = o[n][2 * r + 1] * inv;
        if (p.out_pairs) {
          *reinterpret_cast<float2*>(dst + 8 * n) = make_float2(x0, x1);
        } else {
          dst[8 * n] = x0;
          dst[8 * n + 1] = x1;
        }
      }
    }
    __syncthreads();  // the next run's first copies overwrite tiles other warps may still read
  }
}

// Instantiated: T in {float, __half} x D in {64, 128, 256}. The dynamic shared-memory limit is
// raised on the first call, which may be a graph's record pass (nothing launched, not capturing).
template <class T, int D>
void launch_prefill(CudaContext& ctx, dim3 grid, const PrefillParams& p) {
  using G = Geometry<T, D>;
  static bool smem_raised = false;  // one device per process
  if (!smem_raised) {
    CERA_CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         int(G::kSmem)));
    smem_raised = true;
  }
  if (ctx.launching()) launch(ctx.stream(), attention_prefill_kernel<T, D>, grid, kThreads, G::kSmem, p);
}

template <class T>
void launch_prefill(CudaContext& ctx, dim3 grid, const PrefillParams& p, int head_dim) {
  switch (head_dim) {
    case 64: return launch_prefill<T, 64>(ctx, grid, p);
    case 128: return launch_prefill<T, 128>(ctx, grid, p);
    default: return launch_prefill<T, 256>(ctx, grid, p);
  }
}

bool prefill_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("CERA_CUDA_ATTN_PREFILL");
    return e == nullptr || std::atoi(e) != 0;
  }();
  return on;
}

// Runs of consecutive positions of one sequence, counted per 64-token chunk as the kernel finds them.
int64_t count_runs(const AttentionBatch& batch) {
  int64_t runs = 0;
  for (size_t t = 0; t < batch.positions.size(); ++t) {
    runs += t % kBr == 0 || batch.token_seq[t] != batch.token_seq[t - 1] ||
            batch.positions[t] != batch.positions[t - 1] + 1;
  }
  return runs;
}

}  // namespace

bool attention_prefill(CudaContext& ctx, const PrefillIo& io, const KvLayer& layer, const AttentionBatch& batch,
                       const AttentionParams& a) {
  const auto n_tokens = static_cast<int64_t>(batch.positions.size());
  if (!prefill_enabled() || n_tokens <= kGemvMaxTokens) return false;
  if (a.head_dim != 64 && a.head_dim != 128 && a.head_dim != 256) return false;
  const int64_t n_chunks = (n_tokens + kBr - 1) / kBr;
  // Mostly long runs (a prompt, chunked prompts): at most two runs per chunk on average. Batches
  // of many single decode tokens keep the split-context kernel, which handles them one per block.
  if (count_runs(batch) > 2 * n_chunks) return false;
  const bool f16 = layer.k.dtype == DType::kF16;
  const int64_t elem = f16 ? 2 : 4, vec = 16 / elem;
  const int64_t k_stride = layer.k.stride() / elem, v_stride = layer.v.stride() / elem;
  if (k_stride % vec != 0 || v_stride % vec != 0 || reinterpret_cast<uintptr_t>(layer.k.data) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(layer.v.data) % 16 != 0) {
    return false;
  }
  CERA_CHECK_MSG(n_chunks < 65536 && a.n_head < 65536, "attention: too many tokens or heads for one launch");
  PrefillParams p{};
  p.io = io;
  p.k = layer.k.data;
  p.v = layer.v.data;
  p.k_stride = k_stride;
  p.v_stride = v_stride;
  p.n_tokens = int32_t(n_tokens);
  p.block_size = layer.block_size;
  p.n_group = a.n_head / a.n_head_kv;
  p.window = a.sliding_window;
  p.softcap = a.softcap;
  p.q_scale = a.softcap > 0.0f ? a.scale : a.scale * kLog2e;
  p.cap_log2 = a.softcap * kLog2e;
  p.q_vec = io.q_token_stride % 4 == 0 && io.q_head_stride % 4 == 0 && reinterpret_cast<uintptr_t>(io.q) % 16 == 0;
  p.out_pairs =
      io.out_token_stride % 2 == 0 && io.out_head_stride % 2 == 0 && reinterpret_cast<uintptr_t>(io.out) % 8 == 0;
  const dim3 grid(unsigned(a.n_head), unsigned(n_chunks));
  if (f16) {
    launch_prefill<__half>(ctx, grid, p, a.head_dim);
  } else {
    launch_prefill<float>(ctx, grid, p, a.head_dim);
  }
  if (ctx.launching()) CERA_CUDA_LAUNCHED();
  return true;
}

}  // namespace cera::ops::cuda
