// Kernel experiments timed by gemv_bench.cu, not used by the backend (STYLE.md 10: versions
// live here until one wins). v3: several rows per warp, each activation unit loaded once for
// kRows rows, weights streamed past L1. Result on the H200 (docs/benchmarks/cuda.md, v3):
// slower than v2 on every 8B shape at 1 token (down 4096x14336 Q4_0: 25.3 vs 12.3 us), since a
// quarter of the warps leaves too few loads in flight; the two-term variant measures what a
// second activation plane costs.
#pragma once

#include "ops/cuda/gemv_kernels.cuh"

namespace cera::ops::cuda::gemv_detail {

// ---- v3: several rows per warp --------------------------------------------------------------
// Rows of one warp: row0 .. row0 + kRows - 1 (clamped to the last row for loads; only valid rows
// are stored). Lane walks units u = lane + 32 j; per step it issues kRows x kUnroll weight loads
// (codes streamed past L1, ld16_stream), then per unit loads the B activation units once and
// dots them with the kRows rows.
constexpr int kRows = 4;

template <int R, int B>
__device__ __forceinline__ void store_rows_multi(const GemvPart& p, int64_t row0, float (&acc)[R][B]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int t = 0; t < B; ++t) {
      const float v = warp_sum(acc[r][t]);
      if (lane == 0 && row0 + r < p.n_out) {
        p.out[t * p.out_stride + row0 + r] = v + (p.bias != nullptr ? p.bias[row0 + r] : 0.0f);
      }
    }
  }
}

// kTerms = 2: activations as x = d1 q1 + d2 q2 (q2 = the residual quantized with its own scale;
// second code plane at xq + xq2_offset); measured in tools/cuda/gemv_bench.cu only.
template <DType T, int B, int kTerms = 1>
__global__ void __launch_bounds__(kWarps * 32) gemv_rows_q_kernel(const __grid_constant__ GemvParams p) {
  using U = Unit<T>;
  static_assert(U::kElems == 32, "multi-row GEMV: 32-element block types");
  constexpr int kUnroll = sizeof(typename U::Raw) > 24 ? 1 : 2;  // Q8_0: two 16-byte loads a unit
  const int lane = threadIdx.x & 31;
  const GemvPart& P = part_of(p);
  const int64_t row0 = ((int64_t(blockIdx.x) - P.first_block) * kWarps + threadIdx.x / 32) * kRows;
  if (row0 >= P.n_out) return;
  const int64_t nu = p.units_per_row;
  int64_t base[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) base[r] = (row0 + r < P.n_out ? row0 + r : P.n_out - 1) * nu;
  float acc[kRows][B] = {};
  for (int64_t u = lane; u < nu; u += 32 * kUnroll) {
    typename U::Raw w[kUnroll][kRows];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const int64_t uk = u + 32 * k < nu ? u + 32 * k : u;  // tail: reload u (cached), skipped below
#pragma unroll
      for (int r = 0; r < kRows; ++r) w[k][r] = U::load_stream(P.w, base[r] + uk);
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      if (u + 32 * k >= nu) break;
#pragma unroll
      for (int t = 0; t < B; ++t) {
        const ActRow xr{p.xq + t * p.n_in, p.xds + t * (p.n_in / 32)};
        const XUnit x = load_x(xr, u + 32 * k);
        if constexpr (kTerms == 1) {
#pragma unroll
          for (int r = 0; r < kRows; ++r) acc[r][t] += U::dotx(w[k][r], x);
        } else {
          const ActRow xr2{p.xq + p.xq2_offset + t * p.n_in, p.xds + p.xq2_offset / 32 + t * (p.n_in / 32)};
          const XUnit x2 = load_x(xr2, u + 32 * k);
#pragma unroll
          for (int r = 0; r < kRows; ++r) acc[r][t] += U::dotx(w[k][r], x) + U::dotx(w[k][r], x2);
        }
      }
    }
  }
  store_rows_multi<kRows, B>(P, row0, acc);
}

// Plain types with 16-byte-aligned rows: kRows rows x 2 steps of 16-byte weight loads per lane,
// each 8 (4 for F32) float activations loaded once for the kRows rows.
template <DType T, int B>
__global__ void __launch_bounds__(kWarps * 32) gemv_rows_f_kernel(const __grid_constant__ GemvParams p) {
  constexpr int kVec = T == DType::kF32 ? 4 : 8;
  constexpr int kUnroll = 2;
  const int lane = threadIdx.x & 31;
  const GemvPart& P = part_of(p);
  const int64_t row0 = ((int64_t(blockIdx.x) - P.first_block) * kWarps + threadIdx.x / 32) * kRows;
  if (row0 >= P.n_out) return;
  const uint8_t* wrow[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) wrow[r] = P.w.r0 + (row0 + r < P.n_out ? row0 + r : P.n_out - 1) * P.w.row_stride;
  const int64_t nu = p.n_in / kVec;
  float acc[kRows][B] = {};
  for (int64_t u = lane; u < nu; u += 32 * kUnroll) {
    uint4 raw[kUnroll][kRows];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const int64_t uk = u + 32 * k < nu ? u + 32 * k : u;
#pragma unroll
      for (int r = 0; r < kRows; ++r) raw[k][r] = ld16_stream(wrow[r] + uk * 16);
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      if (u + 32 * k >= nu) break;
#pragma unroll
      for (int t = 0; t < B; ++t) {
        const float4* xv = reinterpret_cast<const float4*>(p.xf + t * p.xf_stride + (u + 32 * k) * kVec);
        float x[kVec];
#pragma unroll
        for (int i = 0; i < kVec / 4; ++i) {
          const float4 v = __ldg(xv + i);
          x[4 * i] = v.x; x[4 * i + 1] = v.y; x[4 * i + 2] = v.z; x[4 * i + 3] = v.w;
        }
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float s = 0.0f;
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const uint32_t wd = word(raw[k][r], i);
            if constexpr (T == DType::kF32) {
              s += __uint_as_float(wd) * x[i];
            } else if constexpr (T == DType::kF16) {
              const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&wd));
              s += f.x * x[2 * i] + f.y * x[2 * i + 1];
            } else {
              s += __uint_as_float(wd << 16) * x[2 * i] + __uint_as_float(wd & 0xFFFF0000u) * x[2 * i + 1];
            }
          }
          acc[r][t] += s;
        }
      }
    }
  }
  store_rows_multi<kRows, B>(P, row0, acc);
}

}  // namespace cera::ops::cuda::gemv_detail
