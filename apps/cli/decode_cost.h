// What one decoded token reads and computes in a model's matrices: the benches' shares of a
// bandwidth or FLOP ceiling (cmd_bench.cpp, bench_concurrency.cpp).
#pragma once

#include <cstdint>

#include "format/gguf.h"
#include "model/hparams.h"

namespace cera::cli {

struct DecodeCost {
  uint64_t weight_bytes = 0;     // bytes of weights one token reads
  uint64_t weight_elements = 0;  // their elements: 2 x this is the token's multiply-adds, in FLOPs
};

// Every tensor except the embedding table, which is only gathered by row, unless it doubles as the
// output matrix; of a stacked expert tensor (`*_exps.weight`, [n_in, n_out, n_expert]) only the
// n_expert_used experts a token chooses.
DecodeCost decode_cost(const format::GgufFile& f, const model::HParams& hp);

}  // namespace cera::cli
