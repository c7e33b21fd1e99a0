// Backend::mask_logits on the device: one thread per 32 ids of a masked row reads its mask word
// and writes -inf over the ids whose bits are clear. The masks and row indexes are host arrays
// staged like every verb's (device_array: the graph arena in a replayed step), so a masked step
// adds one small kernel and no synchronisation between the forward and top_k.
#include <cmath>

#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/launch.cuh"

namespace cera::ops::cuda {
namespace {

struct MaskParams {
  float* logits;          // [n_rows][n_vocab]
  const uint32_t* masks;  // [n_masked][n_words]
  const int32_t* rows;    // [n_masked]
  int64_t n_vocab, n_words;
};

__global__ void mask_logits_kernel(const __grid_constant__ MaskParams p) {
  pdl_entry();
  const int64_t w = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (w >= p.n_words) return;
  const int64_t i = blockIdx.y;
  const uint32_t bits = p.masks[i * p.n_words + w];
  if (bits == ~0u) return;
  float* row = p.logits + int64_t(p.rows[i]) * p.n_vocab;
  const int64_t end = w * 32 + 32 < p.n_vocab ? w * 32 + 32 : p.n_vocab;
  for (int64_t id = w * 32; id < end; ++id) {
    if (((bits >> (id & 31)) & 1u) == 0) row[id] = -INFINITY;
  }
}

}  // namespace

void mask_logits(CudaContext& ctx, const TensorView& logits, std::span<const uint32_t> masks,
                 std::span<const int32_t> rows) {
  check_f32_device(logits, "mask_logits logits");
  CERA_CHECK_MSG(logits.packed(), "mask_logits: logits must be packed");
  const int64_t n_vocab = logits.cols(), n_words = (n_vocab + 31) / 32;
  CERA_CHECK_MSG(masks.size() == rows.size() * size_t(n_words), "mask_logits: one mask of ceil(n_vocab / 32) words a row");
  for (int32_t r : rows) CERA_CHECK_MSG(r >= 0 && r < logits.rows(), "mask_logits: a row outside the logits");
  if (rows.empty()) return;
  const std::span<const int32_t> words(reinterpret_cast<const int32_t*>(masks.data()), masks.size());
  MaskParams p{.logits = reinterpret_cast<float*>(logits.data),
               .masks = reinterpret_cast<const uint32_t*>(ctx.device_array(words)),
               .rows = ctx.device_array(rows),
               .n_vocab = n_vocab,
               .n_words = n_words};
  if (!ctx.launching()) return;
  constexpr int kThreads = 256;
  const dim3 grid{unsigned((n_words + kThreads - 1) / kThreads), unsigned(rows.size()), 1u};
  launch(ctx.stream(), mask_logits_kernel, grid, kThreads, 0, p);
  CERA_CUDA_LAUNCHED();
}

}  // namespace cera::ops::cuda
