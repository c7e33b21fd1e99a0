// embed: gathers table rows by token id into float32 rows, times a scale. Block formats go
// through dequant32 (one thread per 32 weights); plain tables (including device activations,
// which the output head gathers by row) one thread per element. The kernels always read the ids
// from device memory: embed stages the host's, embed_ids takes a device view's (pipelined decode
// feeds the id top_k wrote), so an id the host never checked out of range gives a zero row.
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/embed_slice.h"
#include "ops/cuda/quant_units.cuh"
#include "ops/cuda/launch.cuh"

namespace cera::ops::cuda {
namespace {

struct EmbedParams {
  QWeight table;
  const int32_t* tokens;
  float* out;
  int64_t out_stride;  // floats
  int64_t n_embd;
  int64_t units_per_row;  // 32-element chunks (block formats) or elements (plain types)
  int64_t n_tokens;
  int64_t n_vocab;
  float scale;
};

template <DType T>
__global__ void embed_q_kernel(const __grid_constant__ EmbedParams p) {
  pdl_entry();
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t t = blockIdx.y;
  if (j >= p.units_per_row) return;
  const int32_t id = p.tokens[t];
  float* dst = p.out + t * p.out_stride + j * 32;
  if (id < 0 || id >= p.n_vocab) {
    for (int i = 0; i < 32; ++i) dst[i] = 0.0f;
    return;
  }
  float v[32];
  dequant32<T>(p.table, id, j, v);
  for (int i = 0; i < 32; ++i) dst[i] = v[i] * p.scale;
}

template <DType T>
__global__ void embed_plain_kernel(const __grid_constant__ EmbedParams p) {
  pdl_entry();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t t = blockIdx.y;
  if (i >= p.n_embd) return;
  const int32_t id = p.tokens[t];
  if (id < 0 || id >= p.n_vocab) {
    p.out[t * p.out_stride + i] = 0.0f;
    return;
  }
  const uint8_t* row = p.table.r0 + int64_t(id) * p.table.row_stride;
  float v;
  if constexpr (T == DType::kF32) {
    v = reinterpret_cast<const float*>(row)[i];
  } else if constexpr (T == DType::kF16) {
    v = __half2float(reinterpret_cast<const __half*>(row)[i]);
  } else {
    v = __uint_as_float(uint32_t(reinterpret_cast<const uint16_t*>(row)[i]) << 16);
  }
  p.out[t * p.out_stride + i] = v * p.scale;
}

using EmbedKernel = void (*)(EmbedParams);
EmbedKernel embed_kernel(DType t) {
  switch (t) {
    case DType::kF32: return embed_plain_kernel<DType::kF32>;
    case DType::kF16: return embed_plain_kernel<DType::kF16>;
    case DType::kBF16: return embed_plain_kernel<DType::kBF16>;
    case DType::kQ4_0: return embed_q_kernel<DType::kQ4_0>;
    case DType::kQ4_1: return embed_q_kernel<DType::kQ4_1>;
    case DType::kQ5_0: return embed_q_kernel<DType::kQ5_0>;
    case DType::kQ5_1: return embed_q_kernel<DType::kQ5_1>;
    case DType::kQ8_0: return embed_q_kernel<DType::kQ8_0>;
    case DType::kQ4_K: return embed_q_kernel<DType::kQ4_K>;
    case DType::kQ5_K: return embed_q_kernel<DType::kQ5_K>;
    case DType::kQ6_K: return embed_q_kernel<DType::kQ6_K>;
    default: return nullptr;
  }
}

// The checks and launch shared by embed and embed_ids; `tokens` is device memory (or, in record
// mode, whatever ctx.device_array returned), n_tokens of them.
void embed_launch(CudaContext& ctx, const TensorView& out, const TensorView& table, const int32_t* tokens,
                  int64_t n_tokens, float scale) {
  check_f32_device(out, "embed out");
  CERA_CHECK_MSG(table.device == Device::kCuda, "embed: table is not a CUDA tensor");
  const EmbedKernel kernel = embed_kernel(table.dtype);
  CERA_CHECK_MSG(kernel != nullptr, "embed: no CUDA kernel for table type " + std::string(dtype_name(table.dtype)));
  const int64_t n_embd = table.cols(), n_vocab = table.rows();
  CERA_CHECK_MSG(out.cols() == n_embd && out.rows() == n_tokens, "embed: out shape mismatch");
  const bool plain = dtype_block_size(table.dtype) == 1;
  CERA_CHECK_MSG(plain || table.packed(), "embed: quantized CUDA tables must be whole imported tensors");
  if (n_tokens == 0 || n_embd == 0) return;
  EmbedParams p{};
  p.table = qweight_of(table.dtype, table.data, n_embd, n_vocab, table.stride());
  p.tokens = tokens;
  p.out = reinterpret_cast<float*>(out.data);
  p.out_stride = out.stride() / 4;
  p.n_embd = n_embd;
  p.units_per_row = plain ? n_embd : n_embd / 32;
  p.n_tokens = n_tokens;
  p.n_vocab = n_vocab;
  p.scale = scale;
  const unsigned threads = plain ? 256 : 64;
  if (!ctx.launching()) return;
  launch(ctx.stream(), kernel, dim3(ceil_div(p.units_per_row, threads), unsigned(n_tokens)), threads, 0, p);
  CERA_CUDA_LAUNCHED();
}

}  // namespace

void embed(CudaContext& ctx, const TensorView& out, const TensorView& table, std::span<const int32_t> tokens,
           float scale) {
  for (int32_t id : tokens) CERA_CHECK_MSG(id >= 0 && id < table.rows(), "embed: token id out of range");
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  embed_launch(ctx, out, table, n_tokens > 0 ? ctx.device_array(tokens) : nullptr, n_tokens, scale);
}

void embed_rows_or_zero(CudaContext& ctx, const TensorView& out, const TensorView& table,
                        std::span<const int32_t> rows, float scale) {
  for (int32_t r : rows) CERA_CHECK_MSG(r >= -1 && r < table.rows(), "embed_slice: row out of range");
  const auto n_tokens = static_cast<int64_t>(rows.size());
  embed_launch(ctx, out, table, n_tokens > 0 ? ctx.device_array(rows) : nullptr, n_tokens, scale);  // -1: a zero row
}

void embed_ids(CudaContext& ctx, const TensorView& out, const TensorView& table, const TensorView& ids,
               float scale) {
  CERA_CHECK_MSG(ids.device == Device::kCuda && ids.dtype == DType::kI32 && ids.packed(),
                 "embed_ids: ids must be a packed I32 CUDA tensor");
  embed_launch(ctx, out, table, reinterpret_cast<const int32_t*>(ids.data), ids.n_elements(), scale);
}

}  // namespace cera::ops::cuda
