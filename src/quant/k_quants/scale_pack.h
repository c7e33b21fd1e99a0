// The 12-byte packing of eight 6-bit scales and eight 6-bit mins shared by Q4_K and Q5_K.
// Bytes 0-3: scale s (s < 4) in the low 6 bits, the top 2 bits of scale s+4 above them;
// bytes 4-7: the same for the mins; bytes 8-11: low nibble = scale s+4 & 15, high = min s+4 & 15.
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace cera::quant::detail {

struct ScaleMin {
  int scale;  // 0..63, multiplies d
  int min;    // 0..63, multiplies dmin
};

inline ScaleMin unpack_scale_min_k4(const uint8_t (&packed)[kScaleBytesK4], int s) {
  if (s < 4) return {packed[s] & 63, packed[s + 4] & 63};
  return {(packed[s + 4] & 0x0F) | ((packed[s - 4] >> 6) << 4),
          (packed[s + 4] >> 4) | ((packed[s] >> 6) << 4)};
}

inline void pack_scale_min_k4(const uint8_t (&scale)[8], const uint8_t (&min)[8],
                              uint8_t (&packed)[kScaleBytesK4]) {
  for (int s = 0; s < 4; ++s) {
    packed[s] = static_cast<uint8_t>(scale[s] | ((scale[s + 4] >> 4) << 6));
    packed[s + 4] = static_cast<uint8_t>(min[s] | ((min[s + 4] >> 4) << 6));
    packed[s + 8] = static_cast<uint8_t>((scale[s + 4] & 0x0F) | ((min[s + 4] & 0x0F) << 4));
  }
}

}  // namespace cera::quant::detail
