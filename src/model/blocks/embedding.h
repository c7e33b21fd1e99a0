// The token embedding of a batch, shared by the decoders: from the host's token ids, or from ids
// already on the backend's device (ForwardBatch::token_ids, pipelined decode), which the host
// cannot check and never waits for.
#pragma once

#include "model/model.h"

namespace cera::model {

// The batch's ids are usable: host ids inside the vocabulary, or a device view of I32 [n_tokens]
// on the backend's device (its contents are the producer's contract).
Status check_token_ids(const ForwardBatch& batch, const ops::Backend& backend, int64_t n_vocab);

// Which vocabulary rows a model instance's token embedding holds: all of them, or a
// tensor-parallel rank's run (shard.h), whose outputs the ranks sum.
struct VocabShard {
  int64_t first = 0;  // the id of the table's row 0
  bool split = false;
};

// The rank's run of the vocabulary (loading token_embd and an untied output head splits them so).
Result<VocabShard> vocab_shard(int64_t n_vocab, const ShardSpec& shard);

// x[n_embd, n_tokens] = table rows of the batch's tokens, times scale; with a split `vocab`, zero
// rows for the tokens the table does not hold (Backend::embed_slice). Precondition: check_token_ids.
void embed_batch(ops::Backend& backend, const TensorView& x, const TensorView& table, const ForwardBatch& batch,
                 float scale, const VocabShard& vocab = {});

}  // namespace cera::model
