// short_conv: lfm2's gated causal depthwise convolution over all tokens of one sequence in one
// call. Channels are independent, so threads split the channels in groups of kGroup; inside a
// group the tokens run in order with the sliding window of the last L-1 inputs kept in a small
// local array, so each bcx row is read once and the state is read and written once per call.
#include <algorithm>
#include <string>
#include <vector>

#include "ops/cpu/cpu_optional_verbs.h"

namespace cera::ops::cpu {
namespace {
constexpr int64_t kGroup = 64;       // channels per work unit: one cache line run per bcx row
constexpr int64_t kMaxKernel = 16;   // L_cache is 3 in every lfm2 checkpoint; a bound for the window
}  // namespace

void short_conv(CpuContext& ctx, const TensorView& out, const TensorView& bcx, const TensorView& kernel,
                const TensorView& state) {
  check_f32_cpu(out, "short_conv out");
  check_f32_cpu(bcx, "short_conv bcx");
  check_f32_cpu(kernel, "short_conv kernel");
  check_f32_cpu(state, "short_conv state");
  const int64_t n_ch = out.cols(), n_tokens = out.rows(), L = kernel.cols();
  CERA_CHECK_MSG(bcx.cols() == 3 * n_ch && bcx.rows() == n_tokens,
                 "short_conv: bcx is [" + std::to_string(bcx.cols()) + ", " + std::to_string(bcx.rows()) +
                     "], expected [3 * " + std::to_string(n_ch) + ", " + std::to_string(n_tokens) + "]");
  CERA_CHECK_MSG(L >= 1 && L <= kMaxKernel && kernel.rows() == n_ch, "short_conv: kernel shape");
  CERA_CHECK_MSG(state.cols() == L - 1 && state.rows() == n_ch, "short_conv: state must be [L-1, n_channels]");
  if (n_tokens == 0) return;
  const int64_t n_groups = (n_ch + kGroup - 1) / kGroup;
  // Small problems (decode: one token) stay on the calling thread.
  const int64_t grain = n_tokens * n_ch < (1 << 14) ? n_groups : 1;
  ctx.pool.parallel_for(n_groups, grain, [&](int64_t g_begin, int64_t g_end) {
    float win[kMaxKernel][kGroup];  // win[j][c]: u_ext column (current token - (L-1) + j)
    for (int64_t g = g_begin; g < g_end; ++g) {
      const int64_t c0 = g * kGroup, nc = std::min(kGroup, n_ch - c0);
      for (int64_t c = 0; c < nc; ++c) {
        const float* s = state.row_as<const float>(c0 + c);
        for (int64_t j = 0; j < L - 1; ++j) win[j][c] = s[j];
      }
      for (int64_t t = 0; t < n_tokens; ++t) {
        const float* row = bcx.row_as<const float>(t);
        const float* b = row + c0;
        const float* cg = row + n_ch + c0;
        const float* x = row + 2 * n_ch + c0;
        float* o = out.row_as<float>(t) + c0;
        for (int64_t c = 0; c < nc; ++c) win[L - 1][c] = b[c] * x[c];
        for (int64_t c = 0; c < nc; ++c) {
          const float* k = kernel.row_as<const float>(c0 + c);
          float acc = 0.0f;
          for (int64_t j = 0; j < L; ++j) acc += k[j] * win[j][c];
          o[c] = cg[c] * acc;
        }
        for (int64_t j = 0; j + 1 < L; ++j) {
          for (int64_t c = 0; c < nc; ++c) win[j][c] = win[j + 1][c];
        }
      }
      for (int64_t c = 0; c < nc; ++c) {
        float* s = state.row_as<float>(c0 + c);
        for (int64_t j = 0; j < L - 1; ++j) s[j] = win[j][c];
      }
    }
  });
}

}  // namespace cera::ops::cpu
