// granite: llama's block (NORM RoPE, permuted Q/K) with four multipliers from metadata, all read
// by read_hparams: embedding_scale (x embeddings), attention.scale (replaces 1/sqrt(head_dim)),
// residual_scale (x each block output before its residual add), logit_scale (divides logits).
#include "model/archs.h"
#include "model/blocks/dense_decoder.h"

namespace cera::model {

Result<std::unique_ptr<Model>> load_granite(const format::GgufFile& file, ops::Backend& backend,
                                            const LoadOptions& options) {
  CERA_ASSIGN_OR_RETURN(const HParams hp, read_hparams(file, Arch::kGranite));
  return make_dense_decoder(file, backend, default_dense_spec(hp), options);
}

}  // namespace cera::model
