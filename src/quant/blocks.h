// Byte layouts of the GGUF block formats cera reads and writes (FORMATS.md), one struct per
// format. Structs mirror the on-disk bytes exactly (sizes are static_asserted), so a row of blocks
// is a plain array of them; fp16 fields are kept as raw uint16_t bits and decoded with core/half.h.
#pragma once

#include <bit>
#include <cstdint>

#include "core/dtype.h"

namespace cera::quant {

static_assert(std::endian::native == std::endian::little,
              "block layouts assume a little-endian host");

constexpr int kQK32 = 32;           // elements per block of the legacy formats and IQ4_NL
constexpr int kQK256 = int{kQK_K};  // elements per K-quant super-block
constexpr int kScaleBytesK4 = 12;   // packed 6-bit scales + mins of Q4_K / Q5_K

// value = (code - 8) * d
struct BlockQ4_0 {
  uint16_t d;             // fp16 scale
  uint8_t qs[kQK32 / 2];  // [16] byte j: element j in the low nibble, element j+16 in the high
};

// value = code * d + m
struct BlockQ4_1 {
  uint16_t d;             // fp16 scale
  uint16_t m;             // fp16 minimum (the value of code 0)
  uint8_t qs[kQK32 / 2];  // [16] nibbles, order as BlockQ4_0
};

// value = (code - 16) * d, code = low nibble | fifth bit << 4
struct BlockQ5_0 {
  uint16_t d;             // fp16 scale
  uint8_t qh[4];          // [32 bits] little-endian uint32, bit j = fifth bit of element j
  uint8_t qs[kQK32 / 2];  // [16] low nibbles, order as BlockQ4_0
};

// value = code * d + m
struct BlockQ5_1 {
  uint16_t d;             // fp16 scale
  uint16_t m;             // fp16 minimum
  uint8_t qh[4];          // [32 bits] fifth bits, as BlockQ5_0
  uint8_t qs[kQK32 / 2];  // [16] low nibbles
};

// value = q * d. Also the activation format paired with the 32-element weight blocks.
struct BlockQ8_0 {
  uint16_t d;        // fp16 scale
  int8_t qs[kQK32];  // [32] signed codes, element order
};

// value = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4), s = element / 16
struct BlockQ2_K {
  uint8_t scales[kQK256 / 16];  // [16] per 16-element sub-block: low nibble scale, high nibble min
  uint8_t qs[kQK256 / 4];       // [64] 2-bit codes: element 128h + 32j + l is bits 2j..2j+1 of
                                //      qs[32h + l] (h < 2, j < 4, l < 32)
  uint16_t d;                   // fp16 scale of the scales
  uint16_t dmin;                // fp16 scale of the mins
};

// value = d * (scale[s] - 32) * (low2 - (hmask bit clear ? 4 : 0)), s = element / 16
struct BlockQ3_K {
  uint8_t hmask[kQK256 / 8];  // [32] element 32j + l: bit j of hmask[l]
  uint8_t qs[kQK256 / 4];     // [64] low 2 bits, arranged as BlockQ2_K::qs
  uint8_t scales[12];         // sixteen 6-bit scales: low 4 bits in bytes 0-7 (s < 8 low nibble
                              // of byte s, else high nibble of byte s-8), high 2 bits in bytes
                              // 8-11 (bits 2k..2k+1 of byte 8 + s%4 for s / 4 == k)
  uint16_t d;                 // fp16 scale of the scales
};

// value = d * sc[s] * code - dmin * m[s], s = element / 32
struct BlockQ4_K {
  uint16_t d;                     // fp16 scale of the scales
  uint16_t dmin;                  // fp16 scale of the mins
  uint8_t scales[kScaleBytesK4];  // eight 6-bit scales + eight 6-bit mins (see scale_pack.h)
  uint8_t qs[kQK256 / 2];         // [128] 32-byte run r holds sub-block 2r in the low nibbles
                                  //       and sub-block 2r+1 in the high nibbles
};

// value = d * sc[s] * code - dmin * m[s], code = low nibble | fifth bit << 4
struct BlockQ5_K {
  uint16_t d;                     // fp16 scale of the scales
  uint16_t dmin;                  // fp16 scale of the mins
  uint8_t scales[kScaleBytesK4];  // as BlockQ4_K
  uint8_t qh[kQK256 / 8];         // [32] fifth bit of element 32s + l is bit s of qh[l]
  uint8_t qs[kQK256 / 2];         // [128] low nibbles, arranged as BlockQ4_K::qs
};

// value = d * scales[s] * (code - 32), code 6 bits, s = element / 16
struct BlockQ6_K {
  uint8_t ql[kQK256 / 2];      // [128] low 4 bits: element 128h + 64k + l (l < 64) is nibble k
                               //       of ql[64h + l]
  uint8_t qh[kQK256 / 4];      // [64] high 2 bits: element 128h + 32j + l is bits 2j..2j+1 of
                               //      qh[32h + l]
  int8_t scales[kQK256 / 16];  // [16] signed 8-bit sub-block scales
  uint16_t d;                  // fp16 scale of the scales
};

// Activation format paired with the 256-element weight blocks; never stored in files.
// value = d * q
struct BlockQ8_K {
  float d;                     // float32 scale (not fp16: activations keep full precision)
  int8_t qs[kQK256];           // [256] codes in element order, |q| <= 127
  int16_t bsums[kQK256 / 16];  // [16] sum of the 16 codes of each sub-block (for the min terms)
};

// value = d * kIq4nlValues[code]
struct BlockIQ4_NL {
  uint16_t d;             // fp16 scale
  uint8_t qs[kQK32 / 2];  // [16] nibbles, order as BlockQ4_0
};

// value = d * (ls[s] - 32) * kIq4nlValues[code], s = element / 32
struct BlockIQ4_XS {
  uint16_t d;                     // fp16 scale of the scales
  uint16_t scales_h;              // high 2 bits of the eight 6-bit scales: bits 2s..2s+1
  uint8_t scales_l[kQK256 / 64];  // [4] low 4 bits: sub-block s is nibble s%2 of byte s/2
  uint8_t qs[kQK256 / 2];         // [128] 16 bytes per sub-block, nibble order as BlockQ4_0
};

// The IQ4_NL / IQ4_XS non-linear code book (a fixed table of the format).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136);

}  // namespace cera::quant
