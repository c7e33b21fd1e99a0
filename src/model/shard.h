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
  kVector,   // ne[0] of a vector split like the outputs of its Linear: the biases of Q/K/V
};

// An error unless 0 <= rank < n_ranks and n_ranks >= 1.
Status check_shard_spec(const ShardSpec& spec);

// A rank's run [first, first + count) of one dimension.
struct ShardRange {
  int64_t first = 0;
  int64_t count = 0;
};

// Rank spec.rank's run of `units` dealt out balanced: units / n_ranks each, the first
// units % n_ranks ranks one more. Precondition: check_shard_spec(spec).
ShardRange balanced_range(int64_t units, const ShardSpec& spec);

// What the dimension being split is made of, for the checks and the message.
struct ShardUnit {
  int64_t elements = 1;      // a rank's run is whole units: head_dim for attention, 1 otherwise
  const char* what = "row";  // "head", "KV head", "FFN column", "vocabulary row"
  // The split dimension is `groups` equal parts laid end to end, each split alike (lfm2's
  // in_proj: its B, C and x rows); a rank holds its run of every part, in order.
  int64_t groups = 1;
  // Units that do not divide among the ranks are dealt out balanced (the first units % n_ranks
  // ranks hold one more: 3 KV heads over 2 ranks are 2 + 1) instead of refused. Not for the
  // vocabulary, whose gathered slices must be of one size.
  bool uneven = false;
};

// The spec by which the K/V projections of a model with n_head_kv KV heads are split. With at
// least as many KV heads as ranks it is `spec`; with fewer (8 ranks, 2 KV heads), each KV head is
// replicated on n_ranks / n_head_kv consecutive ranks, the ones holding the query heads of its
// group (vLLM's rule), so the K/V tensors are split among n_head_kv "KV ranks". shard_hparams
// checks that the counts divide.
ShardSpec kv_head_shard(const ShardSpec& spec, int32_t n_head_kv);

// How attention's projections are split. Q and O go by KV-head groups (a rank's query heads are
// exactly those that read its KV heads, however unevenly the KV heads fall), or by single query
// heads, evenly, when the KV heads are replicated; K and V by KV heads under kv_head_shard.
struct HeadSplit {
  ShardUnit q;   // of Q's outputs and O's inputs, with `spec`
  ShardUnit kv;  // of K's and V's outputs, with kv_head_shard(spec, n_head_kv)
};
HeadSplit head_split(int32_t n_head, int32_t n_head_kv, int64_t head_dim, const ShardSpec& spec);

// The rank's run of a dimension of `extent` elements: extent / unit.elements units divided
// evenly (balanced with unit.uneven). An error naming `tensor` when the units do not divide by
// n_ranks (without unit.uneven) or are fewer than the ranks, or when `block` (elements per quant
// block along this dimension; 1 when it is not the blocked one) does not divide a rank's run.
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
