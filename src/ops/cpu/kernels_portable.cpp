// The portable kernel level: every matmul goes through the reference quant::vec_dot, so its
// results equal the reference bit for bit (the oracle the SIMD levels are tested against), and
// attention uses plain loops. Slow, but runs on any CPU.
#include <cmath>

#include "core/half.h"
#include "ops/cpu/kernels.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace cera::ops::cpu {
namespace {

float vdot(const float* a, const float* b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
void vaxpy_rows(float* y, const float* p, const float* const* x, int n_rows, int n) {
  for (int j = 0; j < n_rows; ++j) {
    for (int i = 0; i < n; ++i) y[i] += p[j] * x[j][i];
  }
}
void vscale(float* y, float s, int n) {
  for (int i = 0; i < n; ++i) y[i] *= s;
}
void vexp_shifted(float* s, int n, float m) {
  for (int i = 0; i < n; ++i) s[i] = std::exp(s[i] - m);
}

}  // namespace
}  // namespace cera::ops::cpu

namespace cera::ops::cpu {
#include "ops/cpu/attention_impl.inc"

namespace {

void matmul_reference(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    const std::byte* x = a.act.data + t * a.act.row_stride;
    float* out = a.out + t * a.out_stride;
    for (int64_t r = row_begin; r < row_end; ++r) {
      const float dot = quant::vec_dot(a.weight_type, a.weight + r * a.w_stride, x, a.n_in);
      out[r] = a.bias != nullptr ? dot + a.bias[r] : dot;
    }
  }
}

MatmulRowsFn matmul_for(DType weight) {
  return quant::has_vec_dot(weight) ? matmul_reference : nullptr;
}
MatmulRowsFn no_r16(DType) { return nullptr; }

void quantize_q8_0_reference(const float* x, int64_t n, void* blocks, float* block_d, int32_t* block_sum) {
  quant::quantize_activation_row(DType::kQ8_0, x, blocks, n);
  const auto* b = static_cast<const quant::BlockQ8_0*>(blocks);
  for (int64_t i = 0; i < n / 32; ++i) {
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) s += b[i].qs[j];
    block_sum[i] = s;
    block_d[i] = half_to_float(b[i].d);
  }
}

}  // namespace

const KernelTable& portable_kernels() {
  static const KernelTable table{"portable", 1, matmul_for, attention_unit, no_r16,
                                 quantize_q8_0_reference};
  return table;
}

}  // namespace cera::ops::cpu
