// Kernel launches with programmatic dependent launch (PDL, sm_90): a kernel may be scheduled while
// the one before it on the stream is still finishing, so its launch latency and ramp-up overlap
// the previous kernel's tail instead of following it (a decode step is ~300 small dependent
// kernels; captured graphs keep these programmatic edges).
// The contract, for every kernel launched with launch(): its first access to memory that an
// earlier kernel writes (or reads, before overwriting it) comes after pdl_entry(), which waits
// until the previous grid has completed and its writes are visible, then lets the next kernel be
// scheduled. Only data no kernel writes (weights, host-uploaded positions) may be touched before
// it: gemv prefetches its weight rows to L2, the fused norm loads its weight vector, the RoPE
// kernels compute their angles (rope_angles, act_quant.cuh). One exception, argued where it is
// made: attention copies the cache rows of earlier steps, which the kernels still running
// (the K/V store just before it) do not write (attention_common.cuh, fresh_row).
// A kernel launched without the attribute (cuBLAS's) makes the next one wait as usual.
// CERA_CUDA_PDL=0 launches without the attribute (pdl_entry() then returns at once): for A/B runs.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "ops/cuda/cuda_context.h"

namespace cera::ops::cuda {

// CERA_CUDA_ABLATE (build-time, for measurements only; results are garbage): 1 ends every kernel
// but the GEMVs (kGemv) at its PDL entry, 2 every kernel, so that a decode step's time splits into
// the GEMVs, the other kernels and the chain of launches itself (docs/benchmarks/cuda.md v8).
#ifndef CERA_CUDA_ABLATE
#define CERA_CUDA_ABLATE 0
#endif
template <bool kGemv = false>
__device__ __forceinline__ void pdl_entry() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" :::);
#if CERA_CUDA_ABLATE
  if (CERA_CUDA_ABLATE == 2 || !kGemv) asm volatile("exit;");
#endif
}

bool pdl_enabled();  // launch.cu

template <typename... Params, typename... Args>
void launch(cudaStream_t stream, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = pdl_enabled() ? 1 : 0;
  CERA_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace cera::ops::cuda
