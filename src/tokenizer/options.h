// Options of Tokenizer::encode / decode and StreamDecoder. Defaults are what a model's prompt
// path wants: no special tokens added or parsed, control tokens invisible in text.
#pragma once

namespace cera::tokenizer {

struct EncodeOptions {
  // Add BOS / EOS (and BERT's [CLS] ... [SEP]) where the vocabulary's add_*_token flags say so.
  bool add_special = false;
  // Match the texts of control and unknown tokens ("<s>", "<|im_end|>") in the input and emit
  // their ids. User-defined tokens are matched either way, as the reference tokenizers do.
  bool parse_special = false;
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
