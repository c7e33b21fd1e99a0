#include "model/blocks/embedding.h"

#include <string>

namespace cera::model {

Status check_token_ids(const ForwardBatch& batch, const ops::Backend& backend, int64_t n_vocab) {
  if (batch.token_ids != nullptr) {
    const TensorView& ids = *batch.token_ids;
    if (ids.dtype != DType::kI32 || ids.device != backend.device() || !ids.packed() ||
        ids.n_elements() != static_cast<int64_t>(batch.tokens.size())) {
      return invalid_argument("batch: token_ids must be a packed I32 view of " + std::to_string(batch.tokens.size()) +
                              " ids on the backend's device");
    }
    return {};
  }
  for (int32_t t : batch.tokens) {
    if (t < 0 || t >= n_vocab) return invalid_argument("token id " + std::to_string(t) + " is outside the vocabulary");
  }
  return {};
}

void embed_batch(ops::Backend& backend, const TensorView& x, const TensorView& table, const ForwardBatch& batch,
                 float scale) {
  if (batch.token_ids != nullptr) {
    backend.embed_ids(x, table, *batch.token_ids, scale);
  } else {
    backend.embed(x, table, batch.tokens, scale);
  }
}

}  // namespace cera::model
