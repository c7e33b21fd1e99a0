// Hopper warpgroup MMA (wgmma, sm_90a) primitives for the prefill GEMM's wgmma variant (gemm_q.cu,
// CERA_CUDA_GEMM_Q=wgmma): shared-memory descriptors of K-major tiles with the 128-byte swizzle,
// the m64n128k16 f16/bf16 product with f32 accumulators, and the fences the asynchronous product
// needs. Layouts (PTX ISA 8.0, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"):
//   A (64 x 16, K-major) and B (128 x 16, K-major: N rows of K) are read from shared memory
//   through their descriptors; the four warps of the warpgroup each hold 16 rows of D:
//   d[4j + 0, 1] = row 16 w + lane / 4, columns 8 j + 2 (lane % 4) + {0, 1}; d[4j + 2, 3] = 8 rows on
//   (the m16n8 accumulator layout of mma.cuh, repeated for the 16 8-column tiles).
#pragma once

#include <cstdint>

namespace cera::ops::cuda::wgmma {

// A K-major tile of 128-byte rows (64 halves) with the 128-byte swizzle: 16-byte chunk c of row r
// at r * 128 + ((c ^ (r % 8)) * 16) from a 1024-byte aligned base. Bits 0-13: address / 16;
// 16-29: leading byte offset / 16 (unused by swizzled K-major tiles: 1); 32-45: stride byte
// offset / 16 (8 rows, 1024 bytes); 62-63: swizzle (1 = 128 bytes). Adding 2 advances the tile
// 16 halves along K (the hardware applies the swizzle to the computed address).
__device__ __forceinline__ uint64_t desc_k128(uint32_t smem_addr) {
  return uint64_t((smem_addr & 0x3FFFFu) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}

// Orders this warpgroup's register accesses before the products that follow.
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Waits until at most N committed groups of products are in flight.
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// This thread's shared-memory writes (st.shared, cp.async) made visible to the products' async proxy.
__device__ __forceinline__ void fence_smem_writes() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// Pins the accumulators: the compiler may not move them while a product writes them.
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The 64 accumulator registers of one m64n128 product, as asm operands %0 .. %63 (both forms below).
#define CERA_WGMMA_D_REGS \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define CERA_WGMMA_D_OPERANDS(d) \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// d += A · Bᵀ for one 16-wide step of K: A 64 x 16 at descriptor a, B 128 x 16 at descriptor b
// (scale-d, a predicate, is true: the product accumulates onto d).
template <bool kBf16>
__device__ __forceinline__ void mma_m64n128k16(float (&d)[64], uint64_t a, uint64_t b) {
  if constexpr (kBf16) {
    asm volatile("{\n.reg .pred acc;\nsetp.ne.b32 acc, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " CERA_WGMMA_D_REGS
                 ", %64, %65, acc, 1, 1, 0, 0;\n}\n"
                 : CERA_WGMMA_D_OPERANDS(d)
                 : "l"(a), "l"(b), "r"(1));
  } else {
    asm volatile("{\n.reg .pred acc;\nsetp.ne.b32 acc, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " CERA_WGMMA_D_REGS
                 ", %64, %65, acc, 1, 1, 0, 0;\n}\n"
                 : CERA_WGMMA_D_OPERANDS(d)
                 : "l"(a), "l"(b), "r"(1));
  }
}

#undef CERA_WGMMA_D_OPERANDS
#undef CERA_WGMMA_D_REGS

}  // namespace cera::ops::cuda::wgmma
