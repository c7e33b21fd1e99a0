// IQ4_NL (32-element blocks) and IQ4_XS (256-element super-blocks with 6-bit sub-block scales):
// 4-bit codes index the fixed non-linear code book kIq4nlValues. Dequantization and dot products
// only; their quantizers need an importance-weighted search over the code book (not yet needed).
#include "quant/blocks.h"
#include "quant/internal.h"

namespace cera::quant::detail {
namespace {

// Sub-block s of an IQ4_XS super-block uses d * (ls - 32), ls a 6-bit unsigned scale.
int iq4_xs_scale(const BlockIQ4_XS& blk, int s) {
  const int low = (blk.scales_l[s / 2] >> (4 * (s % 2))) & 0x0F;
  const int high = (blk.scales_h >> (2 * s)) & 0x03;
  return (low | (high << 4)) - 32;
}

}  // namespace

void dequantize_iq4_nl(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const BlockIQ4_NL*>(src);
  for (int64_t b = 0; b < n_blocks; ++b, dst += kQK32) {
    const float d = fp16(blocks[b].d);
    for (int j = 0; j < kQK32 / 2; ++j) {
      dst[j] = d * static_cast<float>(kIq4nlValues[blocks[b].qs[j] & 0x0F]);
      dst[j + 16] = d * static_cast<float>(kIq4nlValues[blocks[b].qs[j] >> 4]);
    }
  }
}

void dequantize_iq4_xs(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const BlockIQ4_XS*>(src);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockIQ4_XS& blk = blocks[b];
    const float d = fp16(blk.d);
    for (int s = 0; s < kQK256 / 32; ++s, dst += 32) {
      const float dl = d * static_cast<float>(iq4_xs_scale(blk, s));
      const uint8_t* qs = blk.qs + 16 * s;
      for (int j = 0; j < 16; ++j) {
        dst[j] = dl * static_cast<float>(kIq4nlValues[qs[j] & 0x0F]);
        dst[j + 16] = dl * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
      }
    }
  }
}

float vec_dot_iq4_nl(const void* w, const void* act, int64_t n_blocks) {
  const auto* wb = static_cast<const BlockIQ4_NL*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(act);
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int isum = 0;
    for (int j = 0; j < kQK32 / 2; ++j) {
      isum += kIq4nlValues[wb[b].qs[j] & 0x0F] * ab[b].qs[j];
      isum += kIq4nlValues[wb[b].qs[j] >> 4] * ab[b].qs[j + 16];
    }
    sum += fp16(wb[b].d) * fp16(ab[b].d) * static_cast<float>(isum);
  }
  return sum;
}

float vec_dot_iq4_xs(const void* w, const void* act, int64_t n_blocks) {
  const auto* wb = static_cast<const BlockIQ4_XS*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(act);
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockIQ4_XS& blk = wb[b];
    const int8_t* a = ab[b].qs;
    int isum = 0;  // |isum| <= 8 * 32 * 32 * 127 * 127: fits in int32
    for (int s = 0; s < kQK256 / 32; ++s, a += 32) {
      const uint8_t* qs = blk.qs + 16 * s;
      int sub = 0;
      for (int j = 0; j < 16; ++j) {
        sub += kIq4nlValues[qs[j] & 0x0F] * a[j] + kIq4nlValues[qs[j] >> 4] * a[j + 16];
      }
      isum += iq4_xs_scale(blk, s) * sub;
    }
    sum += fp16(blk.d) * ab[b].d * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace cera::quant::detail
