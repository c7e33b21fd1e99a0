// SentencePiece-style encoding ("llama" vocabularies): spaces become U+2581, adjacent symbols
// are merged best-score-first while the merged text is a token, and what stays unknown falls
// back to <0xXX> byte tokens. Stateless after construction; safe to share between threads.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace cera::tokenizer {

class SpmEncoder {
 public:
  explicit SpmEncoder(const Vocab& vocab);

  // Appends the ids of `text` (raw, not yet escaped) to `out`; with `space_prefix` one space is
  // put in front first, as SentencePiece's add_dummy_prefix does.
  void encode(const Vocab& vocab, std::string_view text, bool space_prefix,
              std::vector<int32_t>& out) const;

 private:
  struct Scratch;
  void encode_chunk(const Vocab& vocab, std::string_view s, Scratch& scratch,
                    std::vector<int32_t>& out) const;

  // True when no token has U+2581 right after another character than U+2581: then no merge can
  // cross the start of a space run, and each chunk between such points is merged on its own
  // (same result, small heaps: ~10x faster on long text).
  bool split_at_spaces_ = false;
  // The token for each raw byte: <0xXX>, else the one-byte text, else unk, else kNoToken.
  std::array<int32_t, 256> byte_token_{};
};

}  // namespace cera::tokenizer
