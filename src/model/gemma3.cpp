// gemma3: embeddings x sqrt(n_embd), sandwich norms (post-attention and post-FFN RMSNorm),
// GELU(tanh)-gated FFN, Q/K RMSNorm before RoPE, explicit head_dim, and interleaved local
// (sliding-window, RoPE base 10000, unscaled) and global layers. GGUF norm weights already
// include Gemma's "+1", so the plain RMSNorm verb applies. All of it is read by read_hparams
// (read_gemma3_extras) or set here.
#include "model/archs.h"
#include "model/blocks/dense_decoder.h"

namespace cera::model {

Result<std::unique_ptr<Model>> load_gemma3(const format::GgufFile& file, ops::Backend& backend,
                                           const LoadOptions& options) {
  CERA_ASSIGN_OR_RETURN(const HParams hp, read_hparams(file, Arch::kGemma3));
  DenseSpec spec = default_dense_spec(hp);
  for (AttentionSpec& a : spec.attention) a.qk_norm = true;
  spec.activation = ops::Activation::kGeluTanh;
  spec.sandwich_norms = true;
  return make_dense_decoder(file, backend, spec, options);
}

}  // namespace cera::model
