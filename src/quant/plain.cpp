// Plain float formats: F32, F16, BF16. Conversions are core/half.h's bit-exact RNE ones; dot
// products take float activations and accumulate in double (they are the reference the fast
// float kernels are compared with, so they should carry no accumulation error of their own).
#include <cstring>

#include "quant/internal.h"

namespace cera::quant::detail {

void dequantize_f32(const void* src, float* dst, int64_t n) {
  if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void dequantize_f16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(h[i]);
}

void dequantize_bf16(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(b[i]);
}

void quantize_f16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = float_to_half(src[i]);
}

void quantize_bf16(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) b[i] = float_to_bf16(src[i]);
}

float vec_dot_f32(const void* w, const void* act, int64_t n) {
  const auto* x = static_cast<const float*>(w);
  const auto* a = static_cast<const float*>(act);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * a[i];
  return static_cast<float>(sum);
}

float vec_dot_f16(const void* w, const void* act, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(w);
  const auto* a = static_cast<const float*>(act);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(half_to_float(h[i])) * a[i];
  return static_cast<float>(sum);
}

float vec_dot_bf16(const void* w, const void* act, int64_t n) {
  const auto* b = static_cast<const uint16_t*>(w);
  const auto* a = static_cast<const float*>(act);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(bf16_to_float(b[i])) * a[i];
  return static_cast<float>(sum);
}

}  // namespace cera::quant::detail
