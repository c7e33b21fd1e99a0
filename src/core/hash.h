// The one 64-bit integer mixer of the project (SplitMix64's finalizer): every bit of the input
// reaches every bit of the output, so the low bits index a power-of-two table well.
#pragma once

#include <cstdint>

namespace cera {

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace cera
