// lfm2moe: lfm2's mixers; the first leading_dense_block_count layers keep a dense SwiGLU FFN,
// the rest route each token to k experts by sigmoid scores, with the exp_probs_b bias added only
// to choose the experts (DeepSeek-V3 style) and the chosen unbiased scores normalised.
#include "model/archs.h"
#include "model/blocks/hybrid_decoder.h"

namespace cera::model {

Result<std::unique_ptr<Model>> load_lfm2moe(const format::GgufFile& file, ops::Backend& backend,
                                            const LoadOptions& options) {
  CERA_ASSIGN_OR_RETURN(const HParams hp, read_hparams(file, Arch::kLfm2Moe));
  HybridSpec spec = default_hybrid_spec(hp);
  for (int il = hp.n_layer_dense_lead; il < hp.n_layer; ++il) spec.ffns[il] = FfnKind::kMoe;
  spec.selection_bias = true;
  spec.output_norm = "token_embd_norm.weight";
  return make_hybrid_decoder(file, backend, spec, options);
}

}  // namespace cera::model
