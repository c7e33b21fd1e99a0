// lfm2: hybrid of gated short-convolution layers and GQA attention layers (Q/K RMSNorm, NEOX
// RoPE), each followed by a SwiGLU FFN. The per-layer head_count_kv array picks the mixer
// (0 = convolution); the output norm is named token_embd_norm.
#include "model/archs.h"
#include "model/blocks/hybrid_decoder.h"

namespace cera::model {

Result<std::unique_ptr<Model>> load_lfm2(const format::GgufFile& file, ops::Backend& backend,
                                         const LoadOptions& options) {
  CERA_ASSIGN_OR_RETURN(const HParams hp, read_hparams(file, Arch::kLfm2));
  HybridSpec spec = default_hybrid_spec(hp);
  spec.output_norm = "token_embd_norm.weight";
  return make_hybrid_decoder(file, backend, spec, options);
}

}  // namespace cera::model
