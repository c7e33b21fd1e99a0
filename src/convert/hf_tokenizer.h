// tokenizer.json (+ tokenizer_config.json, chat_template.jinja) to the tokenizer.* GGUF keys, the
// way llama.cpp's converter writes them: byte-level BPE as "gpt2" with merges and a pre-tokenizer
// name, SentencePiece conversions (Unigram, or BPE with byte_fallback) as "llama" with scores.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "format/gguf_writer.h"
#include "convert/hf_config.h"
#include "format/json.h"

namespace cera::convert {

using format::JsonValue;

// GGUF tokenizer.ggml.token_type values.
enum class TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// Writes the tokenizer keys for the checkpoint in `dir`; a missing tokenizer.json is not an
// error (a note says the file has no vocabulary). Warnings and choices go to `notes`.
Status add_hf_tokenizer(const std::filesystem::path& dir, const HfConfig& config, format::GgufWriter& w,
                        std::vector<std::string>& notes);

// A WordPiece vocabulary (tokenizer.json's WordPiece model, else vocab.txt with
// tokenizer_config.json) as tokenizer model "bert" (hf_wordpiece.cpp): llama.cpp's phantom-space
// token texts, special ids, the [CLS]/[SEP] template and BertNormalizer's lowercase/strip_accents.
Status add_wordpiece_tokenizer(const std::filesystem::path& dir, const HfConfig& config, format::GgufWriter& w,
                               std::vector<std::string>& notes);

// llama.cpp's tokenizer.ggml.pre name for a byte-level BPE tokenizer.json, recognised from its
// pre_tokenizer (Split regex, ByteLevel, Digits); "default" plus a note when not recognised.
std::string detect_bpe_pre(const JsonValue& tokenizer_json, std::vector<std::string>& notes);

}  // namespace cera::convert
