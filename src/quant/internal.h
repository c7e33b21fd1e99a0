// Per-format entry points behind the dispatch table in dispatch.cpp, plus the small numeric
// helpers the format files share. Not part of the public API: include quant/quant.h instead.
// All functions take a count of blocks, already validated by dispatch.cpp.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/half.h"

namespace cera::quant::detail {

using DequantizeFn = void (*)(const void* src, float* dst, int64_t n_blocks);
using QuantizeFn = void (*)(const float* src, void* dst, int64_t n_blocks);
using VecDotFn = float (*)(const void* w, const void* act, int64_t n_blocks);

// Round half to even (ggml's nearest_int) and clamp to [lo, hi]. The clamp is done in float so
// that inf (a scale that overflowed on subnormal input) converts defined; NaN gives 0.
inline int nearest_clamped(float x, int lo, int hi) {
  if (!(x == x)) return 0;
  return static_cast<int>(
      std::nearbyint(std::fmax(static_cast<float>(lo), std::fmin(static_cast<float>(hi), x))));
}
inline float fp16(uint16_t h) {
  return half_to_float(h);
}

// The element of largest magnitude with its sign; the first one on ties, as both ggml's loop and
// numpy's argmax pick it (the sign decides which end of the code range the block's extreme uses).
inline float signed_absmax(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (amax < std::fabs(x[i])) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  return max;
}

// trunc(v) clipped to [0, max_code], ggml's legacy rounding (trunc(x/d + offset + 0.5)). v is
// >= 0.5 up to rounding for every finite block; clamping in float keeps the conversion defined
// when 1/d overflows (subnormal inputs).
inline uint8_t trunc_code(float v, int max_code) {
  if (!(v >= 0.0f)) return 0;
  return static_cast<uint8_t>(std::fmin(static_cast<float>(max_code), std::trunc(v)));
}

// 1/d, or 0 for an all-zero block (numpy's `np.where(d == 0, 0, 1 / d)`).
inline float inverse_or_zero(float d) {
  return d != 0.0f ? 1.0f / d : 0.0f;
}

// plain.cpp (block = one element)
void dequantize_f32(const void* src, float* dst, int64_t n);
void dequantize_f16(const void* src, float* dst, int64_t n);
void dequantize_bf16(const void* src, float* dst, int64_t n);
void quantize_f16(const float* src, void* dst, int64_t n);
void quantize_bf16(const float* src, void* dst, int64_t n);
float vec_dot_f32(const void* w, const void* act, int64_t n);
float vec_dot_f16(const void* w, const void* act, int64_t n);
float vec_dot_bf16(const void* w, const void* act, int64_t n);

// legacy_q4.cpp, legacy_q5.cpp, q8.cpp, iq4.cpp: 32-element blocks, activations Q8_0
void dequantize_q4_0(const void* src, float* dst, int64_t n_blocks);
void dequantize_q4_1(const void* src, float* dst, int64_t n_blocks);
void dequantize_q5_0(const void* src, float* dst, int64_t n_blocks);
void dequantize_q5_1(const void* src, float* dst, int64_t n_blocks);
void dequantize_q8_0(const void* src, float* dst, int64_t n_blocks);
void dequantize_iq4_nl(const void* src, float* dst, int64_t n_blocks);
void quantize_q4_0(const float* src, void* dst, int64_t n_blocks);
void quantize_q4_1(const float* src, void* dst, int64_t n_blocks);
void quantize_q5_0(const float* src, void* dst, int64_t n_blocks);
void quantize_q5_1(const float* src, void* dst, int64_t n_blocks);
void quantize_q8_0(const float* src, void* dst, int64_t n_blocks);
float vec_dot_q4_0(const void* w, const void* act, int64_t n_blocks);
float vec_dot_q4_1(const void* w, const void* act, int64_t n_blocks);
float vec_dot_q5_0(const void* w, const void* act, int64_t n_blocks);
float vec_dot_q5_1(const void* w, const void* act, int64_t n_blocks);
float vec_dot_q8_0(const void* w, const void* act, int64_t n_blocks);
float vec_dot_iq4_nl(const void* w, const void* act, int64_t n_blocks);

// k_quants/*.cpp, iq4.cpp: 256-element super-blocks, activations Q8_K
void dequantize_q2_k(const void* src, float* dst, int64_t n_blocks);
void dequantize_q3_k(const void* src, float* dst, int64_t n_blocks);
void dequantize_q4_k(const void* src, float* dst, int64_t n_blocks);
void dequantize_q5_k(const void* src, float* dst, int64_t n_blocks);
void dequantize_q6_k(const void* src, float* dst, int64_t n_blocks);
void dequantize_iq4_xs(const void* src, float* dst, int64_t n_blocks);
void quantize_q4_k(const float* src, void* dst, int64_t n_blocks);
void quantize_q5_k(const float* src, void* dst, int64_t n_blocks);
void quantize_q6_k(const float* src, void* dst, int64_t n_blocks);
float vec_dot_q2_k(const void* w, const void* act, int64_t n_blocks);
float vec_dot_q3_k(const void* w, const void* act, int64_t n_blocks);
float vec_dot_q4_k(const void* w, const void* act, int64_t n_blocks);
float vec_dot_q5_k(const void* w, const void* act, int64_t n_blocks);
float vec_dot_q6_k(const void* w, const void* act, int64_t n_blocks);
float vec_dot_iq4_xs(const void* w, const void* act, int64_t n_blocks);

// q8.cpp: activation formats
void quantize_q8_k(const float* src, void* dst, int64_t n_blocks);
void dequantize_q8_k(const void* src, float* dst, int64_t n_blocks);

}  // namespace cera::quant::detail
