// Helpers of the reference-mask tests: allowed ids of a mask, printable token bytes, and the
// bytes a grammar forces next (the one kind of mask difference from llguidance that both the
// GBNF and the JSON-Schema comparisons explain the same way).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/grammar/grammar.h"

namespace cera::runtime::grammar::test {

inline std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  return out;
}

// The bytes that must come next: followed while exactly one byte is possible and the input may
// not end there.
inline std::string forced_continuation(const ByteMatcher& at) {
  std::string out;
  ByteMatcher m = at;
  for (int guard = 0; guard < 256 && !m.can_end(); ++guard) {
    int count = 0;
    char only = 0;
    for (int b = 0; b < 256 && count < 2; ++b) {
      ByteMatcher probe = m;
      const char c = static_cast<char>(b);
      if (probe.accept(std::string_view(&c, 1))) ++count, only = c;
    }
    if (count != 1) break;
    out += only;
    m.accept(std::string_view(&only, 1));
  }
  return out;
}

inline std::vector<int32_t> allowed_ids(const std::vector<uint32_t>& mask, int32_t n_vocab) {
  std::vector<int32_t> out;
  for (int32_t id = 0; id < n_vocab; ++id) {
    if ((mask[id >> 5] >> (id & 31)) & 1) out.push_back(id);
  }
  return out;
}

}  // namespace cera::runtime::grammar::test
