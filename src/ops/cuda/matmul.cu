// matmul entry (validation, then the path of the batch: gemm_rows.h's matmul_path) and the prefill
// path. Above gemm_rows' rows (and above kGemvMaxTokens where it cannot take the weight), by default (and for F32 weights and plain rows gemm_q cannot read) the
// path kept here runs: the weight dequantized to an f16 copy in scratch (plain F16/BF16 used
// in place), activations converted to f16/bf16, and cuBLAS with float accumulation, at the cost
// of one extra write+read of the weight in f16 per call (docs/benchmarks/cuda.md), made one GEMM
// ahead on a side stream where the order of the weights is known (dequant_ahead.h);
// CERA_CUDA_GEMM=mma runs the tensor-core GEMM of gemm_q.cu, which dequantizes inside the kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/dequant_ahead.h"
#include "ops/cuda/gemm_q.cuh"
#include "ops/cuda/gemm_q.h"
#include "ops/cuda/gemm_rows.h"
#include "ops/cuda/quant_units.cuh"
#include "ops/cuda/launch.cuh"

namespace cera::ops::cuda {
namespace {

struct DequantParams {
  QWeight w;
  __half* out;  // [n_rows, n_in] packed
  int64_t chunks_per_row;
  int64_t n_chunks;
};

// Each thread loads the raw bytes of kDequantChunks chunks (strided by the block size) before it
// decodes any, with gemm_q's decoders (GemmChunk, gemm_q.cuh: straight to f16 pairs); the block's
// chunks (32 KB of f16, contiguous in the output) go out through shared memory, so that each
// store instruction of a warp writes 512 contiguous bytes. Decision: with one chunk a thread (one
// 16-byte load in flight) and each thread storing its own 64 bytes, the 8B gate/up copy took
// 78.5 us (1.9 TB/s, ncu) and the copies ~9.7 ms of a 28 ms pp512.
constexpr int kDequantThreads = 128;
constexpr int kDequantChunks = 4;

template <DType T>
__global__ void __launch_bounds__(kDequantThreads) dequant_f16_kernel(const __grid_constant__ DequantParams p) {
  pdl_entry();
  using C = qgemm::GemmChunk<T>;
  __shared__ uint4 tile[kDequantThreads * kDequantChunks * 4];
  const int64_t c0 = int64_t(blockIdx.x) * kDequantThreads * kDequantChunks;
  const int64_t n_in = p.chunks_per_row * 32;
  typename C::Raw raw[kDequantChunks];
#pragma unroll
  for (int k = 0; k < kDequantChunks; ++k) {
    const int64_t c = c0 + threadIdx.x + k * kDequantThreads;
    if (c < p.n_chunks) raw[k] = C::load(p.w, c / p.chunks_per_row, c % p.chunks_per_row, n_in);
  }
#pragma unroll
  for (int k = 0; k < kDequantChunks; ++k) {
    const int local = threadIdx.x + k * kDequantThreads;
    if (c0 + local >= p.n_chunks) break;
    uint32_t h[16];
    C::decode(raw[k], h);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int q = (i + threadIdx.x) & 3;  // rotated: fewer threads of a phase on one bank group
      tile[local * 4 + q] = make_uint4(h[4 * q], h[4 * q + 1], h[4 * q + 2], h[4 * q + 3]);
    }
  }
  __syncthreads();
  const int64_t left = p.n_chunks - c0;
  const int n16 = int(left < kDequantThreads * kDequantChunks ? left : kDequantThreads * kDequantChunks) * 4;
  uint4* dst = reinterpret_cast<uint4*>(p.out + c0 * 32);
  for (int i = threadIdx.x; i < n16; i += kDequantThreads) dst[i] = tile[i];
}

using DequantKernel = void (*)(DequantParams);
DequantKernel dequant_kernel(DType t);

// DequantAhead's conversion: weight [n_in, n_out] in its GPU layout -> out [n_out, n_in] f16.
void dequantize_f16(cudaStream_t stream, const TensorView& weight, __half* out) {
  const int64_t n_in = weight.cols(), n_out = weight.rows();
  DequantParams dp{qweight_of(weight.dtype, weight.data, n_in, n_out, 0), out, n_in / 32, n_out * (n_in / 32)};
  launch(stream, dequant_kernel(weight.dtype), ceil_div(dp.n_chunks, kDequantThreads * kDequantChunks),
         kDequantThreads, 0, dp);
  CERA_CUDA_LAUNCHED();
}

DequantKernel dequant_kernel(DType t) {
  switch (t) {
    case DType::kQ4_0: return dequant_f16_kernel<DType::kQ4_0>;
    case DType::kQ4_1: return dequant_f16_kernel<DType::kQ4_1>;
    case DType::kQ5_0: return dequant_f16_kernel<DType::kQ5_0>;
    case DType::kQ5_1: return dequant_f16_kernel<DType::kQ5_1>;
    case DType::kQ8_0: return dequant_f16_kernel<DType::kQ8_0>;
    case DType::kQ4_K: return dequant_f16_kernel<DType::kQ4_K>;
    case DType::kQ5_K: return dequant_f16_kernel<DType::kQ5_K>;
    case DType::kQ6_K: return dequant_f16_kernel<DType::kQ6_K>;
    default: return nullptr;
  }
}

struct ConvertParams {
  const float* x;
  int64_t x_stride;  // floats
  void* out;         // [n_tokens, n_in] packed f16 or bf16
  int64_t n_in;
  int64_t n;         // n_in * n_tokens
  bool bf16;
  bool vec4;         // n_in and x_stride multiples of 4, x 16-byte aligned: 4 elements a thread
};

__device__ __forceinline__ uint16_t to_bits(float v, bool bf16) {
  return bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v)) : __half_as_ushort(__float2half_rn(v));
}

// Four elements a thread where rows allow (one 16-byte load, one 8-byte store): the scalar form
// moved 1.0 TB/s (8B Q/K/V input, 11.7 us, ncu).
__global__ void convert_x_kernel(const __grid_constant__ ConvertParams p) {
  pdl_entry();
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  auto* out = static_cast<uint16_t*>(p.out);
  if (p.vec4) {
    const int64_t i = 4 * t;
    if (i >= p.n) return;
    const float4 v = *reinterpret_cast<const float4*>(p.x + (i / p.n_in) * p.x_stride + i % p.n_in);
    const uint2 packed = make_uint2(uint32_t(to_bits(v.x, p.bf16)) | uint32_t(to_bits(v.y, p.bf16)) << 16,
                                    uint32_t(to_bits(v.z, p.bf16)) | uint32_t(to_bits(v.w, p.bf16)) << 16);
    *reinterpret_cast<uint2*>(out + i) = packed;
    return;
  }
  if (t >= p.n) return;
  out[t] = to_bits(p.x[(t / p.n_in) * p.x_stride + t % p.n_in], p.bf16);
}

struct BiasParams {
  float* out;
  int64_t out_stride;  // floats
  const float* bias;
  int64_t n;
  int64_t rows;
};

__global__ void add_bias_kernel(const __grid_constant__ BiasParams p) {
  pdl_entry();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.n * p.rows) return;
  p.out[(i / p.n) * p.out_stride + i % p.n] += p.bias[i % p.n];
}

// The prefill path: dequantized f16 copy + cuBLAS by default; CERA_CUDA_GEMM=mma selects
// gemm_q.cu's in-kernel dequantizing GEMM, whose mma.sync form measured 0.3-0.85x the cuBLAS
// path's speed on the 8B shapes on the H200 (docs/benchmarks/cuda.md, v4), its wgmma form
// (CERA_CUDA_GEMM_Q=wgmma) the same, 0.22-0.43x (v8): both are bound by the weight decoding, not
// the products. Not used by default.
}  // namespace

bool batch_invariant() {
  static const bool on = [] {
    const char* e = std::getenv("CERA_CUDA_BATCH_INVARIANT");
    return e != nullptr && e[0] == '1';
  }();
  return on;
}

namespace {

bool cublas_gemm_forced() {
  static const bool forced = [] {
    const char* e = std::getenv("CERA_CUDA_GEMM");
    return !(e != nullptr && std::string_view(e) == "mma");
  }();
  return forced;
}

}  // namespace

void add_bias(CudaContext& ctx, const TensorView& out, const float* bias) {
  BiasParams p{reinterpret_cast<float*>(out.data), out.stride() / 4, bias, out.cols(), out.rows()};
  if (p.n * p.rows == 0 || !ctx.launching()) return;
  launch(ctx.stream(), add_bias_kernel, ceil_div(p.n * p.rows, 256), 256, 0, p);
  CERA_CUDA_LAUNCHED();
}

const void* gemm_activations(CudaContext& ctx, const TensorView& x, bool bf16) {
  const int64_t n_in = x.cols(), n_tokens = x.rows();
  void* xh = ctx.scratch(ScratchKind::kGemmX, uint64_t(n_in * n_tokens) * 2);
  if (!ctx.launching()) return xh;
  // Q/K/V (gate/up) convert their shared input once, as the GEMV quantizes it once (gemv.cu).
  const int64_t kind = bf16 ? kActBf16 : kActF16;
  QuantActCache& cache = ctx.act_cache();
  if (!cache.matches(x.data, x.stride(), n_in, n_tokens, kind)) {
    ConvertParams cp{reinterpret_cast<const float*>(x.data), x.stride() / 4, xh, n_in, n_in * n_tokens, bf16,
                     n_in % 4 == 0 && x.stride() % 16 == 0 && reinterpret_cast<uintptr_t>(x.data) % 16 == 0};
    launch(ctx.stream(), convert_x_kernel, ceil_div(cp.vec4 ? cp.n / 4 : cp.n, 256), 256, 0, cp);
    CERA_CUDA_LAUNCHED();
    cache = {x.data, x.stride(), n_in, n_tokens, kind};
  }
  return xh;
}

int64_t graphed_gemm_rows() {
  // 256 (every serving batch) by default: measured in cuda_ops.h.
  static const int64_t v = env_int("CERA_CUDA_GRAPH_GEMM_ROWS", kRowsMaxLimit, 0, kRowsMaxLimit);
  return v;
}

bool gemm_recordable(const TensorView& weight, int64_t n_tokens) {
  return n_tokens <= graphed_gemm_rows() && (cublas_gemm_forced() || !gemm_q_supports(weight));
}

void gemm(CudaContext& ctx, const TensorView& out, const TensorView& weight, const TensorView& x,
          const TensorView* bias) {
  // graph.cu records only the batches gemm_recordable() takes and runs larger ones eagerly.
  CERA_CHECK_MSG(ctx.mode() != OpMode::kRecord || gemm_recordable(weight, x.rows()), "gemm: not recordable");
  if (!cublas_gemm_forced() && gemm_q_supports(weight)) {
    gemm_q(ctx, out, weight, x, bias);
    return;
  }
  const int64_t n_in = weight.cols(), n_out = weight.rows(), n_tokens = x.rows();
  const float alpha = 1.0f, beta = 0.0f;
  const int ldc = int(out.stride() / 4);
  if (weight.dtype == DType::kF32) {
    // Plain float32 (no TF32): F32 weights are the exactness case (tiny models, tests).
    if (ctx.launching()) {
      CERA_CUBLAS_CHECK(cublasSgemm(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, int(n_out), int(n_tokens), int(n_in),
                                    &alpha, reinterpret_cast<const float*>(weight.data), int(weight.stride() / 4),
                                    reinterpret_cast<const float*>(x.data), int(x.stride() / 4), &beta,
                                    reinterpret_cast<float*>(out.data), ldc));
    }
  } else {
    const bool bf16 = weight.dtype == DType::kBF16;
    const void* xh = gemm_activations(ctx, x, bf16);
    const void* wh = weight.data;
    int lda = int(weight.stride() / 2);
    const bool quantized = dtype_block_size(weight.dtype) != 1;
    // Eagerly the copy comes from DequantAhead (made one GEMM ahead on its side stream). A graph
    // makes its own in the kGemmWeight scratch, in stream order before the GEMM: the copies
    // ahead are ordered by events across streams and guessed from the eager order, and a replay
    // must not depend on what a buffer held when it was captured (measured at 256 rows of 8B
    // Q4_0, the copies ahead saved 1 %: docs/benchmarks/serving_batch_h200.md).
    const bool ahead = quantized && ctx.mode() == OpMode::kEager;
    if (ahead) {
      wh = ctx.dequant_ahead().acquire(ctx.stream(), weight, dequantize_f16);
      lda = int(n_in);
    } else if (quantized) {
      auto* copy = static_cast<__half*>(ctx.scratch(ScratchKind::kGemmWeight, uint64_t(n_out * n_in) * 2));
      if (ctx.launching()) dequantize_f16(ctx.stream(), weight, copy);
      wh = copy;
      lda = int(n_in);
    }
    const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    if (ctx.launching()) {
      CERA_CUBLAS_CHECK(cublasGemmEx(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, int(n_out), int(n_tokens), int(n_in),
                                     &alpha, wh, type, lda, xh, type, int(n_in), &beta, out.data, CUDA_R_32F, ldc,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    if (ahead) ctx.dequant_ahead().release(ctx.stream(), dequantize_f16);
  }
  if (bias != nullptr) add_bias(ctx, out, reinterpret_cast<const float*>(bias->data));
}

void matmul(CudaContext& ctx, const TensorView& out, const TensorView& weight, const TensorView& x,
            const TensorView* bias) {
  check_f32_device(out, "matmul out");
  check_f32_device(x, "matmul x");
  CERA_CHECK_MSG(weight.device == Device::kCuda, "matmul: weight is not a CUDA tensor");
  CERA_CHECK_MSG(is_supported_weight(weight.dtype),
                 "matmul: no CUDA kernel for weight type " + std::string(dtype_name(weight.dtype)));
  const int64_t n_in = weight.cols(), n_out = weight.rows(), n_tokens = x.rows();
  CERA_CHECK_MSG(x.cols() == n_in, "matmul: x has " + std::to_string(x.cols()) + " columns, weight " +
                                       std::to_string(n_in));
  CERA_CHECK_MSG(out.cols() == n_out && out.rows() == n_tokens, "matmul: out shape mismatch");
  CERA_CHECK_MSG(weight.packed() || dtype_block_size(weight.dtype) == 1,
                 "matmul: quantized CUDA weights must be whole imported tensors (GPU layout)");
  CERA_CHECK(n_in % dtype_block_size(weight.dtype) == 0);
  if (dtype_block_size(weight.dtype) == 1) CERA_CHECK_MSG(weight.stride() % 2 == 0, "matmul: weight stride");
  if (bias != nullptr) {
    check_f32_device(*bias, "matmul bias");
    CERA_CHECK(bias->n_elements() == n_out && bias->packed());
  }
  if (n_out == 0 || n_tokens == 0) return;
  const MatmulPath path = matmul_path(weight, n_tokens);
  if (path == MatmulPath::kRows) {
    gemm_rows(ctx, out, weight, x, bias);
  } else if (path == MatmulPath::kGemv) {
    gemv(ctx, out, weight, x, bias);
  } else if (batch_invariant()) {
    // Chunks through the batch-invariant kernels: gemm_rows where it takes the weight, else the GEMV.
    const bool rows = gemm_rows_supports(weight);
    const int64_t chunk = rows ? kRowsMaxLimit : kGemvMaxTokens;
    for (int64_t first = 0; first < n_tokens; first += chunk) {
      const int64_t n = std::min(chunk, n_tokens - first);
      if (rows) {
        gemm_rows(ctx, out.slice_rows(first, n), weight, x.slice_rows(first, n), bias);
      } else {
        gemv(ctx, out.slice_rows(first, n), weight, x.slice_rows(first, n), bias);
      }
    }
  } else {
    gemm(ctx, out, weight, x, bias);
  }
  forget_overwritten_activations(ctx, out);
}

void forget_overwritten_activations(CudaContext& ctx, const TensorView& out) {
  // Writing over the input makes its cached quantization stale.
  const QuantActCache& c = ctx.act_cache();
  if (c.x != nullptr && out.rows() > 0) {
    const auto* o0 = out.data;
    const auto* o1 = out.data + out.extent_bytes();
    const auto* x0 = static_cast<const std::byte*>(c.x);
    const auto* x1 = x0 + c.x_stride * (c.n_tokens - 1) + c.n_in * 4;
    if (o0 < x1 && x0 < o1) ctx.act_cache() = {};
  }
}

}  // namespace cera::ops::cuda
