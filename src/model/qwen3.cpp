// qwen3: no QKV bias; per-head RMSNorm on Q and K (attn_q_norm/attn_k_norm, length head_dim)
// before RoPE; head_dim explicit (attention.key_length), NEOX RoPE.
#include "model/archs.h"
#include "model/blocks/dense_decoder.h"

namespace cera::model {

Result<std::unique_ptr<Model>> load_qwen3(const format::GgufFile& file, ops::Backend& backend,
                                          const LoadOptions& options) {
  CERA_ASSIGN_OR_RETURN(const HParams hp, read_hparams(file, Arch::kQwen3));
  DenseSpec spec = default_dense_spec(hp);
  for (AttentionSpec& a : spec.attention) a.qk_norm = true;
  return make_dense_decoder(file, backend, spec, options);
}

}  // namespace cera::model
