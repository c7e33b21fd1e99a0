#include "model/blocks/embedding.h"

#include <string>
#include <vector>

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

Result<VocabShard> vocab_shard(int64_t n_vocab, const ShardSpec& shard) {
  if (!shard.split()) return VocabShard{};
  CERA_ASSIGN_OR_RETURN(ShardRange r, shard_range("token_embd.weight", n_vocab, {.what = "vocabulary row"}, 1, shard));
  return VocabShard{.first = r.first, .split = true};
}

void embed_batch(ops::Backend& backend, const TensorView& x, const TensorView& table, const ForwardBatch& batch,
                 float scale, const VocabShard& vocab) {
  if (vocab.split) {
    // Device ids are read back here: the sliced gather has a host body only (pipelined decode
    // over several devices would give the verb a device form).
    std::vector<int32_t> ids(batch.tokens.begin(), batch.tokens.end());
    if (batch.token_ids != nullptr) backend.download(ids.data(), *batch.token_ids);
    backend.embed_slice(x, table, ids, vocab.first, scale);
    return;
  }
  if (batch.token_ids != nullptr) {
    backend.embed_ids(x, table, *batch.token_ids, scale);
  } else {
    backend.embed(x, table, batch.tokens, scale);
  }
}

}  // namespace cera::model
