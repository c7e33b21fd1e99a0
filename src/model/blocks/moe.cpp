// The MoE block as Backend verbs: one router matmul, one moe_route, three matmul_experts (each
// reads only the chosen experts' weights, once per batch), one gated activation, one combine.
#include "model/blocks/moe.h"

namespace cera::model {

Result<MoeWeights> load_moe(WeightLoader& loader, int layer, const MoeShape& s, bool selection_bias,
                            const ShardSpec& shard) {
  const ShardUnit column{.what = "expert FFN column"};
  MoeWeights w;
  CERA_ASSIGN_OR_RETURN(w.gate_inp, loader.require(layer_tensor(layer, "ffn_gate_inp"), {s.n_embd, s.n_expert, 1, 1},
                                                   WeightUse::kMatmul));
  if (selection_bias) {
    CERA_ASSIGN_OR_RETURN(w.selection_bias, loader.optional(layer_tensor(layer, "exp_probs_b", "bias"),
                                                            {s.n_expert, 1, 1, 1}, WeightUse::kVector));
  }
  CERA_ASSIGN_OR_RETURN(w.gate_exps, loader.require_shard(layer_tensor(layer, "ffn_gate_exps"),
                                                          {s.n_embd, s.n_ff_exp, s.n_expert, 1}, WeightUse::kMatmul,
                                                          ShardSplit::kOutputs, column, shard));
  CERA_ASSIGN_OR_RETURN(w.up_exps, loader.require_shard(layer_tensor(layer, "ffn_up_exps"),
                                                        {s.n_embd, s.n_ff_exp, s.n_expert, 1}, WeightUse::kMatmul,
                                                        ShardSplit::kOutputs, column, shard));
  CERA_ASSIGN_OR_RETURN(w.down_exps, loader.require_shard(layer_tensor(layer, "ffn_down_exps"),
                                                          {s.n_ff_exp, s.n_embd, s.n_expert, 1}, WeightUse::kMatmul,
                                                          ShardSplit::kInputs, column, shard));
  return w;
}

Result<MoeScratch> MoeScratch::create(ops::Backend& backend, const MoeShape& s, int64_t max_tokens) {
  MoeScratch m;
  m.shape_ = s;
  m.max_tokens_ = max_tokens;
  m.device_ = backend.device();
  auto alloc = [&](std::shared_ptr<ops::Buffer>& out, int64_t elements) -> Status {
    CERA_ASSIGN_OR_RETURN(auto b, backend.allocate(static_cast<uint64_t>(elements * max_tokens) * 4));
    out = std::move(b);
    return {};
  };
  CERA_RETURN_IF_ERROR(alloc(m.logits_, s.n_expert));
  CERA_RETURN_IF_ERROR(alloc(m.ids_, s.n_expert_used));
  CERA_RETURN_IF_ERROR(alloc(m.weights_, s.n_expert_used));
  CERA_RETURN_IF_ERROR(alloc(m.gate_, s.n_ff_exp * s.n_expert_used));
  CERA_RETURN_IF_ERROR(alloc(m.up_, s.n_ff_exp * s.n_expert_used));
  CERA_RETURN_IF_ERROR(alloc(m.down_, s.n_embd * s.n_expert_used));
  return m;
}

TensorView MoeScratch::view(const std::shared_ptr<ops::Buffer>& b, DType t, int64_t cols, int64_t k, int64_t n) const {
  CERA_CHECK(n >= 1 && n <= max_tokens_);
  return b->view(t, {cols, k, n, 1}, device_);
}
TensorView MoeScratch::logits(int64_t n) const { return view(logits_, DType::kF32, shape_.n_expert, 1, n).reshaped({shape_.n_expert, n, 1, 1}); }
TensorView MoeScratch::ids(int64_t n) const { return view(ids_, DType::kI32, shape_.n_expert_used, 1, n).reshaped({shape_.n_expert_used, n, 1, 1}); }
TensorView MoeScratch::weights(int64_t n) const {
  return view(weights_, DType::kF32, shape_.n_expert_used, 1, n).reshaped({shape_.n_expert_used, n, 1, 1});
}
TensorView MoeScratch::gate(int64_t n) const { return view(gate_, DType::kF32, shape_.n_ff_exp, shape_.n_expert_used, n); }
TensorView MoeScratch::up(int64_t n) const { return view(up_, DType::kF32, shape_.n_ff_exp, shape_.n_expert_used, n); }
TensorView MoeScratch::down(int64_t n) const { return view(down_, DType::kF32, shape_.n_embd, shape_.n_expert_used, n); }

void moe_forward(ops::Backend& backend, const MoeScratch& scratch, const MoeWeights& w, ops::RouterParams router,
                 const TensorView& in, const TensorView& out) {
  const int64_t n = in.rows();
  const TensorView logits = scratch.logits(n), ids = scratch.ids(n), weights = scratch.weights(n);
  const TensorView gate = scratch.gate(n), up = scratch.up(n), down = scratch.down(n);
  backend.matmul(logits, w.gate_inp, in);
  router.selection_bias = w.selection_bias ? &*w.selection_bias : nullptr;
  backend.moe_route(ids, weights, logits, router);
  backend.matmul_experts(gate, w.gate_exps, in, ids);
  backend.matmul_experts(up, w.up_exps, in, ids);
  backend.gated_activation(gate, gate, up, ops::Activation::kSilu);
  backend.matmul_experts(down, w.down_exps, gate, ids);
  backend.moe_combine(out, down, weights);
}

}  // namespace cera::model
