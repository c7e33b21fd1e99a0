// Importer for llama2.c checkpoints ("legacy" version 0 format) and their tokenizer.bin, written
// out as an ordinary llama-architecture GGUF. llama2.c rotates adjacent pairs within each head,
// which is already GGUF's NORM RoPE layout, so Q/K rows are copied without permutation.
#pragma once

#include <filesystem>
#include <string>

#include "format/gguf_writer.h"

namespace cera::format {

struct Llama2cConvert {
  std::filesystem::path checkpoint;  // model.bin: 7 int32 header, then fp32 tensors
  std::filesystem::path tokenizer;   // tokenizer.bin: max_token_length, then score/len/bytes
  std::filesystem::path output;      // the GGUF to write
  std::string name;                  // general.name; defaults to the checkpoint's stem
};

// The hyper-parameters in the checkpoint header, validated.
struct Llama2cConfig {
  int32_t dim = 0;
  int32_t hidden_dim = 0;
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t vocab_size = 0;    // absolute value; see shared_classifier
  int32_t seq_len = 0;
  bool shared_classifier = true;  // header vocab_size > 0: output tied to the embedding
};

Status convert_llama2c(const Llama2cConvert& request, const WriteProgress& progress = {});

}  // namespace cera::format
