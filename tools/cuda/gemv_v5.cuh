// GEMV experiments of v5 (docs/benchmarks/cuda.md), timed by gemv_bench against v2 (production):
//   v5-loop: only as many blocks as fit on the GPU at once; each warp walks rows (row += all warps
//            of the grid), so there is no block turnover and no partly filled last wave.
//   v5-loop2: the same with two rows a warp in flight (both rows' weight loads issued before the
//            first dot): twice the bytes in flight per warp for the registers of a second row.
// One part only (the bench's launches have one weight).
#pragma once

#include "ops/cuda/gemv_kernels.cuh"

namespace cera::ops::cuda::gemv_detail {

// R weight rows (units base[r] .. + nu) dotted with B activation rows, every row's loads of a step
// issued before the dots of that step.
template <DType T, int B, int R, int kUnroll = Unit<T>::kElems == 32 ? 4 : 2>
__device__ __forceinline__ void q_rows_dot(const QWeight& w, const int64_t (&base)[R], int64_t nu,
                                           const ActRow (&x)[B], float (&acc)[R][B]) {
  using U = Unit<T>;
  const int lane = threadIdx.x & 31;
  for (int64_t u = lane; u < nu; u += 32 * kUnroll) {
    typename U::Raw raw[R][kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (u + 32 * k < nu) raw[r][k] = U::load(w, base[r] + u + 32 * k);
      }
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      if (u + 32 * k < nu) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
          for (int t = 0; t < B; ++t) acc[r][t] += U::dot(raw[r][k], x[t], u + 32 * k);
        }
      }
    }
  }
}

template <DType T, int B, int R>
__global__ void __launch_bounds__(kWarps * 32) gemv_loop_q_kernel(const __grid_constant__ GemvParams p) {
  const GemvPart& P = p.part[0];
  const int64_t nu = p.units_per_row;
  const int64_t warps = int64_t(gridDim.x) * kWarps;
  const int64_t first = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (first < P.n_out) prefetch_row(P.w.r0 + first * nu * Unit<T>::kCodeBytes, nu * Unit<T>::kCodeBytes);
  pdl_entry();
  ActRow x[B];
  for (int t = 0; t < B; ++t) x[t] = {p.xq + t * p.n_in, p.xds + t * (p.n_in / 32)};
  for (int64_t row = first; row < P.n_out; row += warps * R) {
    int64_t base[R];
#pragma unroll
    for (int r = 0; r < R; ++r) base[r] = min(row + r * warps, P.n_out - 1) * nu;  // clamped: loads only
    float acc[R][B] = {};
    q_rows_dot<T, B, R>(P.w, base, nu, x, acc);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (row + r * warps < P.n_out) store_rows<B>(P, row + r * warps, acc[r]);
    }
  }
}

}  // namespace cera::ops::cuda::gemv_detail
