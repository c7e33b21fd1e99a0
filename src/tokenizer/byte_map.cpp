// Compile-time tables for the GPT-2 byte mapping (see byte_map.h).
#include "tokenizer/byte_map.h"

#include <array>

namespace cera::tokenizer {
namespace {

constexpr bool is_self_mapped(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<uint32_t, 256> cp{};
  std::array<int16_t, 324> byte{};  // indexed by code point; the mapping's image is < U+0144
  std::array<std::array<char, 2>, 256> utf8{};
  std::array<uint8_t, 256> utf8_len{};
};

constexpr Tables make_tables() {
  Tables t;
  for (auto& b : t.byte) b = -1;
  unsigned next = 256;
  for (unsigned b = 0; b < 256; ++b) {
    const uint32_t cp = is_self_mapped(b) ? b : next++;
    t.cp[b] = cp;
    t.byte[cp] = static_cast<int16_t>(b);
    if (cp < 0x80) {
      t.utf8[b] = {static_cast<char>(cp), 0};
      t.utf8_len[b] = 1;
    } else {
      t.utf8[b] = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
      t.utf8_len[b] = 2;
    }
  }
  return t;
}

constexpr Tables kTables = make_tables();
static_assert(kTables.cp[' '] == 0x120, "space must map to U+0120");
static_assert(kTables.cp[0xAD] == 0x143, "the last unprintable byte maps to U+0143");

}  // namespace

uint32_t byte_to_codepoint(uint8_t byte) { return kTables.cp[byte]; }

std::string_view byte_to_utf8(uint8_t byte) {
  return {kTables.utf8[byte].data(), kTables.utf8_len[byte]};
}

int codepoint_to_byte(uint32_t cp) { return cp < kTables.byte.size() ? kTables.byte[cp] : -1; }

}  // namespace cera::tokenizer
