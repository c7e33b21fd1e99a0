#include "model/blocks/ffn.h"

namespace cera::model {

Result<FfnWeights> load_ffn(WeightLoader& loader, int layer, int64_t n_embd, int64_t n_ff, const ShardSpec& shard) {
  const ShardUnit column{.what = "FFN column"};
  FfnWeights w;
  CERA_ASSIGN_OR_RETURN(w.gate, loader.require_shard(layer_tensor(layer, "ffn_gate"), {n_embd, n_ff, 1, 1},
                                                     WeightUse::kMatmul, ShardSplit::kOutputs, column, shard));
  CERA_ASSIGN_OR_RETURN(w.up, loader.require_shard(layer_tensor(layer, "ffn_up"), {n_embd, n_ff, 1, 1},
                                                   WeightUse::kMatmul, ShardSplit::kOutputs, column, shard));
  CERA_ASSIGN_OR_RETURN(w.down, loader.require_shard(layer_tensor(layer, "ffn_down"), {n_ff, n_embd, 1, 1},
                                                     WeightUse::kMatmul, ShardSplit::kInputs, column, shard));
  return w;
}

void ffn_forward(ops::Backend& backend, const Scratch& scratch, const FfnWeights& w, ops::Activation act,
                 const TensorView& in, const TensorView& out) {
  const int64_t n = in.rows();
  const TensorView gate = scratch.gate(n), up = scratch.up(n);
  backend.matmul(gate, w.gate, in);
  backend.matmul(up, w.up, in);
  backend.gated_activation(gate, gate, up, act);
  backend.matmul(out, w.down, gate);
}

}  // namespace cera::model
