// `cera synth`: random-weight GGUF models of named shapes for benchmarks (PERFORMANCE.md), with
// a real vocabulary copied from another GGUF. Weights are generated row by row from a seeded
// counter-based stream, so the file is identical for any thread count and never held whole.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "format/gguf_writer.h"

namespace cera::convert {

enum class SynthArch { kLlama, kLfm2, kQwen3Moe };

// A named shape; the fields after n_ctx belong to some architectures only (0: unused/default).
struct SynthShape {
  const char* name;      // "tiny", "llama-1b", "llama-8b", "lfm2-1.2b", "qwen3-30b-a3b", ...
  SynthArch arch;        // the architecture the shape is of
  uint32_t n_embd;
  uint32_t n_layer;
  uint32_t n_head;
  uint32_t n_head_kv;
  uint32_t n_ff;         // dense FFN width (qwen3moe: written, unused by its expert layers)
  bool tied_output;      // no output.weight: the embedding is reused
  uint32_t n_ctx;
  float rope_theta;
  uint32_t head_dim = 0;          // 0: n_embd / n_head
  uint32_t n_vocab = 0;           // placeholder vocabulary size; 0: 32000
  uint64_t attention_layers = 0;  // lfm2: bit il set = layer il is attention, else short convolution
  uint32_t l_cache = 0;           // lfm2: convolution kernel length
  uint32_t n_expert = 0;          // qwen3moe: experts per layer
  uint32_t n_expert_used = 0;     //   chosen per token
  uint32_t n_ff_exp = 0;          //   expert FFN width
};
// The shape table; nullptr for an unknown name.
const SynthShape* find_synth_shape(const std::string& name);
std::vector<std::string> synth_shape_names();
std::optional<SynthArch> synth_arch_from_name(const std::string& name);
const char* synth_arch_name(SynthArch arch);  // the GGUF general.architecture

struct SynthRequest {
  std::optional<SynthArch> arch;       // must match the shape's when given
  std::string shape;                   // a name from the table
  DType type = DType::kQ4_0;           // matrices; norms stay F32
  std::filesystem::path output;
  std::filesystem::path vocab_from;    // GGUF whose tokenizer.* keys are copied; empty: a
                                       // placeholder SentencePiece-style vocabulary (shape.n_vocab)
  uint64_t seed = 42;
  int n_threads = 0;                   // 0: all hardware threads
};

struct SynthReport {
  uint32_t n_vocab = 0;
  uint64_t n_params = 0;
  uint64_t n_bytes = 0;                // tensor data
  std::vector<std::string> notes;      // type fallbacks
};

Result<SynthReport> synth_model(const SynthRequest& request, const format::WriteProgress& progress = {});

// The synthetic weight stream: element i of row `row` of tensor `tensor` (unit variance,
// approximately normal: a scaled sum of four uniforms). Exposed for tests.
void synth_row(uint64_t seed, uint64_t tensor, uint64_t row, float scale, float* out, uint64_t n);

}  // namespace cera::convert
