// Internal to `cera synth` (synth.cpp): what one architecture's file holds besides the
// tokenizer: its metadata keys and its tensors in file order, with GGUF shapes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "convert/synth.h"
#include "format/gguf_writer.h"

namespace cera::convert {

struct SynthTensor {
  std::string name;
  std::vector<uint64_t> shape;  // GGUF order; one dimension: a norm vector (all ones)
};

// Writes the architecture keys of `s` (llama.*, lfm2.*, qwen3moe.*) and returns its tensors.
std::vector<SynthTensor> synth_layout(const SynthShape& s, uint32_t n_vocab, format::GgufWriter& w);

}  // namespace cera::convert
