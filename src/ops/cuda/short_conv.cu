// short_conv: lfm2's gated causal depthwise convolution over all tokens of one sequence in one
// launch. The convolution is a short FIR over the inputs u = B ⊙ x (no recurrence), so threads
// split (channel, chunk of kChunkTokens tokens) freely; the carried state is read and replaced
// by the one thread that owns (channel, chunk 0), so no other thread ever reads it: the launch
// needs no grid-wide ordering. Float operations follow the CPU reference (cpu_conv.cpp) in order
// and without contraction.
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/launch.cuh"

namespace cera::ops::cuda {
namespace {

constexpr int kMaxTaps = 16;      // L_cache is 3 in every lfm2 checkpoint; the CPU's bound too
constexpr int kChunkTokens = 16;  // >= kMaxTaps - 1: only chunk 0 reaches back into the state
constexpr int kThreads = 128;

struct ShortConvParams {
  const float* bcx;        // token t's row at bcx + t * bcx_stride: B [0, n_ch), C [n_ch, 2 n_ch), x [2 n_ch, 3 n_ch)
  int64_t bcx_stride;      // floats
  const float* kernel;     // channel c's L taps at kernel + c * kernel_stride
  int64_t kernel_stride;
  float* state;            // channel c's L-1 carried inputs at state + c * state_stride
  int64_t state_stride;
  float* out;              // token t at out + t * out_stride
  int64_t out_stride;
  int64_t n_ch, n_tokens;
  int32_t taps;            // L
};

__device__ __forceinline__ float gated_input(const ShortConvParams& p, int64_t c, int64_t t) {
  const float* row = p.bcx + t * p.bcx_stride;
  return __fmul_rn(row[c], row[2 * p.n_ch + c]);
}

// Thread (channel c, chunk blockIdx.y). The window win[0 .. L-2] holds u_ext at the L-1 columns
// before the current token; every index is a compile-time constant after unrolling (registers).
__global__ void __launch_bounds__(kThreads) short_conv_kernel(const __grid_constant__ ShortConvParams p) {
  pdl_entry();
  const int64_t c = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (c >= p.n_ch) return;
  const int L = p.taps;
  const int64_t t0 = int64_t(blockIdx.y) * kChunkTokens;
  const int64_t t1 = min(t0 + kChunkTokens, p.n_tokens);
  const float* st = p.state + c * p.state_stride;
  float k[kMaxTaps], win[kMaxTaps - 1], old[kMaxTaps - 1];
#pragma unroll
  for (int j = 0; j < kMaxTaps; ++j) k[j] = j < L ? p.kernel[c * p.kernel_stride + j] : 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxTaps - 1; ++j) {
    old[j] = 0.0f;
    win[j] = 0.0f;
    if (j < L - 1) {
      const int64_t col = t0 - (L - 1) + j;  // token index; negative: state column col + L - 1 (chunk 0 only)
      if (col < 0) {
        old[j] = st[j];
        win[j] = old[j];
      } else {
        win[j] = gated_input(p, c, col);
      }
    }
  }
  for (int64_t t = t0; t < t1; ++t) {
    const float u = gated_input(p, c, t);
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < kMaxTaps; ++j) {
      if (j < L - 1) {
        acc = __fadd_rn(acc, __fmul_rn(k[j], win[j]));
      } else if (j == L - 1) {
        acc = __fadd_rn(acc, __fmul_rn(k[j], u));
      }
    }
    p.out[t * p.out_stride + c] = __fmul_rn(p.bcx[t * p.bcx_stride + p.n_ch + c], acc);
#pragma unroll
    for (int j = 0; j < kMaxTaps - 1; ++j) {
      if (j < L - 2) {
        win[j] = win[j + 1];
      } else if (j == L - 2) {
        win[j] = u;
      }
    }
  }
  if (blockIdx.y != 0) return;
  // New state: u_ext columns n_tokens .. n_tokens + L - 2 (old state columns while n_tokens < L - 1).
#pragma unroll
  for (int j = 0; j < kMaxTaps - 1; ++j) {
    if (j < L - 1) {
      const int64_t col = p.n_tokens + j;  // u_ext column
      float v = 0.0f;
      if (col >= L - 1) {
        v = gated_input(p, c, col - (L - 1));
      } else {
#pragma unroll
        for (int m = 0; m < kMaxTaps - 1; ++m) {
          if (m == col) v = old[m];
        }
      }
      p.state[c * p.state_stride + j] = v;
    }
  }
}

}  // namespace

void short_conv(CudaContext& ctx, const TensorView& out, const TensorView& bcx, const TensorView& kernel,
                const TensorView& state) {
  check_f32_device(out, "short_conv out");
  check_f32_device(bcx, "short_conv bcx");
  check_f32_device(kernel, "short_conv kernel");
  check_f32_device(state, "short_conv state");
  const int64_t n_ch = out.cols(), n_tokens = out.rows(), L = kernel.cols();
  CERA_CHECK_MSG(bcx.cols() == 3 * n_ch && bcx.rows() == n_tokens,
                 "short_conv: bcx is [" + std::to_string(bcx.cols()) + ", " + std::to_string(bcx.rows()) +
                     "], expected [3 * " + std::to_string(n_ch) + ", " + std::to_string(n_tokens) + "]");
  CERA_CHECK_MSG(L >= 1 && L <= kMaxTaps && kernel.rows() == n_ch, "short_conv: kernel shape");
  CERA_CHECK_MSG(state.cols() == L - 1 && state.rows() == n_ch, "short_conv: state must be [L-1, n_channels]");
  if (n_tokens == 0 || n_ch == 0) return;
  const int64_t chunks = (n_tokens + kChunkTokens - 1) / kChunkTokens;
  CERA_CHECK_MSG(chunks <= 65535, "short_conv: too many tokens for one call");
  const ShortConvParams p{reinterpret_cast<const float*>(bcx.data), bcx.stride() / 4,
                          reinterpret_cast<const float*>(kernel.data), kernel.stride() / 4,
                          reinterpret_cast<float*>(state.data), state.stride() / 4,
                          reinterpret_cast<float*>(out.data), out.stride() / 4, n_ch, n_tokens, int32_t(L)};
  if (!ctx.launching()) return;
  launch(ctx.stream(), short_conv_kernel, dim3(ceil_div(n_ch, kThreads), unsigned(chunks)), kThreads, 0, p);
  CERA_CUDA_LAUNCHED();
}

}  // namespace cera::ops::cuda
