// llama: Llama 2/3 and Mistral-family files. Pre-norm, GQA, SwiGLU, NORM RoPE (GGUF permutes
// Q/K rows for it), optional biases, optional rope_freqs (Llama 3.1+), tied output when absent.
#include "model/archs.h"
#include "model/blocks/dense_decoder.h"

namespace cera::model {

Result<std::unique_ptr<Model>> load_llama(const format::GgufFile& file, ops::Backend& backend,
                                          const LoadOptions& options) {
  CERA_ASSIGN_OR_RETURN(const HParams hp, read_hparams(file, Arch::kLlama));
  return make_dense_decoder(file, backend, default_dense_spec(hp), options);
}

}  // namespace cera::model
