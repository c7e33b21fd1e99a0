// WordPiece ("bert" vocabularies): BERT's basic tokenizer (clean control characters, split on
// whitespace, punctuation and CJK ideographs, optional accent strip + lowercase) followed by
// greedy longest-match-first. Vocabulary texts are in llama.cpp's converted spelling: a
// word-initial piece carries a U+2581 prefix and a continuation ("##x" in BERT) is plain "x".
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace cera::tokenizer {

class WordPieceEncoder {
 public:
  // BERT's max_input_chars_per_word: longer words become [UNK] without matching.
  static constexpr size_t kMaxWordChars = 100;

  // Appends the ids of `text` to `out`. Thread-safe.
  void encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) const;
};

// BERT's normalization and pre-tokenization alone, exposed for tests: the words in order.
void bert_basic_split(std::string_view text, bool lowercase, bool strip_accents,
                      std::vector<std::string>& words);

}  // namespace cera::tokenizer
