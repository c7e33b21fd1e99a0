// GEMV kernels for 1..8 tokens per pass (gemv.cu launches them; tools/cuda/gemv_bench.cu times
// the variants). Two families: one warp per row (v2, every type) and several rows per warp (v3:
// the 32-element block types and the plain types), where a lane loads each activation unit once
// and dots it with kRows weight rows, so the activation traffic through L1 per weight byte falls
// by kRows and kRows x kUnroll independent 16-byte weight loads are in flight per lane.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/quant_units.cuh"

namespace cera::ops::cuda::gemv_detail {

constexpr int kWarps = 4;           // rows per block
constexpr int kMaxTokensPass = 8;   // tokens per pass over the weight

// One weight of a launch: Q, K and V (gate and up) share the input and go in one launch of up
// to kMaxGemvParts parts, block ranges [first_block, next part's first_block). With the tail loads
// below: 1B Q4_0 decode 939 -> 1,102 t/s, 8B Q4_0 307 -> 352 (H200): the K/V GEMVs alone filled
// under one block per SM.
struct GemvPart {
  QWeight w;
  float* out;            // token t, row r at out[t * out_stride + r]
  int64_t out_stride;    // floats
  const float* bias;     // [n_out] or null
  int64_t n_out;
  int64_t first_block;
};

struct GemvParams {
  GemvPart part[kMaxGemvParts];
  int32_t n_parts;
  const int8_t* xq;      // quantized activations: token t at xq + t * n_in
  const float2* xds;     // token t at xds + t * n_in / 32
  const float* xf;       // float activations (plain weights): token t at xf + t * xf_stride
  int64_t xf_stride;     // floats
  int64_t n_in;
  int64_t units_per_row;
  int64_t xq2_offset;    // two-term activations (bench only): second code plane at xq + xq2_offset
};

__device__ __forceinline__ const GemvPart& part_of(const GemvParams& p) {
  int i = 0;
  if (p.n_parts > 1 && blockIdx.x >= p.part[1].first_block) i = 1;
  if (p.n_parts > 2 && blockIdx.x >= p.part[2].first_block) i = 2;
  return p.part[i];
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <int B>
__device__ __forceinline__ void store_rows(const GemvPart& p, int64_t row, float (&acc)[B]) {
  const int lane = threadIdx.x & 31;
  for (int t = 0; t < B; ++t) {
    const float v = warp_sum(acc[t]);
    if (lane == 0) p.out[t * p.out_stride + row] = v + (p.bias != nullptr ? p.bias[row] : 0.0f);
  }
}

template <DType T, int B>
__global__ void __launch_bounds__(kWarps * 32) gemv_q_kernel(const __grid_constant__ GemvParams p) {
  using U = Unit<T>;
  constexpr int kUnroll = U::kElems == 32 ? 4 : 2;  // units in flight per lane
  const int lane = threadIdx.x & 31;
  const GemvPart& P = part_of(p);
  const int64_t row = (int64_t(blockIdx.x) - P.first_block) * kWarps + threadIdx.x / 32;
  if (row >= P.n_out) return;
  const int64_t nu = p.units_per_row, base = row * nu;
  ActRow x[B];
  for (int t = 0; t < B; ++t) x[t] = {p.xq + t * p.n_in, p.xds + t * (p.n_in / 32)};
  float acc[B] = {};
  int64_t u = lane;
  for (; u + 32 * (kUnroll - 1) < nu; u += 32 * kUnroll) {
    typename U::Raw r[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) r[k] = U::load(P.w, base + u + 32 * k);
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
#pragma unroll
      for (int t = 0; t < B; ++t) acc[t] += U::dot(r[k], x[t], u + 32 * k);
    }
  }
  // Tail: all of this lane's remaining units loaded before the first dot (short rows, e.g.
  // n_in = 2048, are all tail: 2 loads in flight per lane instead of 1).
  if (u < nu) {
    typename U::Raw r[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      if (u + 32 * k < nu) r[k] = U::load(P.w, base + u + 32 * k);
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      if (u + 32 * k < nu) {
#pragma unroll
        for (int t = 0; t < B; ++t) acc[t] += U::dot(r[k], x[t], u + 32 * k);
      }
    }
  }
  store_rows<B>(P, row, acc);
}

// kVec weights per lane step: 16 bytes' worth when rows are 16-byte aligned, else 1.
template <DType T, int kVec>
__device__ __forceinline__ void load_plain(const uint8_t* row, int64_t i, float (&w)[kVec]) {
  if constexpr (T == DType::kF32) {
    if constexpr (kVec == 4) {
      const float4 v = __ldg(reinterpret_cast<const float4*>(row) + i);
      w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
    } else {
      w[0] = __ldg(reinterpret_cast<const float*>(row) + i);
    }
  } else if constexpr (kVec == 8) {
    const uint4 v = ld16(row + i * 16);
    for (int k = 0; k < 4; ++k) {
      const uint32_t x = word(v, k);
      if constexpr (T == DType::kF16) {
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&x));
        w[2 * k] = f.x; w[2 * k + 1] = f.y;
      } else {
        w[2 * k] = __uint_as_float(x << 16); w[2 * k + 1] = __uint_as_float(x & 0xFFFF0000u);
      }
    }
  } else {
    const uint16_t h = __ldg(reinterpret_cast<const unsigned short*>(row) + i);
    w[0] = T == DType::kF16 ? __half2float(__ushort_as_half(h)) : __uint_as_float(uint32_t(h) << 16);
  }
}

template <DType T, int B, int kVec>
__global__ void __launch_bounds__(kWarps * 32) gemv_f_kernel(const __grid_constant__ GemvParams p) {
  const int lane = threadIdx.x & 31;
  const GemvPart& P = part_of(p);
  const int64_t row = (int64_t(blockIdx.x) - P.first_block) * kWarps + threadIdx.x / 32;
  if (row >= P.n_out) return;
  const uint8_t* wrow = P.w.r0 + row * P.w.row_stride;
  const int64_t nu = p.n_in / kVec;
  float acc[B] = {};
#pragma unroll 4  // 4 independent 16-byte weight loads in flight per lane
  for (int64_t u = lane; u < nu; u += 32) {
    float w[kVec];
    load_plain<T, kVec>(wrow, u, w);
#pragma unroll
    for (int t = 0; t < B; ++t) {
      const float* x = p.xf + t * p.xf_stride + u * kVec;
      if constexpr (kVec == 1) {
        acc[t] += w[0] * __ldg(x);
      } else {
#pragma unroll
        for (int k = 0; k < kVec; k += 4) {
          const float4 v = __ldg(reinterpret_cast<const float4*>(x + k));
          acc[t] += w[k] * v.x + w[k + 1] * v.y + w[k + 2] * v.z + w[k + 3] * v.w;
        }
      }
    }
  }
  store_rows<B>(P, row, acc);
}


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
