// The tensor-core attention of prompt batches (attention_prefill.cu), called by attention()
// (attention.cu) after it has validated the batch and uploaded its host arrays.
#pragma once

#include "ops/cuda/cuda_ops.h"

namespace cera::ops::cuda {

// Device pointers and float strides of one attention() call, as attention.cu resolved them.
struct PrefillIo {
  const float* q;  // element (token t, head h, d) at q[t * q_token_stride + h * q_head_stride + d]
  int64_t q_token_stride, q_head_stride;
  float* out;  // same addressing
  int64_t out_token_stride, out_head_stride;
  const int32_t* positions;     // [n_tokens] device copies of the batch's arrays
  const int32_t* token_seq;     // [n_tokens]
  const int32_t* block_tables;  // all sequences' tables
  const int32_t* table_offset;  // [n_seqs + 1]
};

// Launches the flash-attention kernel for this batch and returns true, or returns false having
// launched nothing when the batch or shape does not suit it: head_dim not 64/128/256, at most
// kGemvMaxTokens tokens, rows that are not 16-byte aligned, query tokens that are mostly not
// runs of consecutive positions of one sequence (decode-like batches: the split-context kernel
// is faster there), or CERA_CUDA_ATTN_PREFILL=0. Preconditions: attention()'s checks passed.
// Which kernel runs depends on the host arrays' contents; the kernel itself is correct for any
// contents (it finds the runs on the device), so a graph replayed with other positions stays right.
bool attention_prefill(CudaContext& ctx, const PrefillIo& io, const KvLayer& layer, const AttentionBatch& batch,
                       const AttentionParams& a);

}  // namespace cera::ops::cuda
