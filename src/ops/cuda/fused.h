// Fused launches for call patterns that graph replay sees (graph.h) and the eager API cannot:
//   add_scaled(A = a + s b) ; rms_norm(H, A) [; matmul(., Q8_0 weight, H)]  -> one kernel
//   rms_norm(H, X) ; matmul(., Q8_0 weight, H)                              -> norm + quantize
//   gated_activation(G, ..) ; matmul(., Q8_0 weight, G)                     -> act + quantize
//   rope(Q) ; rope(K) ; kv_store(K, V)                                      -> one kernel
//   matmul ; matmul [; matmul] on one x (Q/K/V, gate/up)                    -> one GEMV launch
//   gate matmul ; up matmul ; gated_activation (CERA_CUDA_FUSE_GATED=1)      -> one streaming GEMV
//   matmul(H, ., X) ; add_scaled(R, R, H) (O and down + residual)            -> the add in the GEMV
//   rms_norm(H, R), H apart from R: several blocks a row (the norm after that add)
// Each writes every output the separate verbs write, with the same float operations, and leaves
// the quantized activation in the cache (QuantActCache) for the matmuls that follow.
#pragma once

#include <span>

#include "ops/cuda/graph.h"

namespace cera::ops::cuda {

// Launches a fusion of calls[i..] if one applies; returns the number of calls it covered (0: none).
size_t run_fused(CudaContext& ctx, std::span<const Call> calls, size_t i);

}  // namespace cera::ops::cuda
