// Splits a code point range until both ends encode to the same length and each continuation
// position spans its full 0x80-0xBF range or shares one prefix, then reads the byte ranges off
// the two ends' encodings (the classic construction used by regex engines over UTF-8).
#include "runtime/grammar/utf8_ranges.h"

#include <algorithm>
#include <string>

#include "tokenizer/unicode/unicode.h"

namespace cera::runtime::grammar {
namespace {

// The UTF-8 bytes of cp (ranges here are normalized: no surrogate, at most U+10FFFF, so the
// tokenizer's encoder never substitutes U+FFFD).
int encode(uint32_t cp, uint8_t out[4]) {
  std::string bytes;
  tokenizer::unicode::append_utf8(bytes, cp);
  std::copy(bytes.begin(), bytes.end(), out);
  return static_cast<int>(bytes.size());
}

void split(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>& out) {
  if (lo > hi) return;
  // Different encoded lengths: cut at the length boundaries.
  for (uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= edge && hi > edge) {
      split(lo, edge, out);
      split(edge + 1, hi, out);
      return;
    }
  }
  uint8_t a[4], b[4];
  const int n = encode(lo, a);
  encode(hi, b);
  // For each suffix of i continuation bytes: either lo and hi share everything above it, or
  // lo starts it at 0x80 and hi ends it at 0xBF; otherwise cut so that this holds.
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  Utf8Sequence seq;
  seq.length = static_cast<uint8_t>(n);
  for (int i = 0; i < n; ++i) seq.bytes[i] = {a[i], b[i]};
  out.push_back(seq);
}

}  // namespace

std::vector<CodepointRange> normalize_ranges(std::vector<CodepointRange> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const CodepointRange& a, const CodepointRange& b) { return a.lo < b.lo; });
  std::vector<CodepointRange> merged;
  for (const CodepointRange& r : ranges) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  std::vector<CodepointRange> out;
  for (const CodepointRange& r : merged) {
    if (r.hi < 0xD800 || r.lo > 0xDFFF) {
      out.push_back(r);
      continue;
    }
    if (r.lo < 0xD800) out.push_back({r.lo, 0xD7FF});
    if (r.hi > 0xDFFF) out.push_back({0xE000, r.hi});
  }
  return out;
}

std::vector<CodepointRange> complement_ranges(const std::vector<CodepointRange>& ranges) {
  std::vector<CodepointRange> out;
  uint32_t next = 0;
  for (const CodepointRange& r : ranges) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) out.push_back({next, kMaxCodepoint});
  return normalize_ranges(std::move(out));
}

std::vector<Utf8Sequence> utf8_sequences(const std::vector<CodepointRange>& ranges) {
  std::vector<Utf8Sequence> out;
  for (const CodepointRange& r : ranges) split(r.lo, r.hi, out);
  return out;
}

}  // namespace cera::runtime::grammar
