// Q4_0 and Q4_1: 32 elements, 4-bit codes, fp16 scale (and minimum for Q4_1).
// Quantizers reproduce ggml's reference rounding (trunc(x/d + 8.5), not round-to-nearest) in the
// same float operation order, so their bytes equal the gguf package's.
#include <algorithm>
#include <cmath>

#include "quant/blocks.h"
#include "quant/internal.h"

namespace cera::quant::detail {
void dequantize_q4_0(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const BlockQ4_0*>(src);
  for (int64_t b = 0; b < n_blocks; ++b, dst += kQK32) {
    const BlockQ4_0& blk = blocks[b];
    const float d = fp16(blk.d);
    for (int j = 0; j < kQK32 / 2; ++j) {
      dst[j] = d * static_cast<float>((blk.qs[j] & 0x0F) - 8);
      dst[j + 16] = d * static_cast<float>((blk.qs[j] >> 4) - 8);
    }
  }
}

void dequantize_q4_1(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const BlockQ4_1*>(src);
  for (int64_t b = 0; b < n_blocks; ++b, dst += kQK32) {
    const BlockQ4_1& blk = blocks[b];
    const float d = fp16(blk.d);
    const float m = fp16(blk.m);
    for (int j = 0; j < kQK32 / 2; ++j) {
      dst[j] = d * static_cast<float>(blk.qs[j] & 0x0F) + m;
      dst[j + 16] = d * static_cast<float>(blk.qs[j] >> 4) + m;
    }
  }
}

void quantize_q4_0(const float* src, void* dst, int64_t n_blocks) {
  auto* blocks = static_cast<BlockQ4_0*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQK32) {
    // The extreme element maps to code 0 (-8), so its sign sets the sign of d.
    const float d = signed_absmax(src, kQK32) / -8.0f;
    const float id = inverse_or_zero(d);
    BlockQ4_0& blk = blocks[b];
    blk.d = float_to_half(d);
    for (int j = 0; j < kQK32 / 2; ++j) {
      const uint8_t lo = trunc_code(src[j] * id + 8.5f, 15);
      const uint8_t hi = trunc_code(src[j + 16] * id + 8.5f, 15);
      blk.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_q4_1(const float* src, void* dst, int64_t n_blocks) {
  auto* blocks = static_cast<BlockQ4_1*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQK32) {
    const auto [min_it, max_it] = std::minmax_element(src, src + kQK32);
    const float min = *min_it;
    const float d = (*max_it - min) / 15.0f;
    const float id = inverse_or_zero(d);
    BlockQ4_1& blk = blocks[b];
    blk.d = float_to_half(d);
    blk.m = float_to_half(min);
    for (int j = 0; j < kQK32 / 2; ++j) {
      const uint8_t lo = trunc_code((src[j] - min) * id + 0.5f, 15);
      const uint8_t hi = trunc_code((src[j + 16] - min) * id + 0.5f, 15);
      blk.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

float vec_dot_q4_0(const void* w, const void* act, int64_t n_blocks) {
  const auto* wb = static_cast<const BlockQ4_0*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(act);
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int isum = 0;
    for (int j = 0; j < kQK32 / 2; ++j) {
      isum += ((wb[b].qs[j] & 0x0F) - 8) * ab[b].qs[j];
      isum += ((wb[b].qs[j] >> 4) - 8) * ab[b].qs[j + 16];
    }
    sum += fp16(wb[b].d) * fp16(ab[b].d) * static_cast<float>(isum);
  }
  return sum;
}

float vec_dot_q4_1(const void* w, const void* act, int64_t n_blocks) {
  const auto* wb = static_cast<const BlockQ4_1*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(act);
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    // sum (code*d + m) * a*da = d*da * sum(code*a) + m*da * sum(a): the activation sum is what
    // ggml's Q8_1 precomputes; here it is summed on the fly so one format serves all 32-blocks.
    int isum = 0;
    int asum = 0;
    for (int j = 0; j < kQK32 / 2; ++j) {
      isum += (wb[b].qs[j] & 0x0F) * ab[b].qs[j] + (wb[b].qs[j] >> 4) * ab[b].qs[j + 16];
      asum += ab[b].qs[j] + ab[b].qs[j + 16];
    }
    const float da = fp16(ab[b].d);
    sum += fp16(wb[b].d) * da * static_cast<float>(isum) +
           fp16(wb[b].m) * da * static_cast<float>(asum);
  }
  return sum;
}

}  // namespace cera::quant::detail
