// Q3_K: 256-element super-blocks, 3-bit codes split into 2 low bits and a high-bit mask (a clear
// bit subtracts 4: codes run -4..3), sixteen 6-bit signed sub-block scales. Dequantization and
// the dot product with Q8_K activations.
#include "quant/blocks.h"
#include "quant/internal.h"

namespace cera::quant::detail {
namespace {

// Signed codes -4..3 of the 256 elements (see BlockQ3_K).
void unpack_codes(const BlockQ3_K& blk, int8_t (&codes)[kQK256]) {
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) {
        const int e = 128 * h + 32 * j + l;
        const int low = (blk.qs[32 * h + l] >> (2 * j)) & 3;
        const int high = (blk.hmask[l] >> (e / 32)) & 1;
        codes[e] = static_cast<int8_t>(low - (high ? 0 : 4));
      }
    }
  }
}

// Scale of sub-block s, -32..31.
int unpack_scale(const BlockQ3_K& blk, int s) {
  const int low = (blk.scales[s % 8] >> (4 * (s / 8))) & 0x0F;
  const int high = (blk.scales[8 + s % 4] >> (2 * (s / 4))) & 0x03;
  return (low | (high << 4)) - 32;
}

}  // namespace

void dequantize_q3_k(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const BlockQ3_K*>(src);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ3_K& blk = blocks[b];
    int8_t codes[kQK256];
    unpack_codes(blk, codes);
    const float d = fp16(blk.d);
    for (int s = 0; s < 16; ++s, dst += 16) {
      const float dl = d * static_cast<float>(unpack_scale(blk, s));
      for (int l = 0; l < 16; ++l) dst[l] = dl * static_cast<float>(codes[16 * s + l]);
    }
  }
}

float vec_dot_q3_k(const void* w, const void* act, int64_t n_blocks) {
  const auto* wb = static_cast<const BlockQ3_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(act);
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ3_K& blk = wb[b];
    int8_t codes[kQK256];
    unpack_codes(blk, codes);
    int isum = 0;  // |isum| <= 16 * 32 * (16 * 4 * 127): fits in int32
    for (int s = 0; s < 16; ++s) {
      int sub = 0;
      for (int l = 0; l < 16; ++l) sub += codes[16 * s + l] * ab[b].qs[16 * s + l];
      isum += unpack_scale(blk, s) * sub;
    }
    sum += fp16(blk.d) * ab[b].d * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace cera::quant::detail
