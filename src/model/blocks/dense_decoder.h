// The pre-norm decoder-only transformer shared by the dense families (llama, mistral, qwen2,
// qwen3, granite, gemma3): embed -> [RMSNorm -> attention (-> RMSNorm) -> residual, RMSNorm ->
// gated FFN (-> RMSNorm) -> residual] x n_layer -> RMSNorm -> output. The bracketed norms are
// Gemma's "sandwich" norms. An architecture file fills a DenseSpec; nothing here knows which
// architecture it runs.
#pragma once

#include <memory>

#include "model/blocks/attention.h"
#include "model/blocks/ffn.h"
#include "model/model.h"

namespace cera::model {

struct DenseSpec {
  HParams hp;
  std::vector<AttentionSpec> attention;  // [n_layer]: layers may differ (local vs global)
  ops::Activation activation = ops::Activation::kSilu;
  bool sandwich_norms = false;  // post_attention_norm and post_ffw_norm after each block
};

// The spec every dense family starts from: GQA attention with 1/sqrt(head_dim) scaling (or the
// file's attention.scale), the architecture's RoPE, SiLU-gated FFN; local (sliding-window)
// layers from hp.swa_layers get the window and the local RoPE base.
DenseSpec default_dense_spec(const HParams& hp);

// Loads the weights (token_embd, per-layer attn_norm/attention/ffn_norm/ffn, output_norm,
// output or tied token_embd, optional rope_freqs) and returns the runnable model.
Result<std::unique_ptr<Model>> make_dense_decoder(const format::GgufFile& file, ops::Backend& backend,
                                                  DenseSpec spec, const LoadOptions& options);

}  // namespace cera::model
