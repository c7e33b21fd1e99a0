// Row-wise and elementwise verbs: rms_norm and layer_norm (one block per row), activation,
// gated_activation, add_scaled,
// scale (one thread per 4 elements over strided rows where they allow it, else per element). They
// move n_embd or n_ff floats per token, small next to the matmuls; the float order follows the CPU
// reference ((x * inv) * w).
#include <cuda_fp16.h>

#include <algorithm>

#include "ops/cuda/act_quant.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gemm_rows.h"
#include "ops/cuda/launch.cuh"

namespace cera::ops::cuda {
namespace {

struct RowsView {
  float* data;
  int64_t stride;  // floats
};
RowsView rows_of(const TensorView& v) { return {reinterpret_cast<float*>(v.data), v.stride() / 4}; }

struct RmsNormParams {
  RowsView out, x;
  const float* weight;
  int64_t n;
  float eps;
};

__global__ void rms_norm_kernel(const __grid_constant__ RmsNormParams p) {
  pdl_entry();
  __shared__ float partial[32];
  const int64_t r = blockIdx.x;
  const float* x = p.x.data + r * p.x.stride;
  float* out = p.out.data + r * p.out.stride;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) sum += x[i] * x[i];
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x < 32) {
    sum = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (threadIdx.x == 0) partial[0] = sum;
  }
  __syncthreads();
  const float inv = 1.0f / sqrtf(partial[0] / float(p.n) + p.eps);
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) out[i] = x[i] * inv * p.weight[i];
}

// Sum over the block of one value per thread (blockDim.x a multiple of 32, at most 1024).
__device__ float block_sum(float v, float* partial) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // partial may still be read from a previous call
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0) partial[32] = v;
  }
  __syncthreads();
  return partial[32];
}

struct LayerNormParams {
  RowsView out, x;
  const float* weight;
  const float* bias;
  int64_t n;
  float eps;
};

// One block per row; two passes (mean, then centred squares) as the CPU reference does, so a
// row with a large mean does not cancel. out may alias x: each thread reads its own elements
// before writing them.
__global__ void layer_norm_kernel(const __grid_constant__ LayerNormParams p) {
  pdl_entry();
  __shared__ float partial[33];
  const int64_t r = blockIdx.x;
  const float* x = p.x.data + r * p.x.stride;
  float* out = p.out.data + r * p.out.stride;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) sum += x[i];
  const float mean = block_sum(sum, partial) / float(p.n);
  float sq = 0.0f;
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) sq += (x[i] - mean) * (x[i] - mean);
  const float inv = 1.0f / sqrtf(block_sum(sq, partial) / float(p.n) + p.eps);
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) out[i] = (x[i] - mean) * inv * p.weight[i] + p.bias[i];
}

enum class Elementwise : uint8_t { kSilu, kGeluTanh, kGeluErf, kAddScaled, kScale, kActSilu, kActGeluTanh, kActGeluErf };

__device__ __forceinline__ float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f)); }

struct ElementwiseParams {
  RowsView out, a, b;
  int64_t cols;
  int64_t n;  // cols * rows
  float s;
  Elementwise op;
  bool vec4;            // cols and every stride multiples of 4, rows 16-byte aligned: 4 elements a thread
  uint16_t* out_f16;    // null, or [rows][cols] packed: the output also rounded to f16 (prompt GEMM input)
};

__device__ __forceinline__ float apply(const ElementwiseParams& p, float a, float b) {
  switch (p.op) {
    case Elementwise::kSilu: return silu_gated(a, b);
    case Elementwise::kGeluTanh: return gelu_tanh(a) * b;
    case Elementwise::kGeluErf: return gelu_erf(a) * b;
    case Elementwise::kActSilu: return a / (1.0f + expf(-a));
    case Elementwise::kActGeluTanh: return gelu_tanh(a);
    case Elementwise::kActGeluErf: return gelu_erf(a);
    case Elementwise::kAddScaled: return __fmaf_rn(p.s, b, a);  // fused.cu: same
    default: return a * p.s;
  }
}

__host__ __device__ constexpr bool unary(Elementwise op) {
  return op == Elementwise::kScale || op == Elementwise::kActSilu || op == Elementwise::kActGeluTanh ||
         op == Elementwise::kActGeluErf;
}

// vec4: one 16-byte load per operand and thread (the scalar form moved ~2.2 TB/s on the 8B
// prompt's SwiGLU, ncu).
__global__ void elementwise_kernel(const __grid_constant__ ElementwiseParams p) {
  pdl_entry();
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p.vec4) {
    const int64_t i = 4 * t;
    if (i >= p.n) return;
    const int64_t r = i / p.cols, c = i % p.cols;
    const float4 a = *reinterpret_cast<const float4*>(p.a.data + r * p.a.stride + c);
    const float4 b = unary(p.op) ? a : *reinterpret_cast<const float4*>(p.b.data + r * p.b.stride + c);
    const float4 v = make_float4(apply(p, a.x, b.x), apply(p, a.y, b.y), apply(p, a.z, b.z), apply(p, a.w, b.w));
    *reinterpret_cast<float4*>(p.out.data + r * p.out.stride + c) = v;
    if (p.out_f16 != nullptr) {
      const __half2 lo = __floats2half2_rn(v.x, v.y), hi = __floats2half2_rn(v.z, v.w);
      *reinterpret_cast<uint2*>(p.out_f16 + i) =
          make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
    }
    return;
  }
  if (t >= p.n) return;
  const int64_t r = t / p.cols, c = t % p.cols;
  const float a = p.a.data[r * p.a.stride + c];
  const float v = apply(p, a, unary(p.op) ? a : p.b.data[r * p.b.stride + c]);
  p.out.data[r * p.out.stride + c] = v;
  if (p.out_f16 != nullptr) p.out_f16[t] = __half_as_ushort(__float2half_rn(v));
}

void check_same_shape(const TensorView& a, const TensorView& b, const char* what) {
  CERA_CHECK_MSG(a.cols() == b.cols() && a.rows() == b.rows(), std::string(what) + ": shape mismatch");
}

bool rows_vec4(const RowsView& v) { return v.stride % 4 == 0 && reinterpret_cast<uintptr_t>(v.data) % 16 == 0; }

void launch_elementwise(CudaContext& ctx, ElementwiseParams p) {
  p.vec4 = p.cols % 4 == 0 && rows_vec4(p.out) && rows_vec4(p.a) && rows_vec4(p.b);
  if (p.n == 0 || !ctx.launching()) return;
  launch(ctx.stream(), elementwise_kernel, ceil_div(p.vec4 ? p.n / 4 : p.n, 256), 256, 0, p);
  CERA_CUDA_LAUNCHED();
}

}  // namespace

void rms_norm(CudaContext& ctx, const TensorView& out, const TensorView& x, const TensorView& weight, float eps) {
  check_f32_device(out, "rms_norm out");
  check_f32_device(x, "rms_norm x");
  check_f32_device(weight, "rms_norm weight");
  check_same_shape(out, x, "rms_norm");
  const int64_t n = x.cols();
  CERA_CHECK(weight.n_elements() == n && weight.packed());
  if (x.rows() == 0 || n == 0) return;
  RmsNormParams p{rows_of(out), rows_of(x), reinterpret_cast<const float*>(weight.data), n, eps};
  const unsigned threads = n >= 1024 ? 512 : (n >= 256 ? 256 : 32 * ceil_div(n, 32));
  CERA_CHECK_MSG(x.rows() < (int64_t{1} << 31), "rms_norm: too many rows");
  if (!ctx.launching()) return;
  launch(ctx.stream(), rms_norm_kernel, unsigned(x.rows()), threads, 0, p);
  CERA_CUDA_LAUNCHED();
}

void gated_activation(CudaContext& ctx, const TensorView& out, const TensorView& gate, const TensorView& up,
                      Activation act) {
  check_f32_device(out, "gated_activation out");
  check_f32_device(gate, "gated_activation gate");
  check_f32_device(up, "gated_activation up");
  check_same_shape(out, gate, "gated_activation");
  check_same_shape(out, up, "gated_activation");
  ElementwiseParams p{rows_of(out), rows_of(gate), rows_of(up), out.cols(), out.n_elements(), 0.0f,
                      act == Activation::kSilu       ? Elementwise::kSilu
                      : act == Activation::kGeluTanh ? Elementwise::kGeluTanh
                                                     : Elementwise::kGeluErf};
  // A batch's activation feeds the down projection's gemm_rows or prompt GEMM, which reads it as
  // f16: written here too, and cached as that matmul's converted input (matmul.cu), one pass over
  // the rows less (sized in record mode too, so that a captured replay finds the scratch).
  const bool for_gemm = out.rows() >= std::min(rows_min(), kGemvMaxTokens + 1) && out.cols() % 8 == 0;
  if (for_gemm) p.out_f16 = static_cast<uint16_t*>(ctx.scratch(ScratchKind::kGemmX, uint64_t(out.n_elements()) * 2));
  launch_elementwise(ctx, p);
  if (for_gemm && ctx.launching()) ctx.act_cache() = {out.data, out.stride(), out.cols(), out.rows(), kActF16};
}

void activation(CudaContext& ctx, const TensorView& out, const TensorView& x, Activation act) {
  check_f32_device(out, "activation out");
  check_f32_device(x, "activation x");
  check_same_shape(out, x, "activation");
  const Elementwise op = act == Activation::kSilu       ? Elementwise::kActSilu
                         : act == Activation::kGeluTanh ? Elementwise::kActGeluTanh
                                                        : Elementwise::kActGeluErf;
  launch_elementwise(ctx, {rows_of(out), rows_of(x), rows_of(x), out.cols(), out.n_elements(), 0.0f, op});
}

void layer_norm(CudaContext& ctx, const TensorView& out, const TensorView& x, const TensorView& weight,
                const TensorView& bias, float eps) {
  check_f32_device(out, "layer_norm out");
  check_f32_device(x, "layer_norm x");
  check_f32_device(weight, "layer_norm weight");
  check_f32_device(bias, "layer_norm bias");
  check_same_shape(out, x, "layer_norm");
  const int64_t n = x.cols();
  CERA_CHECK(weight.n_elements() == n && weight.packed() && bias.n_elements() == n && bias.packed());
  if (x.rows() == 0 || n == 0) return;
  LayerNormParams p{rows_of(out), rows_of(x), reinterpret_cast<const float*>(weight.data),
                    reinterpret_cast<const float*>(bias.data), n, eps};
  const unsigned threads = n >= 1024 ? 512 : (n >= 256 ? 256 : 32 * ceil_div(n, 32));
  CERA_CHECK_MSG(x.rows() < (int64_t{1} << 31), "layer_norm: too many rows");
  if (!ctx.launching()) return;
  launch(ctx.stream(), layer_norm_kernel, unsigned(x.rows()), threads, 0, p);
  CERA_CUDA_LAUNCHED();
}

void add_scaled(CudaContext& ctx, const TensorView& out, const TensorView& a, const TensorView& b, float s) {
  check_f32_device(out, "add_scaled out");
  check_f32_device(a, "add_scaled a");
  check_f32_device(b, "add_scaled b");
  check_same_shape(out, a, "add_scaled");
  check_same_shape(out, b, "add_scaled");
  launch_elementwise(ctx, {rows_of(out), rows_of(a), rows_of(b), out.cols(), out.n_elements(), s,
                           Elementwise::kAddScaled});
}

void scale(CudaContext& ctx, const TensorView& x, float s) {
  check_f32_device(x, "scale x");
  launch_elementwise(ctx, {rows_of(x), rows_of(x), rows_of(x), x.cols(), x.n_elements(), s, Elementwise::kScale});
}

}  // namespace cera::ops::cuda
