// Decoding + classification for the pre-tokenizers (see cp_text.h). The ASCII class table is
// computed at compile time from unicode.h's rules so ASCII text never touches the big tables.
#include "tokenizer/pretokenize/cp_text.h"

#include <array>

#include "tokenizer/unicode/unicode.h"

namespace cera::tokenizer::pretok {
namespace {

using unicode::Category;

uint8_t classify_category(Category c) {
  uint8_t bits = 0;
  if (unicode::is_letter(c)) bits |= kLetter;
  if (unicode::is_number(c)) bits |= kNumber;
  if (unicode::is_punctuation(c)) bits |= kPunct;
  if (unicode::is_symbol(c)) bits |= kSymbol;
  if (unicode::is_mark(c)) bits |= kMark;
  const bool either_case = c == Category::Lm || c == Category::Lo || unicode::is_mark(c);
  if (either_case || c == Category::Lu || c == Category::Lt) bits |= kUpperish;
  if (either_case || c == Category::Ll) bits |= kLowerish;
  return bits;
}

// ASCII categories, written out so the table is a compile-time constant.
constexpr std::array<uint8_t, 128> make_ascii_table() {
  std::array<uint8_t, 128> t{};
  for (uint32_t c = 0; c < 128; ++c) {
    uint8_t bits = 0;
    if ((c >= 9 && c <= 13) || c == ' ')
      bits = kSpace;
    else if (c >= '0' && c <= '9')
      bits = kNumber;
    else if (c >= 'A' && c <= 'Z')
      bits = kLetter | kUpperish;
    else if (c >= 'a' && c <= 'z')
      bits = kLetter | kLowerish;
    else if (c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' || c == '`' ||
             c == '|' || c == '~')
      bits = kSymbol;
    else if (c > ' ' && c < 127)
      bits = kPunct;
    t[c] = bits;  // other controls (Cc) have no class bits
  }
  return t;
}
constexpr std::array<uint8_t, 128> kAsciiClass = make_ascii_table();

}  // namespace

uint8_t classify(uint32_t cp) {
  if (cp < 128) return kAsciiClass[cp];
  uint8_t bits = classify_category(unicode::category(cp));
  if (unicode::is_whitespace(cp)) bits |= kSpace;
  return bits;
}

void CpText::assign(std::string_view text) {
  const size_t n = text.size();
  // Sized for the worst case (all ASCII), then trimmed: one bounds-free write per code point.
  cp.resize(n);
  off.resize(n + 1);
  cls.resize(n);
  size_t count = 0;
  size_t pos = 0;
  while (pos < n) {
    off[count] = pos;
    const auto b = static_cast<uint8_t>(text[pos]);
    if (b < 0x80) {
      cp[count] = b;
      cls[count] = kAsciiClass[b];
      ++pos;
    } else {
      const uint32_t c = unicode::decode_utf8(text, pos);
      cp[count] = c;
      cls[count] = classify(c);
    }
    ++count;
  }
  off[count] = n;
  cp.resize(count);
  off.resize(count + 1);
  cls.resize(count);
}

}  // namespace cera::tokenizer::pretok
