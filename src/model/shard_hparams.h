// The hyper-parameters one tensor-parallel rank computes with: its KV-head group's heads and its
// share of the FFN columns (dense and per expert). Everything else (n_embd, n_vocab, the norms,
// RoPE, sliding windows) is the whole model's: the residual stream is replicated on every rank and
// the all-reduces after attention and after the FFN keep it so.
#pragma once

#include "core/status.h"
#include "model/hparams.h"
#include "model/shard.h"

namespace cera::model {

// The rank's counts as the loaders split the tensors (head_split, balanced_range): KV heads dealt
// out in whole groups (unevenly when they do not divide: 3 over 2 ranks are 2 + 1) or replicated
// when fewer than the ranks, FFN columns dealt out likewise. An error naming the metadata key
// when a count cannot be split, e.g. "llama.attention.head_count_kv is 3 (...): 4 tensor-parallel
// ranks would need the KV heads replicated ...", with the rank counts that fit. {0, 1} returns
// `whole`.
Result<HParams> shard_hparams(const HParams& whole, const ShardSpec& spec);

}  // namespace cera::model
