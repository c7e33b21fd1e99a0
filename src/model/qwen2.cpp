// qwen2: llama's block with Q/K/V biases (loaded when present), NEOX RoPE, rope base ~1e6,
// tied embeddings on the small models.
#include "model/archs.h"
#include "model/blocks/dense_decoder.h"

namespace cera::model {

Result<std::unique_ptr<Model>> load_qwen2(const format::GgufFile& file, ops::Backend& backend,
                                          const LoadOptions& options) {
  CERA_ASSIGN_OR_RETURN(const HParams hp, read_hparams(file, Arch::kQwen2));
  return make_dense_decoder(file, backend, default_dense_spec(hp), options);
}

}  // namespace cera::model
