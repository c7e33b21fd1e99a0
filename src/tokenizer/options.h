// Options of Tokenizer::encode / decode and StreamDecoder. Defaults are what a model's prompt
// path wants: no special tokens added or parsed, control tokens invisible in text.
#pragma once

#include <cstdint>
#include <span>

namespace cera::tokenizer {

// Bytes [offset, offset + length) of an input text.
struct TextRange {
  uint32_t offset = 0;
  uint32_t length = 0;
  friend bool operator==(const TextRange&, const TextRange&) = default;
};

struct EncodeOptions {
  // Add BOS / EOS (and BERT's [CLS] ... [SEP]) where the vocabulary's add_*_token flags say so.
  bool add_special = false;
  // Match the texts of control and unknown tokens ("<s>", "<|im_end|>") in the input and emit
  // their ids. User-defined tokens are matched either way, as the reference tokenizers do.
  bool parse_special = false;
  // With parse_special: parts of the input that are text from someone other than the caller
  // (a chat message inside a rendered template) where control-token texts are NOT matched, so
  // "<|im_start|>" typed by a user is tokenized as the characters it is. Sorted by offset and
  // disjoint; a control-token text that overlaps any of them stays text.
  std::span<const TextRange> plain_ranges;
};

struct DecodeOptions {
  // Render control and unknown tokens as their vocabulary text instead of nothing.
  bool render_special = false;
  // Drop the one space that encoding put in front of text (SPM with add_space_prefix, and
  // WordPiece's word marker) at the start and after each special token, so that
  // decode(encode(s)) == s. Turn off when decoding a continuation of earlier text.
  bool strip_space_prefix = true;
};

}  // namespace cera::tokenizer
