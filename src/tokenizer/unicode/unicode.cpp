// Table lookups behind unicode.h. Category is a two-level table (O(1), 162 shared 256-entry
// blocks, ~50 KB); the sparser properties (lowercase, decomposition, combining class) are
// binary searches over generated runs, each behind an ASCII/Latin fast path.
#include <algorithm>
#include <array>

#include "tokenizer/unicode/generated/unicode_tables.h"
#include "tokenizer/unicode/unicode.h"

namespace cera::tokenizer::unicode {
namespace gen = generated;

Category category(uint32_t cp) {
  if (cp > kMaxCodePoint) return Category::Cn;
  const uint32_t block = gen::kCategoryStage1[cp >> gen::kCategoryBlockShift];
  const uint32_t mask = (1u << gen::kCategoryBlockShift) - 1;
  return static_cast<Category>(
      gen::kCategoryStage2[(block << gen::kCategoryBlockShift) | (cp & mask)]);
}

bool is_whitespace(uint32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20;
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

uint32_t to_lower(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  // Last run whose first code point is <= cp.
  const auto* end = std::end(gen::kLowerRuns);
  const auto* it = std::upper_bound(std::begin(gen::kLowerRuns), end, cp,
                                    [](uint32_t c, const gen::LowerRun& r) { return c < r.first; });
  if (it == std::begin(gen::kLowerRuns)) return cp;
  const gen::LowerRun& r = *(it - 1);
  const uint32_t off = cp - r.first;
  if (off % r.stride != 0 || off / r.stride >= r.count) return cp;
  return static_cast<uint32_t>(static_cast<int64_t>(cp) + r.delta);
}

namespace {

// Hangul syllables (U+AC00..U+D7A3) decompose arithmetically into L V [T] jamo. To hand out a
// span into static storage, keep every L V T triple (T >= 1) once; an LV syllable uses the
// first two entries of its (l, v, T=1) triple. 19*21*27*3 uint32 = 129 KB of rodata.
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr uint32_t kSCount = kLCount * kVCount * kTCount;
constexpr uint32_t kTriples = kLCount * kVCount * (kTCount - 1);

constexpr std::array<uint32_t, kTriples * 3> make_hangul_triples() {
  std::array<uint32_t, kTriples * 3> out{};
  for (uint32_t lv = 0; lv < kLCount * kVCount; ++lv) {
    for (uint32_t t = 1; t < kTCount; ++t) {
      const uint32_t i = (lv * (kTCount - 1) + (t - 1)) * 3;
      out[i] = kLBase + lv / kVCount;
      out[i + 1] = kVBase + lv % kVCount;
      out[i + 2] = kTBase + t;
    }
  }
  return out;
}
constexpr auto kHangulTriples = make_hangul_triples();

}  // namespace

std::span<const uint32_t> nfd(uint32_t cp) {
  if (cp < 0xC0) return {};  // nothing below U+00C0 decomposes
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    const uint32_t lv = s / kTCount, t = s % kTCount;
    const uint32_t triple = lv * (kTCount - 1) + (t == 0 ? 0 : t - 1);
    return {kHangulTriples.data() + triple * 3, t == 0 ? 2u : 3u};
  }
  const auto* end = std::end(gen::kDecompositions);
  const auto* it =
      std::lower_bound(std::begin(gen::kDecompositions), end, cp,
                       [](const gen::Decomposition& d, uint32_t c) { return d.cp < c; });
  if (it == end || it->cp != cp) return {};
  return {gen::kDecompositionPool + it->offset, it->length};
}

uint8_t combining_class(uint32_t cp) {
  if (cp < 0x300) return 0;
  const auto* end = std::end(gen::kCombiningRuns);
  const auto* it =
      std::upper_bound(std::begin(gen::kCombiningRuns), end, cp,
                       [](uint32_t c, const gen::CombiningRun& r) { return c < r.first; });
  if (it == std::begin(gen::kCombiningRuns)) return 0;
  const gen::CombiningRun& r = *(it - 1);
  return cp <= r.last ? r.ccc : 0;
}

bool is_cjk_ideograph(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

}  // namespace cera::tokenizer::unicode
