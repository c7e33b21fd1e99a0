// The tensor-parallel embedding's device side (graph.h's kEmbedSlice): embed() of rows that may
// be -1, which give zero rows (another rank holds those tokens; the ranks' sum is the whole
// embedding). The host computes the rows (CudaBackend::embed_slice), so the kernel is embed's.
#pragma once

#include <span>

#include "ops/cuda/cuda_context.h"

namespace cera::ops::cuda {

void embed_rows_or_zero(CudaContext& ctx, const TensorView& out, const TensorView& table,
                        std::span<const int32_t> rows, float scale);

}  // namespace cera::ops::cuda
