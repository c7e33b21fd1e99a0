// Partitioning text on special-token texts before the model's encoder runs. Matching follows
// llama.cpp: candidates are taken longest text first and each one splits every remaining text
// fragment at all its occurrences. User-defined tokens are always matched (HF's added tokens);
// control and unknown tokens only when the caller asks to parse special tokens.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "tokenizer/options.h"
#include "tokenizer/vocab.h"

namespace cera::tokenizer {

// One piece of the partitioned input: a special token, or a run of text to encode normally.
struct Fragment {
  int32_t token = kNoToken;  // kNoToken for a text fragment
  uint32_t offset = 0;       // text fragments: the bytes [offset, offset + length) of the input
  uint32_t length = 0;
};

class SpecialTokenMatcher {
 public:
  explicit SpecialTokenMatcher(const Vocab& vocab);

  // Replaces `out` with the fragments of `text` in order. Control and unknown tokens are
  // matched only with parse_special and never across `plain` (EncodeOptions::plain_ranges).
  // Precondition: text.size() < 4 GiB.
  void partition(const Vocab& vocab, std::string_view text, bool parse_special,
                 std::span<const TextRange> plain, std::vector<Fragment>& out) const;

 private:
  std::vector<int32_t> all_;           // control, unknown and user-defined; longest text first
  std::vector<int32_t> user_defined_;  // the user-defined subset, same order
};

}  // namespace cera::tokenizer
