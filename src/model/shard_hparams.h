// The hyper-parameters one tensor-parallel rank computes with: its KV-head group's heads and its
// share of the FFN columns (dense and per expert). Everything else (n_embd, n_vocab, the norms,
// RoPE, sliding windows) is the whole model's: the residual stream is replicated on every rank and
// the all-reduces after attention and after the FFN keep it so.
#pragma once

#include "core/status.h"
#include "model/hparams.h"
#include "model/shard.h"

namespace cera::model {

// An error naming the metadata key whose count does not divide among spec.n_ranks (and the rank
// counts that would), e.g. "llama.attention.head_count_kv is 3, which does not divide among 2
// tensor-parallel ranks". {0, 1} returns `whole`.
Result<HParams> shard_hparams(const HParams& whole, const ShardSpec& spec);

}  // namespace cera::model
