// The pre-norm decoder-only transformer shared by the dense families (llama, mistral, qwen2,
// qwen3, granite): embed -> [RMSNorm -> attention -> residual, RMSNorm -> gated FFN -> residual]
// x n_layer -> RMSNorm -> output. An architecture file fills a DenseSpec; nothing here knows
// which architecture it runs.
#pragma once

#include <memory>

#include "model/blocks/attention.h"
#include "model/blocks/ffn.h"
#include "model/model.h"

namespace cera::model {

struct DenseSpec {
  HParams hp;
  AttentionSpec attention;
  ops::Activation activation = ops::Activation::kSilu;
};

// The spec every dense family starts from: GQA attention with 1/sqrt(head_dim) scaling (or the
// file's attention.scale), the architecture's RoPE, SiLU-gated FFN.
DenseSpec default_dense_spec(const HParams& hp);

// Loads the weights (token_embd, per-layer attn_norm/attention/ffn_norm/ffn, output_norm,
// output or tied token_embd, optional rope_freqs) and returns the runnable model.
Result<std::unique_ptr<Model>> make_dense_decoder(const format::GgufFile& file, ops::Backend& backend,
                                                  DenseSpec spec, const LoadOptions& options);

}  // namespace cera::model
