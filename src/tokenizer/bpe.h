// Byte-level BPE ("gpt2" vocabularies): the colleague's pre-tokenizer splits text into words,
// each word's bytes become GPT-2-mapped symbols, and ranked merges run inside each word. Merges
// are keyed by the pair of token ids, so the merge loop never builds or hashes strings.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "format/gguf.h"
#include "tokenizer/pretokenize/pre_tokenizer.h"
#include "tokenizer/vocab.h"

namespace cera::tokenizer {

class BpeEncoder {
 public:
  // Reads tokenizer.ggml.merges ("left right" strings, rank = index) and tokenizer.ggml.pre;
  // a merge naming a text that is not a token, or an unknown pre-tokenizer, is an error.
  static Result<BpeEncoder> from_gguf(const format::GgufFile& file, const Vocab& vocab);

  PreTokenizer pre_tokenizer() const { return pre_; }
  size_t n_merges() const { return merges_.size(); }

  // Appends the ids of `text` to `out`. Invalid UTF-8 keeps its bytes' tokens; a byte the
  // vocabulary has no token for becomes U+FFFD's tokens. Thread-safe (no shared mutable state).
  void encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t id;  // the merged token
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  struct Scratch;
  void encode_word(const Vocab& vocab, std::string_view word, Scratch& scratch,
                   std::vector<int32_t>& out) const;

  PreTokenizer pre_ = PreTokenizer::kDefault;
  bool ignore_merges_ = false;
  std::array<int32_t, 256> byte_token_{};  // the token of each byte's mapped character
  std::unordered_map<uint64_t, Merge> merges_;
  // The ids of U+FFFD, written for a byte whose mapped character has no token (bytes that never
  // occur in valid UTF-8, such as 0xFF, are missing from many vocabularies): such a byte is
  // replaced, as llama.cpp does, instead of vanishing from the input.
  std::vector<int32_t> replacement_;
};

}  // namespace cera::tokenizer
