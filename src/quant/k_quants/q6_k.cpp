// Q6_K: 256-element super-blocks of sixteen 16-element sub-blocks, 6-bit codes (offset 32) split
// into low nibbles and high 2-bit pairs, signed 8-bit sub-block scales; value = (d*sc)*(code-32).
// The quantizer fits each sub-block symmetrically with x^2 weights, then quantizes the scales.
#include <algorithm>
#include <cmath>
#include <iterator>

#include "quant/blocks.h"
#include "quant/internal.h"
#include "quant/k_quants/scale_search.h"

namespace cera::quant::detail {
namespace {

// The 6-bit code (0..63) of element e = 128h + 64k + l (l < 64) / = 128h + 32j + l (l < 32).
int code_q6_k(const BlockQ6_K& blk, int e) {
  const int h = e / 128;
  const int r = e % 128;
  const int low = (blk.ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0F;
  const int high = (blk.qh[32 * h + r % 32] >> (2 * (r / 32))) & 0x03;
  return low | (high << 4);
}

}  // namespace

void dequantize_q6_k(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const BlockQ6_K*>(src);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ6_K& blk = blocks[b];
    const float d = fp16(blk.d);
    for (int s = 0; s < 16; ++s, dst += 16) {
      const float ds = d * static_cast<float>(blk.scales[s]);
      for (int l = 0; l < 16; ++l) {
        dst[l] = ds * static_cast<float>(code_q6_k(blk, 16 * s + l) - 32);
      }
    }
  }
}

void quantize_q6_k(const float* src, void* dst, int64_t n_blocks) {
  auto* blocks = static_cast<BlockQ6_K*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQK256) {
    BlockQ6_K& blk = blocks[b];
    uint8_t codes[kQK256];
    float scales[16];
    float max_scale = 0.0f;  // the sub-block scale of largest magnitude, sign kept
    for (int s = 0; s < 16; ++s) {
      scales[s] = fit_symmetric_codes(src + 16 * s, 16, 32, codes + 16 * s);
      if (std::fabs(scales[s]) > std::fabs(max_scale)) max_scale = scales[s];
    }
    if (std::fabs(max_scale) < 1e-15f) {  // all (near) zero: d = 0 decodes to zeros
      std::fill(reinterpret_cast<uint8_t*>(&blk), reinterpret_cast<uint8_t*>(&blk + 1), 0);
      continue;
    }
    // Second level: int8 scales, the largest mapping to -128 (the full signed range).
    const float iscale = -128.0f / max_scale;
    blk.d = float_to_half(1.0f / iscale);
    for (int s = 0; s < 16; ++s) {
      blk.scales[s] = static_cast<int8_t>(nearest_clamped(iscale * scales[s], -128, 127));
    }
    // Re-round the codes against the scales as stored.
    const float d = fp16(blk.d);
    for (int s = 0; s < 16; ++s) {
      const float ds = d * static_cast<float>(blk.scales[s]);
      if (ds == 0.0f) continue;
      for (int l = 0; l < 16; ++l) {
        codes[16 * s + l] =
            static_cast<uint8_t>(nearest_clamped(src[16 * s + l] / ds, -32, 31) + 32);
      }
    }
    std::fill(std::begin(blk.qh), std::end(blk.qh), uint8_t{0});
    for (int e = 0; e < kQK256; ++e) {
      const int h = e / 128;
      const int r = e % 128;
      if (r < 64) {
        blk.ql[64 * h + r] = codes[e] & 0x0F;
      } else {
        blk.ql[64 * h + r - 64] |= static_cast<uint8_t>((codes[e] & 0x0F) << 4);
      }
      blk.qh[32 * h + r % 32] |= static_cast<uint8_t>((codes[e] >> 4) << (2 * (r / 32)));
    }
  }
}

float vec_dot_q6_k(const void* w, const void* act, int64_t n_blocks) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(act);
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ6_K& blk = wb[b];
    int isum = 0;  // |isum| <= 16 * 128 * (16 * 32 * 127): fits in int32
    for (int s = 0; s < 16; ++s) {
      int sub = 0;
      for (int l = 0; l < 16; ++l) {
        sub += (code_q6_k(blk, 16 * s + l) - 32) * ab[b].qs[16 * s + l];
      }
      isum += blk.scales[s] * sub;
    }
    sum += fp16(blk.d) * ab[b].d * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace cera::quant::detail
