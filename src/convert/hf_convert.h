// `cera convert HF_DIR`: a Hugging Face safetensors checkpoint (Llama, Mistral, Qwen2, Qwen3,
// Granite, LFM2, LFM2-MoE, Qwen3-MoE, and BERT sentence-transformers folders) to GGUF with llama.cpp's names, metadata keys and Q/K row order. Tensors are read
// from the memory-mapped shards and converted one at a time while the file is written.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "convert/hf_config.h"
#include "core/dtype.h"
#include "format/gguf_writer.h"

namespace cera::convert {

struct HfConvertRequest {
  std::filesystem::path dir;     // config.json, model.safetensors[.index.json], tokenizer files
  std::filesystem::path output;  // the GGUF to write
  DType type = DType::kF16;      // matrices; norms, biases and 1-D tensors stay F32
  std::string name;              // general.name; defaults to the folder's name
  int n_threads = 0;             // 0: all hardware threads
};

struct HfConvertReport {
  std::string gguf_arch;
  uint64_t n_tensors = 0;
  std::vector<std::string> notes;  // fallbacks, tokenizer choices, warnings
};

Result<HfConvertReport> convert_hf(const HfConvertRequest& request, const format::WriteProgress& progress = {});

// Source row index of GGUF row `row` after llama.cpp's Q/K permutation: within each head of
// head_dim rows, HF keeps the two rotary halves apart, GGUF interleaves them in pairs.
uint64_t permuted_source_row(uint64_t row, uint64_t head_dim);

}  // namespace cera::convert
