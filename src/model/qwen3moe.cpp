// qwen3moe: qwen3 attention (Q/K RMSNorm, NEOX RoPE, explicit head_dim) and a mixture of
// experts in every layer: softmax router, top-k weights renormalised, SiLU experts, no shared
// expert.
#include "model/archs.h"
#include "model/blocks/hybrid_decoder.h"

namespace cera::model {

Result<std::unique_ptr<Model>> load_qwen3moe(const format::GgufFile& file, ops::Backend& backend,
                                             const LoadOptions& options) {
  CERA_ASSIGN_OR_RETURN(const HParams hp, read_hparams(file, Arch::kQwen3Moe));
  HybridSpec spec = default_hybrid_spec(hp);
  for (int il = hp.n_layer_dense_lead; il < hp.n_layer; ++il) spec.ffns[il] = FfnKind::kMoe;
  return make_hybrid_decoder(file, backend, spec, options);
}

}  // namespace cera::model
