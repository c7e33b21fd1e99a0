// Gated feed-forward block: down(act(gate(x)) * up(x)), SwiGLU or GELU(tanh)-gated.
#pragma once

#include "model/blocks/scratch.h"
#include "model/weights.h"

namespace cera::model {

struct FfnWeights {
  TensorView gate;  // [n_embd, n_ff]
  TensorView up;    // [n_embd, n_ff]
  TensorView down;  // [n_ff, n_embd]
};

// `n_ff` is the whole model's; a split `shard` loads the rank's gate/up rows and down columns.
Result<FfnWeights> load_ffn(WeightLoader& loader, int layer, int64_t n_embd, int64_t n_ff, const ShardSpec& shard = {});

// out[n_embd, n_tokens] = ffn(in); out may alias in.
void ffn_forward(ops::Backend& backend, const Scratch& scratch, const FfnWeights& w, ops::Activation act,
                 const TensorView& in, const TensorView& out);

}  // namespace cera::model
