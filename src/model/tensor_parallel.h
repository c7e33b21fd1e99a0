// One model over N tensor-parallel ranks of one process: N rank models (LoadOptions::shard), each
// on its own backend (a GPU each, or CPU backends), joined by a Collective per rank. The runtime
// drives it as one Model: forward() runs every rank on its own thread (rank 0 on the caller's)
// with the same batch, rank 0's logits are the answer (the gather gives every rank all of them);
// hparams() are the whole model's. What the runtime allocates per rank (K/V, recurrent state) it
// finds through ranks(): ForwardBatch's kv, recurrent_state and state checkpoints then hold every
// rank's views, rank-major (rank r's n_layer views at r * n_layer, per sequence).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "ops/collective.h"
#include "model/model.h"

namespace cera::model {

// Where rank r runs: backends[r] and collectives[r] (the caller's; they outlive the model).
struct TensorParallelRanks {
  std::vector<ops::Backend*> backends;
  std::vector<ops::Collective*> collectives;
};

// Loads every rank's slice of `file` (options.shard and options.collective are set per rank;
// leave them unset). An error names the rank whose load failed.
Result<std::unique_ptr<Model>> load_tensor_parallel(const format::GgufFile& file,
                                                    const TensorParallelRanks& ranks,
                                                    const LoadOptions& options);

}  // namespace cera::model
