// Small vocabularies built in memory for unit tests (through the GGUF writer and reader, so the
// tokenizer sees exactly what it would read from a file).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

namespace cera::tokenizer::test {

struct VocabSpec {
  std::string model = "llama";
  std::string pre;                  // tokenizer.ggml.pre; omitted when empty
  std::vector<std::string> tokens;
  std::vector<float> scores;        // omitted when empty
  std::vector<int32_t> types;       // omitted when empty
  std::vector<std::string> merges;  // omitted when empty
  std::vector<std::pair<std::string, format::GgufValue>> extra;  // any other keys
};

// The GGUF bytes of `spec` (a vocab-only file).
std::vector<std::byte> vocab_gguf_bytes(const VocabSpec& spec);

// Parses the bytes and builds a Tokenizer (which keeps no reference to the bytes).
Result<Tokenizer> make_tokenizer(const VocabSpec& spec);

// A SentencePiece-style vocabulary: <unk>, <s>, </s>, 256 byte tokens, then `pieces` (normal,
// with the given scores) and `extra` tokens of any type. Ids of `pieces` start at 259.
struct SpmPiece {
  std::string text;
  float score = 0.0f;
  int32_t type = 1;
};
VocabSpec spm_spec(const std::vector<SpmPiece>& pieces, bool byte_tokens = true);

}  // namespace cera::tokenizer::test
