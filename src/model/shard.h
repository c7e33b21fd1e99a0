// Tensor-parallel sharding of weights at load: which slice of a tensor rank r of N holds, and the
// copy of that slice out of a GGUF tensor's bytes. Megatron-style layout (the one vLLM, SGLang
// and TensorRT-LLM use): a Linear whose outputs are split (Q/K/V by KV-head groups, FFN gate and
// up, the vocabulary of the embedding and the output head) gives each rank whole outputs, so its
// slice is a run of contiguous rows; a Linear whose inputs are split (attention O, FFN down) gives
// each rank a run of every row's inputs, so its slice is a strided gather of whole quant blocks and
// the ranks' products sum to the unsplit one (the all-reduce). Shapes that do not divide, or that
// would cut a quant block, are refused naming the tensor.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace cera::model {

// Which rank of how many this process's model instance is. {0, 1} is the unsplit model.
struct ShardSpec {
  int rank = 0;
  int n_ranks = 1;
  bool split() const { return n_ranks > 1; }
};

// How a weight is divided among the ranks (GGUF order: ne[0] is the input dimension of a Linear,
// ne[1] its outputs, one row per output).
enum class ShardSplit {
  kReplicated,  // every rank holds all of it: norms, biases of row-split Linears, the router of a
                // MoE
  kOutputs,  // ne[1] split: Q/K/V (by heads), gate/up, token embedding and output head (by vocab)
  kInputs,   // ne[0] split: attention O and FFN down; partial outputs summed across ranks
};

// An error unless 0 <= rank < n_ranks and n_ranks >= 1.
Status check_shard_spec(const ShardSpec& spec);

// A rank's run [first, first + count) of one dimension.
struct ShardRange {
  int64_t first = 0;
  int64_t count = 0;
};

// What the dimension being split is made of, for the checks and the message.
struct ShardUnit {
  int64_t elements = 1;      // a rank's run is whole units: head_dim for attention, 1 otherwise
  const char* what = "row";  // "head", "KV head", "FFN column", "vocabulary row"
};

// The rank's run of a dimension of `extent` elements: extent / unit.elements units divided
// evenly. An error naming `tensor` when the units do not divide by n_ranks, or when `block`
// (elements per quant block along this dimension; 1 when it is not the blocked one) does not
// divide a rank's run.
Result<ShardRange> shard_range(const std::string& tensor, int64_t extent, ShardUnit unit,
                               int64_t block, const ShardSpec& spec);

// The shape rank `spec.rank` holds of a tensor of `shape` (GGUF order) split as `split`.
Result<std::array<int64_t, 4>> shard_shape(const std::string& tensor, DType dtype,
                                           std::array<int64_t, 4> shape, ShardSplit split,
                                           ShardUnit unit, const ShardSpec& spec);

// Copies the rank's slice of a tensor's packed bytes (`bytes` holds ne[1]*ne[2]*ne[3] rows of
// ne[0] elements of `dtype`) into `out`, packed in turn, which must be exactly the size of
// shard_shape's tensor: for kOutputs the rows of its run (per ne[2]/ne[3] matrix, e.g. per
// expert), for kInputs the blocks of its run of every row.
Status shard_copy(const std::string& tensor, DType dtype, std::array<int64_t, 4> shape,
                  std::span<const std::byte> bytes, ShardSplit split, ShardUnit unit,
                  const ShardSpec& spec, std::span<std::byte> out);

// shard_copy into a vector of the slice's size.
Result<std::vector<std::byte>> shard_bytes(const std::string& tensor, DType dtype,
                                           std::array<int64_t, 4> shape,
                                           std::span<const std::byte> bytes, ShardSplit split,
                                           ShardUnit unit, const ShardSpec& spec);

}  // namespace cera::model
