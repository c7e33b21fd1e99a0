// Code point ranges (character classes): normalizing, complementing, and turning them into the
// UTF-8 byte sequences that encode exactly them, so a class becomes a small byte automaton.
// Each sequence is 1-4 byte ranges; sequences are disjoint and match only valid UTF-8 (no
// surrogates, no overlong forms), which is why surrogates are removed from every range.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/grammar/gbnf_ast.h"

namespace cera::runtime::grammar {

struct ByteRange {
  uint8_t lo = 0;
  uint8_t hi = 0;  // inclusive
};

struct Utf8Sequence {
  ByteRange bytes[4];
  uint8_t length = 0;
};

inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// Precondition: ranges are sorted, disjoint, free of surrogates and at most U+10FFFF.
std::vector<Utf8Sequence> utf8_sequences(const std::vector<CodepointRange>& ranges);

// Sorted, merged, surrogates (never characters in UTF-8) removed.
std::vector<CodepointRange> normalize_ranges(std::vector<CodepointRange> ranges);
// Every character not in `ranges` (which must be normalized).
std::vector<CodepointRange> complement_ranges(const std::vector<CodepointRange>& ranges);

}  // namespace cera::runtime::grammar
