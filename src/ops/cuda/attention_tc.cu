// Decode attention over F16 rows on tensor cores (head_dim 64 or 128): up to 16 query heads of a
// GQA group are the rows of m16n8k16 products, so S = Q·Kᵀ and O += P·V for 16 cache entries cost
// a warp 2 x head_dim / 16 + head_dim / 8 mma instructions where the float kernel (attention.cu)
// spends a warp reduction (5 shuffles) per (head, entry). The block stages 64 entries a stage (16 a
// warp) by cp.async, two stages ahead; Q·scale and the softmax weights P are rounded to f16, sums
// are f32, the softmax is online in the log2 domain (as attention_prefill.cu). Decision: the float
// kernel ran at 25 % (F32 rows) and 13 % (F16 rows) of the DRAM bandwidth at depth 4096 (8B shapes,
// ncu), issue-bound on its shuffles with 4 warps a scheduler.
#include <cuda_fp16.h>

#include "ops/cuda/attention_common.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/mma.cuh"

namespace cera::ops::cuda::attn {
namespace {

using namespace mma;

// Stages in flight (one: 8B at depth 4096 386 vs 389 t/s, 1B 1,433 vs 1,451; four, with fill 1 or
// 2, lost at both depths in v10: 1B 1,559 -> 1,520 / 1,497 at depth 4096, 8B 451 -> 349 / 382).
constexpr int kTcStages = 2;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kLog2e = 1.4426950408889634f;

template <int HD>
struct TcGeometry {
  // Halves a staged row: 16 bytes of padding put the 8 rows an ldmatrix phase reads on distinct
  // banks.
  static constexpr int kPitch = HD + 8;
  static constexpr int kStageHalves = 2 * kTcEntries * kPitch;  // K rows, then V rows
  static constexpr size_t kStageBytes = size_t(kTcStages) * kStageHalves * 2;
  static constexpr size_t kMergeBytes = size_t(kAttnWarps) * kTcRows * (HD * 4 + 8);
  static constexpr size_t kSmem = kStageBytes > kMergeBytes ? kStageBytes : kMergeBytes;
};

// Copies the K and V rows of entries e0 .. e0 + kTcEntries - 1 (clamped to hi) into a stage; only
// the entries in [from, to) (after the clamp) when those are given.
template <int HD>
__device__ __forceinline__ void stage_tc(const AttnParams& p, __half* stage, const int32_t* table,
                                         int e0, int hi, int64_t koff, int from = kAllRows,
                                         int to = kNoRows) {
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

template <int HD>
__global__ void __launch_bounds__(kAttnWarps * 32)
    attention_tc_kernel(const __grid_constant__ AttnParams p) {
  using Gm = TcGeometry<HD>;
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
    for (int s = 0; s < kTcStages; ++s) {
      if (s < n_tiles)
        stage_tc<HD>(p, stages + s * Gm::kStageHalves, w.table, w.lo + s * kTcEntries, w.hi, koff,
                     from, to);
      cp_async_commit();
    }
  };
  const int fresh = p.early_rows ? fresh_row(p, w.t) : kAllRows;
  first_stages(kAllRows, fresh);
  pdl_entry();
  if (fresh <= min(w.hi, w.lo + kTcStages * kTcEntries - 1)) first_stages(fresh, kNoRows);
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
    cp_async_wait<kTcStages - 1>();
    __syncthreads();
    const int count = min(kTcEntries, w.hi - (w.lo + j * kTcEntries) + 1);
    if (rw < count) {
      const uint32_t kb = smem_addr(stages + (j % kTcStages) * Gm::kStageHalves);
      const uint32_t vb = kb + 2 * kTcEntries * Gm::kPitch;
      float s[2][4] = {};
#pragma unroll
      for (int kk = 0; kk < HD / 16; ++kk) {
        // Matrices: entries 0-7 d 0-7, 0-7 d 8-15, 8-15 d 0-7, 8-15 d 8-15 of this warp's 16.
        uint32_t b[4];
        ldsm_x4(kb + 2 * ((rw + (lane & 7) + ((lane >> 4) << 3)) * Gm::kPitch +
                          (2 * kk + ((lane >> 3) & 1)) * 8),
                b);
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
      const uint32_t a[4] = {pack_half2(s[0][0], s[0][1]), pack_half2(s[0][2], s[0][3]),
                             pack_half2(s[1][0], s[1][1]), pack_half2(s[1][2], s[1][3])};
#pragma unroll
      for (int dn = 0; dn < HD / 16; ++dn) {
        // Transposed matrices: entries 0-7 d 0-7, entries 8-15 d 0-7, 0-7 d 8-15, 8-15 d 8-15.
        uint32_t b[4];
        ldsm_x4_trans(vb + 2 * ((rw + (lane & 7) + (((lane >> 3) & 1) << 3)) * Gm::kPitch +
                                (2 * dn + (lane >> 4)) * 8),
                      b);
        mma16816(o[2 * dn], a, b[0], b[1]);
        mma16816(o[2 * dn + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();
    if (j + kTcStages < n_tiles) {
      stage_tc<HD>(p, stages + (j % kTcStages) * Gm::kStageHalves, w.table,
                   w.lo + (j + kTcStages) * kTcEntries, w.hi, koff);
    }
    cp_async_commit();
  }
  cp_async_wait<0>();
  // Each warp's accumulators and (max, sum) to shared memory for finish_block (max to the natural
  // log).
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
  finish_block<kTcRows>(p, smem, w);
}

template <int HD>
void launch_attention_tc(CudaContext& ctx, dim3 grid, const AttnParams& p) {
  using Gm = TcGeometry<HD>;
  static const bool raised = [] {  // over 48 KB of dynamic shared memory, three blocks an SM
    CERA_CUDA_CHECK(cudaFuncSetAttribute(attention_tc_kernel<HD>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         int(Gm::kSmem)));
    CERA_CUDA_CHECK(cudaFuncSetAttribute(attention_tc_kernel<HD>,
                                         cudaFuncAttributePreferredSharedMemoryCarveout,
                                         int(cudaSharedmemCarveoutMaxShared)));
    return true;
  }();
  (void)raised;
  launch(ctx.stream(), attention_tc_kernel<HD>, grid, kAttnWarps * 32, Gm::kSmem, p);
}

}  // namespace

void attention_tc(CudaContext& ctx, dim3 grid, const AttnParams& p, int head_dim) {
  head_dim == 64 ? launch_attention_tc<64>(ctx, grid, p) : launch_attention_tc<128>(ctx, grid, p);
}

}  // namespace cera::ops::cuda::attn
