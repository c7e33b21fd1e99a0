// The token embedding of a batch, shared by the decoders: from the host's token ids, or from ids
// already on the backend's device (ForwardBatch::token_ids, pipelined decode), which the host
// cannot check and never waits for.
#pragma once

#include "model/model.h"

namespace cera::model {

// The batch's ids are usable: host ids inside the vocabulary, or a device view of I32 [n_tokens]
// on the backend's device (its contents are the producer's contract).
Status check_token_ids(const ForwardBatch& batch, const ops::Backend& backend, int64_t n_vocab);

// x[n_embd, n_tokens] = table rows of the batch's tokens, times scale. Precondition: check_token_ids.
void embed_batch(ops::Backend& backend, const TensorView& x, const TensorView& table, const ForwardBatch& batch,
                 float scale);

}  // namespace cera::model
