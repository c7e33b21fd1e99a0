// Stop strings while text streams out: the bytes that must wait because the next token could
// complete a stop string. The engine loop's rule (every front end generates through it); the
// tests' reference decode (tests/generate_helpers.h) follows it too.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace cera::runtime {

// Length of the longest suffix of `text` that is a proper prefix of one of `stops` (empty stop
// strings match nothing).
inline size_t held_suffix(std::string_view text, const std::vector<std::string>& stops) {
  size_t held = 0;
  for (const std::string& stop : stops) {
    if (stop.empty()) continue;
    for (size_t n = std::min(text.size(), stop.size() - 1); n > held; --n) {
      if (text.substr(text.size() - n) == std::string_view(stop).substr(0, n)) {
        held = n;
        break;
      }
    }
  }
  return held;
}

}  // namespace cera::runtime
