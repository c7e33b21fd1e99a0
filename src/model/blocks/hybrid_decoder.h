// The decoder of the hybrid and mixture-of-experts families (lfm2, lfm2moe, qwen3moe): embed ->
// [RMSNorm -> mixer -> residual, RMSNorm -> FFN -> residual] x n_layer -> output norm -> output,
// where each layer's mixer is attention or lfm2's short convolution and each layer's FFN is dense
// SwiGLU or a mixture of experts. An architecture file fills a HybridSpec; nothing here knows
// which architecture it runs. Convolution layers keep per-sequence state (KvGeometry::kinds).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/blocks/attention.h"
#include "model/model.h"

namespace cera::model {

enum class FfnKind : uint8_t { kDense, kMoe };

struct HybridSpec {
  HParams hp;
  std::vector<LayerKind> mixers;         // [n_layer]
  std::vector<FfnKind> ffns;             // [n_layer]
  std::vector<AttentionSpec> attention;  // [n_layer]; used by kAttention layers
  ops::RouterParams router;              // MoE layers: k, gating, normalisation, scale
  bool selection_bias = false;           // MoE layers may carry exp_probs_b (lfm2moe; optional tensor)
  std::string output_norm = "output_norm.weight";  // lfm2: "token_embd_norm.weight"
};

// Attention layers as the dense families build them (GQA, 1/sqrt(head_dim), the arch's RoPE,
// Q/K norm on), per-layer mixers from hp.n_head_kv_layer (0 = convolution; absent = all
// attention), dense FFNs everywhere and the router from the MoE hyper-parameters.
HybridSpec default_hybrid_spec(const HParams& hp);

Result<std::unique_ptr<Model>> make_hybrid_decoder(const format::GgufFile& file, ops::Backend& backend,
                                                   HybridSpec spec, const LoadOptions& options);

}  // namespace cera::model
