// See test_vocab.h.
#include "tokenizer/test_vocab.h"

#include <cstdio>

#include "format/gguf_writer.h"

namespace cera::tokenizer::test {

std::vector<std::byte> vocab_gguf_bytes(const VocabSpec& spec) {
  format::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", spec.model);
  if (!spec.pre.empty()) w.set_string("tokenizer.ggml.pre", spec.pre);
  w.set_array("tokenizer.ggml.tokens", format::GgufArray::of_strings(spec.tokens));
  if (!spec.scores.empty()) {
    w.set_array("tokenizer.ggml.scores", format::GgufArray::of(std::span<const float>(spec.scores)));
  }
  if (!spec.types.empty()) {
    w.set_array("tokenizer.ggml.token_type", format::GgufArray::of(std::span<const int32_t>(spec.types)));
  }
  if (!spec.merges.empty()) w.set_array("tokenizer.ggml.merges", format::GgufArray::of_strings(spec.merges));
  for (const auto& [key, value] : spec.extra) w.set(key, value);
  return w.to_bytes();
}

Result<Tokenizer> make_tokenizer(const VocabSpec& spec) {
  const std::vector<std::byte> bytes = vocab_gguf_bytes(spec);
  CERA_ASSIGN_OR_RETURN(format::GgufFile file, format::GgufFile::parse(bytes));
  return Tokenizer::from_gguf(file);
}

VocabSpec spm_spec(const std::vector<SpmPiece>& pieces, bool byte_tokens) {
  VocabSpec spec;
  spec.tokens = {"<unk>", "<s>", "</s>"};
  spec.types = {2, 3, 3};
  spec.scores = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    // Without byte tokens the slots hold unused placeholders so piece ids stay the same.
    spec.tokens.push_back(byte_tokens ? hex : "[unused" + std::to_string(b) + "]");
    spec.types.push_back(byte_tokens ? 6 : 5);
    spec.scores.push_back(0);
  }
  for (const auto& p : pieces) {
    spec.tokens.push_back(p.text);
    spec.scores.push_back(p.score);
    spec.types.push_back(p.type);
  }
  return spec;
}

}  // namespace cera::tokenizer::test
