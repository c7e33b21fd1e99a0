// The R16 layout's repacking and row dequantization (plain C++: run once at load, or per row of
// embed). Layout and rationale in repack.h.
#include "ops/cpu/repack.h"

#include <cstring>

#include "core/check.h"
#include "core/half.h"
#include "quant/blocks.h"

namespace cera::ops::cpu {
namespace {

struct R16Format {
  int64_t src_block;   // bytes of one GGUF block
  int64_t code_off;    // offset of the codes in a tile
  int64_t code_bytes;  // code bytes per row per block (16 nibble bytes or 32 code bytes)
  bool has_min;
};

R16Format format_of(DType type) {
  switch (type) {
    case DType::kQ4_0: return {sizeof(quant::BlockQ4_0), 32, 16, false};
    case DType::kQ4_1: return {sizeof(quant::BlockQ4_1), 64, 16, true};
    case DType::kQ8_0: return {sizeof(quant::BlockQ8_0), 32, 32, false};
    default: return {0, 0, 0, false};
  }
}

}  // namespace

int64_t r16_tile_bytes(DType type) {
  const R16Format f = format_of(type);
  return f.src_block == 0 ? 0 : f.code_off + kR16Rows * f.code_bytes;
}

void r16_repack(DType type, const std::byte* src, int64_t src_stride, int64_t n_in, int64_t n_out,
                std::byte* dst, int64_t group_begin, int64_t group_end) {
  const R16Format f = format_of(type);
  CERA_CHECK(f.src_block != 0 && n_in % 32 == 0);
  const int64_t nb = n_in / 32;
  const int64_t tile = r16_tile_bytes(type);
  for (int64_t g = group_begin; g < group_end; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      std::byte* t = dst + (g * nb + b) * tile;
      std::memset(t, 0, static_cast<size_t>(tile));  // padding rows: zero scales and codes
      for (int64_t j = 0; j < kR16Rows && g * kR16Rows + j < n_out; ++j) {
        const std::byte* blk = src + (g * kR16Rows + j) * src_stride + b * f.src_block;
        std::memcpy(t + 2 * j, blk, 2);                          // d
        if (f.has_min) std::memcpy(t + 32 + 2 * j, blk + 2, 2);  // m
        const auto* qs = reinterpret_cast<const uint8_t*>(blk + (f.has_min ? 4 : 2));
        auto* codes = reinterpret_cast<uint8_t*>(t + f.code_off);
        for (int64_t k = 0; k < f.code_bytes / 4; ++k) {
          for (int i = 0; i < 4; ++i) {
            const uint8_t q = qs[4 * k + i];
            codes[64 * k + 4 * j + i] = f.code_bytes == 32 ? static_cast<uint8_t>(q ^ 0x80u) : q;
          }
        }
      }
    }
  }
}

void r16_dequantize_row(DType type, const std::byte* r16, int64_t n_in, int64_t row, float* out) {
  const R16Format f = format_of(type);
  CERA_CHECK(f.src_block != 0);
  const int64_t nb = n_in / 32;
  const int64_t tile = r16_tile_bytes(type);
  const int64_t g = row / kR16Rows, j = row % kR16Rows;
  for (int64_t b = 0; b < nb; ++b, out += 32) {
    const std::byte* t = r16 + (g * nb + b) * tile;
    uint16_t h;
    std::memcpy(&h, t + 2 * j, 2);
    const float d = half_to_float(h);
    float m = 0.0f;
    if (f.has_min) {
      std::memcpy(&h, t + 32 + 2 * j, 2);
      m = half_to_float(h);
    }
    const auto* codes = reinterpret_cast<const uint8_t*>(t + f.code_off);
    for (int64_t k = 0; k < f.code_bytes / 4; ++k) {
      for (int i = 0; i < 4; ++i) {
        const uint8_t q = codes[64 * k + 4 * j + i];
        if (f.code_bytes == 32) {
          out[4 * k + i] = static_cast<float>(static_cast<int>(q) - 128) * d;
        } else if (f.has_min) {
          out[4 * k + i] = static_cast<float>(q & 0x0F) * d + m;
          out[16 + 4 * k + i] = static_cast<float>(q >> 4) * d + m;
        } else {
          out[4 * k + i] = static_cast<float>((q & 0x0F) - 8) * d;
          out[16 + 4 * k + i] = static_cast<float>((q >> 4) - 8) * d;
        }
      }
    }
  }
}

}  // namespace cera::ops::cpu
