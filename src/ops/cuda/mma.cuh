// Tensor-core and asynchronous-copy primitives (sm_80 instruction forms, run on sm_90a):
// mma.sync m16n8k16 with f16 (or bf16) operands and f32 accumulators, ldmatrix, cp.async. Used by
// the attention kernels and the prompt GEMM (gemm_q.cu). Fragment layouts
// (PTX ISA, "Matrix Fragments for mma.m16n8k16"), with g = lane / 4 and c = 2 (lane % 4):
//   A (16 x 16, row-major): a0 = row g, cols c, c+1; a1 = row g+8; a2 = row g, cols c+8, c+9; a3 = row g+8, cols c+8, c+9
//   B (16 x 8, "col"):      b0 = rows c, c+1 of col g;  b1 = rows c+8, c+9 of col g
//   C/D (16 x 8, f32):      d0, d1 = row g, cols c, c+1;  d2, d3 = row g+8, cols c, c+1
// so an f32 accumulator tile packed to f16 pairs is the A fragment of the next product.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace cera::ops::cuda::mma {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
// As cp_async16, but only the first src_bytes (0 or 16) are read; the rest of the 16 are zeros.
__device__ __forceinline__ void cp_async16_zfill(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// c += a · b (f16 operands, or bf16 with kBf16; f32 accumulators).
template <bool kBf16 = false>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}
__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);  // lo in the low 16 bits
  return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ float fast_exp2(float x) {  // ex2.approx: 2^-inf = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The sum over the quad of lanes that share an accumulator row (lanes 4g .. 4g + 3).
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// One online-softmax step of flash attention on accumulator tiles: s holds the scores of kN
// 8-column tiles (log2 domain, -inf where masked) of this thread's rows g and g + 8 (m16n8
// layout); m, l: the rows' running max and this thread's part of the running sum (the quad of
// lanes sharing a row sums its parts at the end); o: kO 8-column output tiles, rescaled. s becomes
// P = 2^(s - max), ready to be packed as the A fragment of O += P·V.
template <int kN, int kO>
__device__ __forceinline__ void online_softmax(float (&s)[kN][4], float (&m)[2], float (&l)[2], float (&o)[kO][4]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float mx = m[r];
#pragma unroll
    for (int n = 0; n < kN; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float ref = mx == -INFINITY ? 0.0f : mx;  // a row that has seen nothing yet
    const float corr = fast_exp2(m[r] - ref);
    m[r] = mx;
    float sum = 0.0f;
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      s[n][2 * r] = fast_exp2(s[n][2 * r] - ref);
      s[n][2 * r + 1] = fast_exp2(s[n][2 * r + 1] - ref);
      sum += s[n][2 * r] + s[n][2 * r + 1];
    }
    l[r] = l[r] * corr + sum;
#pragma unroll
    for (int n = 0; n < kO; ++n) {
      o[n][2 * r] *= corr;
      o[n][2 * r + 1] *= corr;
    }
  }
}

}  // namespace cera::ops::cuda::mma
