// Code point ranges -> the UTF-8 byte sequences that encode exactly them, so a character class
// becomes a small byte automaton. Each sequence is 1-4 byte ranges; a range's sequences are
// disjoint and every byte string they match is valid UTF-8 (no surrogates, no overlongs).
#pragma once

#include <cstdint>
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

// Precondition: ranges are sorted, disjoint, free of surrogates and at most U+10FFFF.
std::vector<Utf8Sequence> utf8_sequences(const std::vector<CodepointRange>& ranges);

}  // namespace cera::runtime::grammar
