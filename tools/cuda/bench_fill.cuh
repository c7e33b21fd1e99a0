// Deterministic device fill for the CUDA microbenchmarks (gemv_bench, gemv_chain_bench): random
// bytes for codes, or small random f16 values for scales and f16 weights.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda/cuda_context.h"

namespace cera::tools {

struct FillParams {
  uint8_t* p;
  int64_t n;  // bytes
  uint32_t seed;
  int mode;   // 0: random bytes, 1: random f16 in +-[2^-7, 2^-6) (scales / f16 weights)
};
__global__ void fill_kernel(const __grid_constant__ FillParams f) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i * 2 < f.n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ f.seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;
    uint16_t v = f.mode == 0 ? uint16_t(h) : uint16_t(0x2000u | (h & 0x83FFu));  // exp 8: 2^-7
    reinterpret_cast<uint16_t*>(f.p)[i] = v;
  }
}
inline void fill(void* p, int64_t n, uint32_t seed, int mode) {
  fill_kernel<<<1024, 256>>>({static_cast<uint8_t*>(p), n, seed, mode});
  CERA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cera::tools
