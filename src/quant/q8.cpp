// Q8_0 (a weight format and the activation format of the 32-element weight blocks) and Q8_K
// (activation format of the 256-element super-blocks). Q8_0 rounds half away from zero like
// ggml / gguf (byte-identical); Q8_K rounds half to even and maps max|x| to 127 with a float d.
#include <cmath>

#include "quant/blocks.h"
#include "quant/internal.h"

namespace cera::quant::detail {

void dequantize_q8_0(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const BlockQ8_0*>(src);
  for (int64_t b = 0; b < n_blocks; ++b, dst += kQK32) {
    const float d = fp16(blocks[b].d);
    for (int j = 0; j < kQK32; ++j) dst[j] = static_cast<float>(blocks[b].qs[j]) * d;
  }
}

void quantize_q8_0(const float* src, void* dst, int64_t n_blocks) {
  auto* blocks = static_cast<BlockQ8_0*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQK32) {
    float amax = 0.0f;
    for (int j = 0; j < kQK32; ++j) amax = std::fmax(amax, std::fabs(src[j]));
    const float d = amax / 127.0f;
    const float id = inverse_or_zero(d);
    blocks[b].d = float_to_half(d);
    for (int j = 0; j < kQK32; ++j) {
      // std::round: half away from zero, as ggml's roundf and gguf's np_roundf.
      const float v = std::fmax(-127.0f, std::fmin(127.0f, src[j] * id));
      blocks[b].qs[j] = static_cast<int8_t>(v == v ? std::round(v) : 0.0f);
    }
  }
}

float vec_dot_q8_0(const void* w, const void* act, int64_t n_blocks) {
  const auto* wb = static_cast<const BlockQ8_0*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(act);
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int isum = 0;
    for (int j = 0; j < kQK32; ++j) isum += wb[b].qs[j] * ab[b].qs[j];
    sum += fp16(wb[b].d) * fp16(ab[b].d) * static_cast<float>(isum);
  }
  return sum;
}

void quantize_q8_k(const float* src, void* dst, int64_t n_blocks) {
  auto* blocks = static_cast<BlockQ8_K*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQK256) {
    BlockQ8_K& blk = blocks[b];
    const float max = signed_absmax(src, kQK256);
    // -127/max maps the extreme element to exactly -127; keeping |q| <= 127 (never -128) lets
    // SIMD kernels use the sign-flip trick of unsigned x signed byte products safely.
    const float iscale = max != 0.0f ? -127.0f / max : 0.0f;
    for (int j = 0; j < kQK256; ++j) {
      blk.qs[j] = static_cast<int8_t>(nearest_clamped(iscale * src[j], -127, 127));
    }
    for (int g = 0; g < kQK256 / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += blk.qs[16 * g + j];
      blk.bsums[g] = static_cast<int16_t>(sum);
    }
    blk.d = iscale != 0.0f ? 1.0f / iscale : 0.0f;
  }
}

void dequantize_q8_k(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const BlockQ8_K*>(src);
  for (int64_t b = 0; b < n_blocks; ++b, dst += kQK256) {
    for (int j = 0; j < kQK256; ++j) dst[j] = blocks[b].d * static_cast<float>(blocks[b].qs[j]);
  }
}

}  // namespace cera::quant::detail
