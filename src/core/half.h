// IEEE binary16 and bfloat16 conversions, bit-exact with numpy and the gguf Python package:
// float -> half and float -> bf16 round to nearest even; NaN stays NaN but is made quiet (numpy
// keeps a signalling NaN's payload as is: 0x7f800001 gives numpy 0x7c01, cera 0x7e00).
#pragma once

#include <bit>
#include <cstdint>

namespace cera {

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: value = mant * 2^-24, exact in float
      float f = static_cast<float>(mant) * 0x1p-24f;
      bits = sign | std::bit_cast<uint32_t>(f);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

inline uint16_t float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((ax >> 13) & 0x3ffu);  // NaN
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: infinity
  if (ax < 0x38800000u) {                         // below the smallest normal half: subnormal
    // value in units of 2^-24, rounded to nearest even.
    const uint32_t e = ax >> 23;
    if (e < 102) return sign;  // < 2^-25: rounds to zero
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // m * 2^(e-150) / 2^-24 = m >> (126 - e)
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return sign | static_cast<uint16_t>(q);
  }
  // Normal: rebias exponent and round the 13 dropped mantissa bits to nearest even.
  uint32_t r = ax - 0x38000000u;  // exponent 127 -> 15
  r += 0x0fffu + ((r >> 13) & 1u);
  return sign | static_cast<uint16_t>(r >> 13);
}

inline float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

inline uint16_t float_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace cera
