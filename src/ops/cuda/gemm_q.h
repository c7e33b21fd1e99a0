// The tensor-core GEMM of the prefill path (gemm_q.cu): out = x · Wᵀ (+ bias) with the weight
// dequantized tile by tile inside the kernel. Internal to src/ops/cuda.
#pragma once

#include "ops/cuda/cuda_context.h"
#include "ops/cuda/weight_layout.h"

namespace cera::ops::cuda {

// Can gemm_q() take this weight? Every supported type but F32; plain F16/BF16 need n_in % 8 == 0
// and 16-byte aligned rows (matmul keeps cuBLAS for the rest).
bool gemm_q_supports(const TensorView& weight);

// out[n_out, n_tokens] = x[n_in, n_tokens] · weight[n_in, n_out]ᵀ (+ bias[n_out]); views already
// validated by matmul(). Activations are converted to f16 (bf16 for BF16 weights) into kGemmX
// scratch; enqueued on ctx.stream(), eager or capture mode.
void gemm_q(CudaContext& ctx, const TensorView& out, const TensorView& weight, const TensorView& x,
            const TensorView* bias);

// Test hook, host only: decodes chunk j (elements 32j .. 32j+31) of `row` of a weight held in
// host memory in the GPU layout (w's pointers are host pointers) exactly as the kernel does.
void gemm_q_decode_chunk_host(DType dtype, const QWeight& w, int64_t row, int64_t j, int64_t n_in, float (&out)[32]);

}  // namespace cera::ops::cuda
