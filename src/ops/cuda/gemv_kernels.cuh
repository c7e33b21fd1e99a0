// GEMV kernels for 1..8 tokens per pass, one warp per row (gemv.cu launches them;
// tools/cuda/gemv_bench.cu times them against the experiments of tools/cuda/gemv_v3.cuh). A
// multi-row variant (4 rows a warp, each activation unit loaded once for the 4 rows) lost on the
// H200: fewer warps in flight cost more than the re-read activations, which hit L1 (v3 below).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/launch.cuh"
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
  float* res;            // null, or token t, row r at res[t * res_stride + r] += res_scale * out (ResidualAdd)
  int64_t res_stride;    // floats
  float res_scale;
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
  int64_t xq2_offset;    // two-term activations (tools/cuda/gemv_v3.cuh only): second code plane
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

// Token t's output of `row` from its dot product: + bias, stored (and returned), and the residual add.
__device__ __forceinline__ float store_value(const GemvPart& p, int t, int64_t row, float dot) {
  const float v = dot + (p.bias != nullptr ? p.bias[row] : 0.0f);
  p.out[t * p.out_stride + row] = v;
  // As elementwise_kernel's kAddScaled on the stored output.
  if (p.res != nullptr) p.res[t * p.res_stride + row] = __fmaf_rn(p.res_scale, v, p.res[t * p.res_stride + row]);
  return v;
}

template <int B>
__device__ __forceinline__ void store_rows(const GemvPart& p, int64_t row, float (&acc)[B]) {
  const int lane = threadIdx.x & 31;
  for (int t = 0; t < B; ++t) {
    const float v = warp_sum(acc[t]);
    if (lane == 0) store_value(p, t, row, v);
  }
}

// Rows split over kSplit warps of a block (kWarps / kSplit rows a block): each warp reduces its
// piece, then the row's first warp adds the pieces in order and stores. Every warp of the block
// reaches the barrier (rows past n_out compute nothing). kSplit 1: store_rows.
template <int B, int kSplit>
__device__ __forceinline__ void store_split_rows(const GemvPart& p, int64_t row, bool valid, float (&acc)[B]) {
  if constexpr (kSplit == 1) {
    if (valid) store_rows<B>(p, row, acc);
  } else {
    __shared__ float piece_sum[kWarps][B];
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    for (int t = 0; t < B; ++t) {
      const float v = warp_sum(acc[t]);
      if (lane == 0) piece_sum[warp][t] = v;
    }
    __syncthreads();
    if (valid && warp % kSplit == 0 && lane < B) {
      float v = piece_sum[warp][lane];
      for (int k = 1; k < kSplit; ++k) v += piece_sum[warp + k][lane];
      store_value(p, lane, row, v);
    }
  }
}

// A row's unit range for piece `piece` of kSplit.
struct Piece {
  int64_t lo, n;
};
template <int kSplit>
__device__ __forceinline__ Piece piece_of(int64_t nu, int piece) {
  const int64_t lo = nu * piece / kSplit;
  return {lo, nu * (piece + 1) / kSplit - lo};
}

// One weight row (its units base .. base + nu) dotted with B activation rows: per-lane partial
// sums in acc (the caller reduces the warp). Shared by the dense GEMV below and the expert GEMV
// (expert_matmul.cu), which picks its rows and activations on the device.
// kUnroll: units in flight per lane (the default is production's; the bench also times 8).
template <DType T, int B, int kUnroll = Unit<T>::kElems == 32 ? 4 : 2>
__device__ __forceinline__ void q_row_dot(const QWeight& w, int64_t base, int64_t nu, const ActRow (&x)[B],
                                          float (&acc)[B]) {
  using U = Unit<T>;
  const int lane = threadIdx.x & 31;
  int64_t u = lane;
  for (; u + 32 * (kUnroll - 1) < nu; u += 32 * kUnroll) {
    typename U::Raw r[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) r[k] = U::load(w, base + u + 32 * k);
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
      if (u + 32 * k < nu) r[k] = U::load(w, base + u + 32 * k);
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      if (u + 32 * k < nu) {
#pragma unroll
        for (int t = 0; t < B; ++t) acc[t] += U::dot(r[k], x[t], u + 32 * k);
      }
    }
  }
}

// Before pdl_entry (launch.cuh) a warp may only touch its weight row, which no kernel writes:
// asking L2 for the row's first 4 KB starts the DRAM reads while the previous kernel finishes.
__device__ __forceinline__ void prefetch_row(const uint8_t* row, int64_t bytes) {
  const int lane = threadIdx.x & 31;
  for (int64_t off = int64_t(lane) * 128; off < bytes && off < 4096; off += 32 * 128) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(row + off));
  }
}

// kSplit > 1 (32-element units only): a row's units split over kSplit warps, for long rows (e.g. the
// down projection): fewer dependent load rounds per warp, kSplit times the warps in flight.
template <DType T, int B, int kUnroll = Unit<T>::kElems == 32 ? 4 : 2, int kSplit = 1>
__global__ void __launch_bounds__(kWarps * 32) gemv_q_kernel(const __grid_constant__ GemvParams p) {
  static_assert(kSplit == 1 || Unit<T>::kElems == 32);
  const GemvPart& P = part_of(p);
  const int warp = threadIdx.x / 32;
  const int64_t row = (int64_t(blockIdx.x) - P.first_block) * (kWarps / kSplit) + warp / kSplit;
  const bool valid = row < P.n_out;
  if (kSplit == 1 && !valid) return;
  const Piece piece = piece_of<kSplit>(p.units_per_row, warp % kSplit);
  const int64_t base = row * p.units_per_row + piece.lo;
  if (valid) prefetch_row(P.w.r0 + base * Unit<T>::kCodeBytes, piece.n * Unit<T>::kCodeBytes);
  pdl_entry<true>();
  ActRow x[B];
  for (int t = 0; t < B; ++t) x[t] = {p.xq + t * p.n_in + piece.lo * 32, p.xds + t * (p.n_in / 32) + piece.lo};
  float acc[B] = {};
  if (valid) q_row_dot<T, B, kUnroll>(P.w, base, piece.n, x, acc);
  store_split_rows<B, kSplit>(P, row, valid, acc);
}

// 16 bytes of F16 or BF16 weights as 8 floats (shared with the streaming GEMV, gemv_stream.cuh).
template <DType T>
__device__ __forceinline__ void plain8(const uint4& v, float (&w)[8]) {
  for (int k = 0; k < 4; ++k) {
    const uint32_t x = word(v, k);
    if constexpr (T == DType::kF16) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&x));
      w[2 * k] = f.x; w[2 * k + 1] = f.y;
    } else {
      w[2 * k] = __uint_as_float(x << 16); w[2 * k + 1] = __uint_as_float(x & 0xFFFF0000u);
    }
  }
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
    plain8<T>(ld16(row + i * 16), w);
  } else {
    const uint16_t h = __ldg(reinterpret_cast<const unsigned short*>(row) + i);
    w[0] = T == DType::kF16 ? __half2float(__ushort_as_half(h)) : __uint_as_float(uint32_t(h) << 16);
  }
}

// One plain weight row (n_in elements at wrow) dotted with B float activation rows (16-byte
// aligned when kVec > 1): per-lane partial sums, as q_row_dot.
template <DType T, int B, int kVec>
__device__ __forceinline__ void f_row_dot(const uint8_t* wrow, int64_t n_in, const float* const (&x)[B],
                                          float (&acc)[B]) {
  const int lane = threadIdx.x & 31;
  const int64_t nu = n_in / kVec;
#pragma unroll 4  // 4 independent 16-byte weight loads in flight per lane
  for (int64_t u = lane; u < nu; u += 32) {
    float w[kVec];
    load_plain<T, kVec>(wrow, u, w);
#pragma unroll
    for (int t = 0; t < B; ++t) {
      const float* xt = x[t] + u * kVec;
      if constexpr (kVec == 1) {
        acc[t] += w[0] * __ldg(xt);
      } else {
#pragma unroll
        for (int k = 0; k < kVec; k += 4) {
          const float4 v = __ldg(reinterpret_cast<const float4*>(xt + k));
          acc[t] += w[k] * v.x + w[k + 1] * v.y + w[k + 2] * v.z + w[k + 3] * v.w;
        }
      }
    }
  }
}

// kSplit > 1: as gemv_q_kernel's, in units of kVec elements.
template <DType T, int B, int kVec, int kSplit = 1>
__global__ void __launch_bounds__(kWarps * 32) gemv_f_kernel(const __grid_constant__ GemvParams p) {
  constexpr int64_t kElemBytes = T == DType::kF32 ? 4 : 2;
  const GemvPart& P = part_of(p);
  const int warp = threadIdx.x / 32;
  const int64_t row = (int64_t(blockIdx.x) - P.first_block) * (kWarps / kSplit) + warp / kSplit;
  const bool valid = row < P.n_out;
  if (kSplit == 1 && !valid) return;
  const Piece piece = piece_of<kSplit>(p.n_in / kVec, warp % kSplit);
  const uint8_t* wrow = P.w.r0 + row * P.w.row_stride + piece.lo * kVec * kElemBytes;
  if (valid) prefetch_row(wrow, piece.n * kVec * kElemBytes);
  pdl_entry<true>();
  const float* x[B];
  for (int t = 0; t < B; ++t) x[t] = p.xf + t * p.xf_stride + piece.lo * kVec;
  float acc[B] = {};
  if (valid) f_row_dot<T, B, kVec>(wrow, piece.n * kVec, x, acc);
  store_split_rows<B, kSplit>(P, row, valid, acc);
}

}  // namespace cera::ops::cuda::gemv_detail
