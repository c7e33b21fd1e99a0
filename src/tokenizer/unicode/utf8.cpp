// UTF-8 decoding and encoding for the tokenizers. Decoding is strict (no overlongs, surrogates
// or values past U+10FFFF) and replaces one bad BYTE at a time, so byte offsets stay exact:
// pre-tokenizers return views that must cover every input byte.
#include "tokenizer/unicode/unicode.h"

namespace cera::tokenizer::unicode {
namespace {

// Range the byte after `lead` must fall in (the rest of the continuation bytes are 80..BF).
// This is where overlongs (E0, F0), surrogates (ED) and > U+10FFFF (F4) are rejected.
struct SecondByteRange {
  uint8_t lo;
  uint8_t hi;
};

SecondByteRange second_byte_range(uint8_t lead) {
  switch (lead) {
    case 0xE0:
      return {0xA0, 0xBF};
    case 0xED:
      return {0x80, 0x9F};
    case 0xF0:
      return {0x90, 0xBF};
    case 0xF4:
      return {0x80, 0x8F};
    default:
      return {0x80, 0xBF};
  }
}

bool is_continuation(uint8_t b) {
  return (b & 0xC0) == 0x80;
}

}  // namespace

size_t utf8_sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;  // continuation byte, or C0/C1 (always overlong)
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

uint32_t decode_utf8(std::string_view s, size_t& pos) {
  const auto lead = static_cast<uint8_t>(s[pos]);
  if (lead < 0x80) {
    ++pos;
    return lead;
  }
  const size_t len = utf8_sequence_length(lead);
  if (len == 0 || pos + len > s.size()) {
    ++pos;
    return kReplacementChar;
  }
  const auto b1 = static_cast<uint8_t>(s[pos + 1]);
  const SecondByteRange r = second_byte_range(lead);
  if (b1 < r.lo || b1 > r.hi) {
    ++pos;
    return kReplacementChar;
  }
  uint32_t cp = (len == 2) ? (lead & 0x1Fu) : (len == 3) ? (lead & 0x0Fu) : (lead & 0x07u);
  cp = (cp << 6) | (b1 & 0x3Fu);
  for (size_t i = 2; i < len; ++i) {
    const auto b = static_cast<uint8_t>(s[pos + i]);
    if (!is_continuation(b)) {
      ++pos;
      return kReplacementChar;
    }
    cp = (cp << 6) | (b & 0x3Fu);
  }
  pos += len;
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacementChar;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t utf8_complete_prefix(std::string_view s) {
  // Only the last 3 bytes can belong to an unfinished sequence (the longest is 4 bytes).
  const size_t n = s.size();
  const size_t stop = n > 3 ? n - 3 : 0;
  for (size_t p = n; p-- > stop;) {
    const auto b = static_cast<uint8_t>(s[p]);
    if (is_continuation(b)) continue;
    const size_t len = utf8_sequence_length(b);
    if (len <= 1 || p + len <= n) return n;  // ASCII, invalid lead, or a finished sequence
    // Unfinished: hold it back only if the bytes so far could still become valid.
    if (p + 1 < n) {
      const auto b1 = static_cast<uint8_t>(s[p + 1]);
      const SecondByteRange r = second_byte_range(b);
      if (b1 < r.lo || b1 > r.hi) return n;
    }
    return p;
  }
  return n;
}

}  // namespace cera::tokenizer::unicode
