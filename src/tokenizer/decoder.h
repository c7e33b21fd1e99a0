// Token -> bytes: a table of every token's decoded piece built once at load (SPM/WordPiece:
// U+2581 -> space, <0xXX> -> the byte; BPE: GPT-2 characters -> bytes), and the one routine
// both decode() and StreamDecoder use to append a token, so the two can never disagree.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/options.h"
#include "tokenizer/vocab.h"

namespace cera::tokenizer {

class PieceTable {
 public:
  explicit PieceTable(const Vocab& vocab);

  // The bytes `id` stands for. Control/unknown tokens are "" unless render_special (then their
  // vocabulary text); user-defined tokens are always their text. Precondition: vocab.valid_id(id).
  std::string_view piece(const Vocab& vocab, int32_t id, bool render_special) const {
    const TokenType t = vocab.type(id);
    if (render_special && (t == TokenType::kControl || t == TokenType::kUnknown)) return vocab.text(id);
    return {bytes_.data() + offsets_[id], offsets_[id + 1] - offsets_[id]};
  }

 private:
  std::vector<char> bytes_;
  std::vector<size_t> offsets_;
};

// Decoding state carried between tokens: whether the next text token's leading space is the
// one encoding added (see DecodeOptions::strip_space_prefix).
struct DecodeCursor {
  bool strip_next_space = true;
};

// Appends the text of `id` to `out`; an id outside the vocabulary appends nothing.
void append_token_text(const Vocab& vocab, const PieceTable& pieces, int32_t id,
                       const DecodeOptions& options, DecodeCursor& cursor, std::string& out);

}  // namespace cera::tokenizer
