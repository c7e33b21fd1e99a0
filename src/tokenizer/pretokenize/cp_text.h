// Internal to the pre-tokenizers: text decoded once into code points, their byte offsets and
// a class bit set, so every matcher is a few array loads per code point. Classification has
// an ASCII table fast path; everything else goes through unicode::category once per code point.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace cera::tokenizer::pretok {

// Class bits of one code point. kUpperish/kLowerish are the o200k/tekken letter classes
// [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and [\p{Ll}\p{Lm}\p{Lo}\p{M}].
enum CpClass : uint8_t {
  kLetter = 1 << 0,    // \p{L}
  kNumber = 1 << 1,    // \p{N}
  kPunct = 1 << 2,     // \p{P}
  kSymbol = 1 << 3,    // \p{S}
  kMark = 1 << 4,      // \p{M}
  kSpace = 1 << 5,     // \s (White_Space)
  kUpperish = 1 << 6,  // Lu Lt Lm Lo M
  kLowerish = 1 << 7,  // Ll Lm Lo M
};

uint8_t classify(uint32_t cp);

// A half-open range of code point indices.
struct Span {
  size_t begin;
  size_t end;
};

struct CpText {
  std::vector<uint32_t> cp;  // [n] code points (U+FFFD for each invalid byte)
  std::vector<size_t> off;   // [n + 1] byte offset of each code point, then the text size
  std::vector<uint8_t> cls;  // [n] CpClass bits

  void assign(std::string_view text);
  size_t size() const { return cp.size(); }
  bool has(size_t i, uint8_t bits) const { return (cls[i] & bits) != 0; }
  bool is(size_t i, uint32_t c) const { return cp[i] == c; }
  bool is_crlf(size_t i) const { return cp[i] == '\r' || cp[i] == '\n'; }

  // End of the run of code points starting at i (bounded by end) for which pred holds.
  template <typename Pred>
  size_t run(size_t i, size_t end, Pred pred) const {
    while (i < end && pred(i)) ++i;
    return i;
  }
  size_t run_of(size_t i, size_t end, uint8_t bits) const {
    while (i < end && (cls[i] & bits) != 0) ++i;
    return i;
  }
};

}  // namespace cera::tokenizer::pretok
