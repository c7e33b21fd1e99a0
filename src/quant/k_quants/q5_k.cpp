// Q5_K: Q4_K's scale layout with 5-bit codes (a 32-byte mask adds the fifth bit).
// value = (d*sc)*code - (dmin*m) like gguf; the quantizer shares Q4_K's search with nmax = 31.
#include <algorithm>
#include <iterator>

#include "quant/blocks.h"
#include "quant/internal.h"
#include "quant/k_quants/scale_pack.h"
#include "quant/k_quants/scale_search.h"

namespace cera::quant::detail {
namespace {

// Code of element 32s + l: nibble s%2 of qs[32*(s/2) + l], fifth bit = bit s of qh[l].
int code_q5_k(const BlockQ5_K& blk, int s, int l) {
  const int low = (blk.qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0x0F;
  return low | (((blk.qh[l] >> s) & 1) << 4);
}

}  // namespace

void dequantize_q5_k(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const BlockQ5_K*>(src);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ5_K& blk = blocks[b];
    const float d = fp16(blk.d);
    const float dmin = fp16(blk.dmin);
    for (int s = 0; s < 8; ++s, dst += 32) {
      const ScaleMin sm = unpack_scale_min_k4(blk.scales, s);
      const float ds = d * static_cast<float>(sm.scale);
      const float dm = dmin * static_cast<float>(sm.min);
      for (int l = 0; l < 32; ++l) dst[l] = ds * static_cast<float>(code_q5_k(blk, s, l)) - dm;
    }
  }
}

void quantize_q5_k(const float* src, void* dst, int64_t n_blocks) {
  auto* blocks = static_cast<BlockQ5_K*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQK256) {
    AffineSuperBlock sb;
    quantize_affine_superblock(src, 31, ScaleGrid{-0.5f, 0.1f, 15}, sb);
    BlockQ5_K& blk = blocks[b];
    blk.d = sb.d;
    blk.dmin = sb.dmin;
    std::copy(std::begin(sb.scales), std::end(sb.scales), blk.scales);
    std::fill(std::begin(blk.qh), std::end(blk.qh), uint8_t{0});
    for (int r = 0; r < 4; ++r) {
      for (int l = 0; l < 32; ++l) {
        const int lo = sb.codes[64 * r + l];
        const int hi = sb.codes[64 * r + 32 + l];
        blk.qs[32 * r + l] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
        blk.qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * r)) | ((hi >> 4) << (2 * r + 1)));
      }
    }
  }
}

float vec_dot_q5_k(const void* w, const void* act, int64_t n_blocks) {
  const auto* wb = static_cast<const BlockQ5_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(act);
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ5_K& blk = wb[b];
    const int8_t* a = ab[b].qs;
    int isum_scaled = 0;  // sum_s sc_s * sum(code * a)
    int isum_min = 0;     // sum_s m_s * sum(a), from the bsums
    for (int s = 0; s < 8; ++s) {
      const ScaleMin sm = unpack_scale_min_k4(blk.scales, s);
      int sub = 0;
      for (int l = 0; l < 32; ++l) sub += code_q5_k(blk, s, l) * a[32 * s + l];
      isum_scaled += sm.scale * sub;
      isum_min += sm.min * (ab[b].bsums[2 * s] + ab[b].bsums[2 * s + 1]);
    }
    sum += ab[b].d * (fp16(blk.d) * static_cast<float>(isum_scaled) -
                      fp16(blk.dmin) * static_cast<float>(isum_min));
  }
  return sum;
}

}  // namespace cera::quant::detail
