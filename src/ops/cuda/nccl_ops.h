// The collectives' device side (graph.h's kAllReduce and kAllGatherCols), run by execute() in
// the context's mode: nothing is launched while a call is only being validated (OpMode::kRecord).
#pragma once

#include "ops/cuda/cuda_context.h"

namespace cera::ops::cuda {

// x = the sum of every rank's x (ncclAllReduce in place on ctx's stream). comm: an ncclComm_t.
void nccl_all_reduce(CudaContext& ctx, const TensorView& x, const void* comm);
// whole[n_ranks * part.cols(), rows] = the ranks' parts side by side: ncclAllGather into
// `staging` ([n_ranks][rows][part cols], rank-major as NCCL concatenates), then a kernel that
// interleaves the ranks' columns row by row.
void nccl_all_gather_cols(CudaContext& ctx, const TensorView& whole, const TensorView& part,
                          const TensorView& staging, const void* comm);

}  // namespace cera::ops::cuda
