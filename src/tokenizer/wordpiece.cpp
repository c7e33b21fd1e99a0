// BERT basic tokenization + WordPiece greedy matching. The character classes follow the HF Rust
// implementation (the oracle of the fixture): "control" is any C* category except \t \n \r,
// whitespace is White_Space plus \t \n \r, punctuation is P* or ASCII punctuation, and the CJK
// ranges are BERT's own (including HF's 0x2B920 start of the Extension E range).
#include "tokenizer/wordpiece.h"

#include <string>

#include "tokenizer/unicode/unicode.h"

namespace cera::tokenizer {
namespace {

namespace uc = unicode;

constexpr std::string_view kWordStart = "\xE2\x96\x81";  // U+2581

bool is_bert_control(uint32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  return uc::category(cp) >= uc::Category::Cc;
}

bool is_bert_whitespace(uint32_t cp) {
  return cp == '\t' || cp == '\n' || cp == '\r' || uc::is_whitespace(cp);
}

bool is_bert_punctuation(uint32_t cp) {
  const bool ascii_punct = (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) ||
                           (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126);
  return ascii_punct || uc::is_punctuation(cp);
}

bool is_bert_chinese(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// Calls emit(cp) for each code point `cp` normalizes to (NFD minus Mn marks, then lowercase).
template <class Emit>
void normalize(uint32_t cp, bool lowercase, bool strip_accents, Emit&& emit) {
  auto finish = [&](uint32_t c) { emit(lowercase ? uc::to_lower(c) : c); };
  if (!strip_accents) {
    finish(cp);
    return;
  }
  const std::span<const uint32_t> parts = uc::nfd(cp);
  if (parts.empty()) {
    if (uc::category(cp) != uc::Category::Mn) finish(cp);
    return;
  }
  for (uint32_t c : parts) {
    if (uc::category(c) != uc::Category::Mn) finish(c);
  }
}

// Splits into words; calls on_word(std::string_view) for each non-empty word.
template <class OnWord>
void basic_split(std::string_view text, bool lowercase, bool strip_accents, std::string& word,
                 OnWord&& on_word) {
  word.clear();
  auto flush = [&] {
    if (!word.empty()) on_word(std::string_view(word));
    word.clear();
  };
  for (size_t pos = 0; pos < text.size();) {
    const uint32_t cp = uc::decode_utf8(text, pos);
    if (cp == 0 || cp == uc::kReplacementChar || is_bert_control(cp)) continue;
    if (is_bert_whitespace(cp)) {
      flush();
      continue;
    }
    const bool alone = is_bert_chinese(cp);
    if (alone) flush();
    normalize(cp, lowercase, strip_accents, [&](uint32_t c) {
      if (is_bert_punctuation(c)) {
        flush();
        uc::append_utf8(word, c);
        flush();
      } else {
        uc::append_utf8(word, c);
      }
    });
    if (alone) flush();
  }
  flush();
}

}  // namespace

void bert_basic_split(std::string_view text, bool lowercase, bool strip_accents,
                      std::vector<std::string>& words) {
  words.clear();
  std::string word;
  basic_split(text, lowercase, strip_accents, word,
              [&](std::string_view w) { words.emplace_back(w); });
}

void WordPieceEncoder::encode(const Vocab& vocab, std::string_view text,
                              std::vector<int32_t>& out) const {
  const VocabFlags& flags = vocab.flags();
  const int32_t unk = vocab.special().unk;
  std::string word;
  std::string prefixed;  // U+2581 + word: the first piece is matched with the marker
  std::vector<uint32_t> bounds;  // byte offsets of character starts in `prefixed`, then its size
  basic_split(text, flags.lowercase, flags.strip_accents, word, [&](std::string_view w) {
    prefixed.assign(kWordStart).append(w);
    bounds.clear();
    bounds.push_back(0);  // the first piece starts before the marker
    for (size_t pos = kWordStart.size(); pos < prefixed.size();) {
      uc::decode_utf8(prefixed, pos);
      bounds.push_back(static_cast<uint32_t>(pos));
    }
    // bounds[0] = 0, bounds[k] = end of the k-th character (k >= 1); n_chars = size - 1.
    const size_t n_chars = bounds.size() - 1;
    const size_t first_new = out.size();
    bool ok = n_chars <= kMaxWordChars;
    for (size_t start = 0; ok && start < n_chars;) {
      size_t end = n_chars;
      int32_t found = kNoToken;
      for (; end > start; --end) {
        const size_t from = start == 0 ? 0 : bounds[start];
        const size_t bytes = bounds[end] - from;
        if (bytes > vocab.max_token_bytes()) continue;
        found = vocab.find(std::string_view(prefixed).substr(from, bytes));
        if (found != kNoToken) break;
      }
      if (found == kNoToken) {
        ok = false;
        break;
      }
      out.push_back(found);
      start = end;
    }
    if (!ok) {
      out.resize(first_new);
      if (unk != kNoToken) out.push_back(unk);
    }
  });
}

}  // namespace cera::tokenizer
