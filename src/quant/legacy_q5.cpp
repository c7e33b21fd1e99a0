// Q5_0 and Q5_1: 32 elements, 5-bit codes split into a nibble array and a 32-bit mask of fifth
// bits. Quantizers follow ggml's reference rounding and float order (byte-identical to gguf).
#include <algorithm>
#include <cstring>

#include "quant/blocks.h"
#include "quant/internal.h"

namespace cera::quant::detail {
namespace {

uint32_t load_qh(const uint8_t (&qh)[4]) {
  uint32_t v;
  std::memcpy(&v, qh, sizeof v);
  return v;
}

// Fills qs/qh from 32 five-bit codes.
void pack_q5(const uint8_t (&codes)[kQK32], uint8_t (&qs)[kQK32 / 2], uint8_t (&qh)[4]) {
  uint32_t high = 0;
  for (int j = 0; j < kQK32; ++j) high |= static_cast<uint32_t>(codes[j] >> 4) << j;
  for (int j = 0; j < kQK32 / 2; ++j) {
    qs[j] = static_cast<uint8_t>((codes[j] & 0x0F) | ((codes[j + 16] & 0x0F) << 4));
  }
  std::memcpy(qh, &high, sizeof high);
}

// The 5-bit code of element j.
int code_q5(const uint8_t (&qs)[kQK32 / 2], uint32_t high, int j) {
  const int low = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
  return low | static_cast<int>(((high >> j) & 1u) << 4);
}

}  // namespace

void dequantize_q5_0(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const BlockQ5_0*>(src);
  for (int64_t b = 0; b < n_blocks; ++b, dst += kQK32) {
    const float d = fp16(blocks[b].d);
    const uint32_t high = load_qh(blocks[b].qh);
    for (int j = 0; j < kQK32; ++j) {
      dst[j] = d * static_cast<float>(code_q5(blocks[b].qs, high, j) - 16);
    }
  }
}

void dequantize_q5_1(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const BlockQ5_1*>(src);
  for (int64_t b = 0; b < n_blocks; ++b, dst += kQK32) {
    const float d = fp16(blocks[b].d);
    const float m = fp16(blocks[b].m);
    const uint32_t high = load_qh(blocks[b].qh);
    for (int j = 0; j < kQK32; ++j) {
      dst[j] = d * static_cast<float>(code_q5(blocks[b].qs, high, j)) + m;
    }
  }
}

void quantize_q5_0(const float* src, void* dst, int64_t n_blocks) {
  auto* blocks = static_cast<BlockQ5_0*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQK32) {
    const float d = signed_absmax(src, kQK32) / -16.0f;  // extreme element -> code 0 (-16)
    const float id = inverse_or_zero(d);
    uint8_t codes[kQK32];
    for (int j = 0; j < kQK32; ++j) codes[j] = trunc_code(src[j] * id + 16.5f, 31);
    blocks[b].d = float_to_half(d);
    pack_q5(codes, blocks[b].qs, blocks[b].qh);
  }
}

void quantize_q5_1(const float* src, void* dst, int64_t n_blocks) {
  auto* blocks = static_cast<BlockQ5_1*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQK32) {
    const auto [min_it, max_it] = std::minmax_element(src, src + kQK32);
    const float min = *min_it;
    const float d = (*max_it - min) / 31.0f;
    const float id = inverse_or_zero(d);
    uint8_t codes[kQK32];
    for (int j = 0; j < kQK32; ++j) codes[j] = trunc_code((src[j] - min) * id + 0.5f, 31);
    blocks[b].d = float_to_half(d);
    blocks[b].m = float_to_half(min);
    pack_q5(codes, blocks[b].qs, blocks[b].qh);
  }
}

float vec_dot_q5_0(const void* w, const void* act, int64_t n_blocks) {
  const auto* wb = static_cast<const BlockQ5_0*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(act);
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint32_t high = load_qh(wb[b].qh);
    int isum = 0;
    for (int j = 0; j < kQK32; ++j) isum += (code_q5(wb[b].qs, high, j) - 16) * ab[b].qs[j];
    sum += fp16(wb[b].d) * fp16(ab[b].d) * static_cast<float>(isum);
  }
  return sum;
}

float vec_dot_q5_1(const void* w, const void* act, int64_t n_blocks) {
  const auto* wb = static_cast<const BlockQ5_1*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(act);
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint32_t high = load_qh(wb[b].qh);
    int isum = 0;
    int asum = 0;  // the minimum's term needs sum(a); see vec_dot_q4_1
    for (int j = 0; j < kQK32; ++j) {
      isum += code_q5(wb[b].qs, high, j) * ab[b].qs[j];
      asum += ab[b].qs[j];
    }
    const float da = fp16(ab[b].d);
    sum += fp16(wb[b].d) * da * static_cast<float>(isum) +
           fp16(wb[b].m) * da * static_cast<float>(asum);
  }
  return sum;
}

}  // namespace cera::quant::detail
