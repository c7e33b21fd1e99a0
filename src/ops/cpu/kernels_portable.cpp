// The portable kernel level: every matmul goes through the reference quant::vec_dot, so its
// results equal the reference bit for bit (the oracle the SIMD levels are tested against), and
// attention uses plain loops. Slow, but runs on any CPU. Two-term activations (kernels.h) are
// the sum of two reference dots, the residual's with its float scale applied per block.
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
float vdot(const float* a, const uint16_t* b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += a[i] * half_to_float(b[i]);
  return s;
}
void vaxpy_rows(float* y, const float* p, const float* const* x, int n_rows, int n) {
  for (int j = 0; j < n_rows; ++j) {
    for (int i = 0; i < n; ++i) y[i] += p[j] * x[j][i];
  }
}
void vaxpy_rows(float* y, const float* p, const uint16_t* const* x, int n_rows, int n) {
  for (int j = 0; j < n_rows; ++j) {
    for (int i = 0; i < n; ++i) y[i] += p[j] * half_to_float(x[j][i]);
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

// Rows of Q8_0 activations whose scale is the float in block_d (two-term residual rows) are
// dotted block by block with a unit fp16 scale, then scaled: the reference dot is linear in the
// activation scale, so this is dw * d2 * sum(c * q2) (+ min terms) as the SIMD levels compute it.
float residual_dot(const MatmulArgs& a, const std::byte* w, int64_t act_row) {
  const auto* x = reinterpret_cast<const quant::BlockQ8_0*>(a.act.data + act_row * a.act.row_stride);
  const int64_t nb = a.n_in / 32;
  const int64_t w_block = dtype_type_size(a.weight_type);
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    quant::BlockQ8_0 unit = x[b];
    unit.d = float_to_half(1.0f);
    sum += a.act.block_d[act_row * nb + b] * quant::vec_dot(a.weight_type, w + b * w_block, &unit, 32);
  }
  return sum;
}

float row_dot(const MatmulArgs& a, const std::byte* w, int64_t act_row) {
  if (act_row % 2 == 1 && a.act.terms == 2 && a.act.type == DType::kQ8_0) return residual_dot(a, w, act_row);
  return quant::vec_dot(a.weight_type, w, a.act.data + act_row * a.act.row_stride, a.n_in);
}

void matmul_reference(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  const int terms = a.act.terms;
  for (int64_t t = 0; t < a.n_tokens / terms; ++t) {
    float* out = a.out + t * a.out_stride;
    for (int64_t r = row_begin; r < row_end; ++r) {
      const std::byte* w = a.weight + r * a.w_stride;
      float dot = row_dot(a, w, t * terms);
      if (terms == 2) dot += row_dot(a, w, t * terms + 1);
      out[r] = a.bias != nullptr ? dot + a.bias[r] : dot;
    }
  }
}

MatmulRowsFn matmul_for(DType weight) {
  return quant::has_vec_dot(weight) ? matmul_reference : nullptr;
}
MatmulRowsFn no_r16(DType) { return nullptr; }
MatmulRowsFn no_gemm(DType) { return nullptr; }

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

// The scalar form of simd_quantize.inc's residual quantizer: same float operations, same codes.
void quantize_q8_0_residual_reference(const float* x, int64_t n, const void* q1, void* blocks,
                                      float* block_d, int32_t* block_sum) {
  const auto* in = static_cast<const quant::BlockQ8_0*>(q1);
  auto* out = static_cast<quant::BlockQ8_0*>(blocks);
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    const float d1 = half_to_float(in[b].d);
    float r[32];
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) {
      r[j] = x[j] - d1 * static_cast<float>(in[b].qs[j]);
      amax = std::fmax(amax, std::fabs(r[j]));
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = float_to_half(d);
    block_d[b] = d;
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) {
      const float c = std::fmax(-127.0f, std::fmin(127.0f, r[j] * id));  // NaN -> 127
      out[b].qs[j] = static_cast<int8_t>(std::nearbyint(c));
      s += out[b].qs[j];
    }
    block_sum[b] = s;
  }
}

void f32_to_f16_reference(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = float_to_half(x[i]);
}

void erf_reference(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::erf(x[i]);
}
void gelu_erf_reference(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.7071067811865476f));
}
void gelu_tanh_reference(const float* x, float* y, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    y[i] = 0.5f * x[i] * (1.0f + std::tanh(kSqrt2OverPi * x[i] * (1.0f + 0.044715f * x[i] * x[i])));
  }
}

}  // namespace

const KernelTable& portable_kernels() {
  static const KernelTable table{"portable", 1, matmul_for, attention_unit, attention_unit_f16, no_r16,
                                 quantize_q8_0_reference, quantize_q8_0_residual_reference, f32_to_f16_reference,
                                 no_gemm, 1, 0, 1, nullptr, erf_reference, gelu_erf_reference, gelu_tanh_reference};
  return table;
}

}  // namespace cera::ops::cpu
