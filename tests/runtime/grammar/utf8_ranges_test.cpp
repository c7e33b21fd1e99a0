// GrammarUtf8: the byte sequences of a code point class match exactly the UTF-8 encodings of
// its members, checked for every code point 0..U+10FFFF on class sets with edges at every
// encoding-length and continuation-byte boundary (encoded by the tokenizer's UTF-8 encoder, tested against the standard's table there).
#include "runtime/grammar/utf8_ranges.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "tokenizer/unicode/unicode.h"

namespace cera::runtime::grammar {
namespace {

bool matched(const std::vector<Utf8Sequence>& seqs, const uint8_t* b, int n) {
  int hits = 0;
  for (const Utf8Sequence& s : seqs) {
    if (s.length != n) continue;
    bool all = true;
    for (int i = 0; i < n; ++i) all = all && b[i] >= s.bytes[i].lo && b[i] <= s.bytes[i].hi;
    hits += all;
  }
  EXPECT_LE(hits, 1) << "sequences overlap";
  return hits == 1;
}

void check_exhaustive(const std::vector<CodepointRange>& ranges) {
  const auto seqs = utf8_sequences(ranges);
  size_t r = 0;
  std::string bytes;
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    while (r < ranges.size() && ranges[r].hi < cp) ++r;
    const bool member = r < ranges.size() && ranges[r].lo <= cp;
    bytes.clear();
    tokenizer::unicode::append_utf8(bytes, cp);
    ASSERT_EQ(matched(seqs, reinterpret_cast<const uint8_t*>(bytes.data()), static_cast<int>(bytes.size())), member)
        << std::hex << "U+" << cp;
  }
  // Every sequence is inside valid UTF-8: no surrogate (ED A0..BF) and no overlong lead.
  for (const Utf8Sequence& s : seqs) {
    EXPECT_FALSE(s.length == 3 && s.bytes[0].lo <= 0xED && s.bytes[0].hi >= 0xED && s.bytes[1].hi >= 0xA0);
    EXPECT_FALSE(s.length == 2 && s.bytes[0].lo < 0xC2);
  }
}

TEST(GrammarUtf8, BoundariesExhaustive) {
  check_exhaustive({{0, 0xD7FF}, {0xE000, 0x10FFFF}});  // every character (the parser drops surrogates)
  check_exhaustive({{0x41, 0x5A}, {0x7F, 0x80}, {0x7FF, 0x800}, {0xFFF, 0x1000}, {0xD7FF, 0xD7FF},
                    {0xE000, 0xE000}, {0xFFFF, 0x10000}, {0x3FFFF, 0x40000}, {0x10FFFF, 0x10FFFF}});
  check_exhaustive({{0x3B1, 0x3C9}, {0x4E00, 0x9FA5}, {0x1F600, 0x1F64F}});
}

TEST(GrammarUtf8, RandomRanges) {
  std::mt19937 rng(4);
  for (int t = 0; t < 6; ++t) {
    std::vector<uint32_t> cuts;
    for (int i = 0; i < 8; ++i) {
      uint32_t c = rng() % 0x110000;
      if (c >= 0xD800 && c <= 0xDFFF) c = 0xD7FF;
      cuts.push_back(c);
    }
    std::sort(cuts.begin(), cuts.end());
    std::vector<CodepointRange> ranges;
    for (size_t i = 0; i + 1 < cuts.size(); i += 2) {
      uint32_t lo = cuts[i], hi = cuts[i + 1];
      if (!ranges.empty() && lo <= ranges.back().hi + 1) continue;
      // Keep the surrogate block out, as the parser does.
      if (lo < 0xD800 && hi >= 0xD800) {
        ranges.push_back({lo, 0xD7FF});
        if (hi > 0xDFFF) ranges.push_back({0xE000, hi});
        continue;
      }
      ranges.push_back({lo, hi});
    }
    check_exhaustive(ranges);
  }
}

}  // namespace
}  // namespace cera::runtime::grammar
