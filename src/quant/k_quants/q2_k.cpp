// Q2_K: 256-element super-blocks of sixteen 16-element sub-blocks, 2-bit codes, a 4-bit scale
// and 4-bit min per sub-block. Dequantization and the dot product with Q8_K activations, whose
// bsums carry the min term without touching the codes.
#include "quant/blocks.h"
#include "quant/internal.h"

namespace cera::quant::detail {
namespace {

// codes[e] for the 256 elements of a super-block (see BlockQ2_K::qs).
void unpack_codes(const BlockQ2_K& blk, uint8_t (&codes)[kQK256]) {
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l)
        codes[128 * h + 32 * j + l] = (blk.qs[32 * h + l] >> (2 * j)) & 3;
    }
  }
}

}  // namespace

void dequantize_q2_k(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const BlockQ2_K*>(src);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ2_K& blk = blocks[b];
    uint8_t codes[kQK256];
    unpack_codes(blk, codes);
    const float d = fp16(blk.d);
    const float dmin = fp16(blk.dmin);
    for (int s = 0; s < 16; ++s, dst += 16) {
      // gguf order: dl = d*sc, ml = dmin*m, then dl*q - ml.
      const float dl = d * static_cast<float>(blk.scales[s] & 0x0F);
      const float ml = dmin * static_cast<float>(blk.scales[s] >> 4);
      for (int l = 0; l < 16; ++l) dst[l] = dl * static_cast<float>(codes[16 * s + l]) - ml;
    }
  }
}

float vec_dot_q2_k(const void* w, const void* act, int64_t n_blocks) {
  const auto* wb = static_cast<const BlockQ2_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(act);
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ2_K& blk = wb[b];
    uint8_t codes[kQK256];
    unpack_codes(blk, codes);
    int isum_scaled = 0;  // sum_s sc_s * sum(code * a)
    int isum_min = 0;     // sum_s m_s * sum(a), from the precomputed bsums
    for (int s = 0; s < 16; ++s) {
      int isum = 0;
      for (int l = 0; l < 16; ++l) isum += codes[16 * s + l] * ab[b].qs[16 * s + l];
      isum_scaled += (blk.scales[s] & 0x0F) * isum;
      isum_min += (blk.scales[s] >> 4) * ab[b].bsums[s];
    }
    sum += ab[b].d * (fp16(blk.d) * static_cast<float>(isum_scaled) -
                      fp16(blk.dmin) * static_cast<float>(isum_min));
  }
  return sum;
}

}  // namespace cera::quant::detail
