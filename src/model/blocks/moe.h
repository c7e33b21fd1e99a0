// Mixture-of-experts feed-forward block: a router (ffn_gate_inp) scores the experts, moe_route
// keeps the top k with their weights, the chosen experts' SwiGLU FFNs run through
// matmul_experts (stacked 3-D expert weights), and moe_combine sums their weighted outputs.
#pragma once

#include <memory>
#include <optional>

#include "model/weights.h"

namespace cera::model {

struct MoeWeights {
  TensorView gate_inp;                       // [n_embd, n_expert] router
  std::optional<TensorView> selection_bias;  // [n_expert] F32 exp_probs_b: added only to choose (lfm2moe)
  TensorView gate_exps;                      // [n_embd, n_ff_exp, n_expert]
  TensorView up_exps;                        // [n_embd, n_ff_exp, n_expert]
  TensorView down_exps;                      // [n_ff_exp, n_embd, n_expert]
};

struct MoeShape {
  int64_t n_embd = 0;
  int64_t n_ff_exp = 0;
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;  // k
};

// `shape` is the whole model's; a split `shard` loads every expert's share of the FFN columns
// (gate/up rows, down columns) and the whole router, so every rank routes alike.
Result<MoeWeights> load_moe(WeightLoader& loader, int layer, const MoeShape& shape, bool selection_bias,
                            const ShardSpec& shard = {});

// Activations of the block, sized for the largest batch.
class MoeScratch {
 public:
  static Result<MoeScratch> create(ops::Backend& backend, const MoeShape& shape, int64_t max_tokens);
  TensorView logits(int64_t n) const;   // [n_expert, n] router logits
  TensorView ids(int64_t n) const;      // [k, n] I32 chosen experts
  TensorView weights(int64_t n) const;  // [k, n] their weights
  TensorView gate(int64_t n) const;     // [n_ff_exp, k, n]
  TensorView up(int64_t n) const;       // [n_ff_exp, k, n]
  TensorView down(int64_t n) const;     // [n_embd, k, n] per-expert outputs

 private:
  // [cols, k, n] after checking n against the batch size.
  TensorView view(const std::shared_ptr<ops::Buffer>& b, DType t, int64_t cols, int64_t k, int64_t n) const;
  MoeShape shape_;
  int64_t max_tokens_ = 0;
  Device device_ = Device::kCpu;
  std::shared_ptr<ops::Buffer> logits_, ids_, weights_, gate_, up_, down_;
};

// out[n_embd, n_tokens] = moe(in); out may alias in (in is consumed before out is written).
// `router` carries k, gating, normalisation and scale; its selection_bias is set from `w`.
void moe_forward(ops::Backend& backend, const MoeScratch& scratch, const MoeWeights& w, ops::RouterParams router,
                 const TensorView& in, const TensorView& out);

}  // namespace cera::model
