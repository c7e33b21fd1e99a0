// Hugging Face config.json for the architectures cera converts (causal LMs and the BERT encoder),
// read into one struct.
// The architecture string becomes an enum in one table (kArchTable in hf_config.cpp); everything
// downstream switches on the enum.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "format/json.h"
#include "core/status.h"

namespace cera::convert {

using format::JsonValue;

enum class HfArch { kLlama, kMistral, kQwen2, kQwen3, kGranite, kLfm2, kLfm2Moe, kQwen3Moe, kBert };

struct HfArchInfo {
  HfArch arch;
  const char* hf_name;      // config.json "architectures"[0]
  const char* gguf_name;    // general.architecture
  bool permute_qk;          // NORM rope in GGUF: Q/K rows reordered from HF's split halves
  bool writes_vocab_size;   // llama.cpp's LlamaModel adds <arch>.vocab_size and rope.dimension_count
};
const HfArchInfo& arch_info(HfArch arch);

enum class RopeScalingType { kNone, kLinear, kYarn, kLlama3 };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  std::optional<uint32_t> original_context;
};

struct HfConfig {
  HfArch arch = HfArch::kLlama;
  uint32_t n_embd = 0;
  uint32_t n_layer = 0;
  uint32_t n_head = 0;
  std::optional<uint32_t> n_head_kv;     // absent: llama.cpp omits head_count_kv
  uint32_t n_ff = 0;
  uint32_t n_vocab = 0;
  std::optional<uint32_t> n_ctx;          // max_position_embeddings
  std::optional<uint32_t> explicit_head_dim;  // config "head_dim" (ignored for granite)
  double rms_eps = 1e-6;                  // bert: layer_norm_eps (its norms are LayerNorms)
  std::optional<double> rope_theta;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  // Granite multipliers (absent or 0 = not written, as llama.cpp).
  std::optional<double> embedding_multiplier, attention_multiplier, residual_multiplier, logits_scaling;
  // lfm2 / lfm2moe: which layers are short convolutions (layer_types "conv"), and L_cache.
  std::vector<bool> conv_layers;  // [n_layer]; empty for the other families
  uint32_t conv_l_cache = 0;
  // Mixture of experts (qwen3moe, lfm2moe).
  uint32_t n_expert = 0;
  uint32_t n_expert_used = 0;
  uint32_t n_ff_exp = 0;          // moe_intermediate_size
  uint32_t n_dense_lead = 0;      // lfm2moe num_dense_layers
  bool norm_topk_prob = true;
  bool expert_bias = false;       // lfm2moe use_expert_bias: exp_probs_b tensors
  // bert: token type (segment) embeddings, type_vocab_size.
  uint32_t n_token_types = 0;
  // Special token ids given in config.json (fallbacks for tokenizer_config.json).
  std::optional<int64_t> bos_token_id, eos_token_id, pad_token_id;

  uint32_t head_dim() const { return explicit_head_dim.value_or(n_embd / n_head); }
  uint32_t head_count_kv() const { return n_head_kv.value_or(n_head); }
  bool is_conv_layer(uint32_t il) const { return !conv_layers.empty() && conv_layers[il]; }
};

// Parses and validates config.json (divisibility, positive sizes); errors name the file and key.
Result<HfConfig> parse_hf_config(const JsonValue& json, const std::string& where);
Result<HfConfig> read_hf_config(const std::filesystem::path& dir);

// Llama 3 per-dimension rope factors (n_rot / 2 floats), computed in float32 like llama.cpp.
std::vector<float> llama3_rope_factors(const HfConfig& config);

}  // namespace cera::convert
