#include "model/shard.h"

#include <cstring>

namespace cera::model {

Result<ShardRange> shard_range(const std::string& tensor, int64_t extent, ShardUnit unit,
                               int64_t block, const ShardSpec& spec) {
  if (spec.n_ranks < 1 || spec.rank < 0 || spec.rank >= spec.n_ranks) {
    return invalid_argument("tensor '" + tensor + "': rank " + std::to_string(spec.rank) + " of " +
                            std::to_string(spec.n_ranks) +
                            " is not a rank (0 <= rank < N, N >= 1)");
  }
  if (unit.elements < 1 || extent % unit.elements != 0) {
    return invalid_argument("tensor '" + tensor + "': " + std::to_string(extent) +
                            " elements are not whole " + unit.what + "s of " +
                            std::to_string(unit.elements));
  }
  const int64_t units = extent / unit.elements;
  if (units % spec.n_ranks != 0) {
    return invalid_argument(
        "tensor '" + tensor + "' has " + std::to_string(units) + " " + unit.what +
        "s, which do not divide among " + std::to_string(spec.n_ranks) +
        " tensor-parallel ranks; choose a rank count that divides " + std::to_string(units));
  }
  const int64_t count = units / spec.n_ranks * unit.elements;
  if (block > 1 && count % block != 0) {
    return invalid_argument("tensor '" + tensor + "': a rank's " + std::to_string(count) +
                            " elements would cut its " + std::to_string(block) +
                            "-element quant blocks (" + std::to_string(spec.n_ranks) +
                            " ranks); choose fewer ranks or a file quantized with smaller blocks");
  }
  return ShardRange{count * spec.rank, count};
}

Result<std::array<int64_t, 4>> shard_shape(const std::string& tensor, DType dtype,
                                           std::array<int64_t, 4> shape, ShardSplit split,
                                           ShardUnit unit, const ShardSpec& spec) {
  if (split == ShardSplit::kReplicated || !spec.split()) return shape;
  const int dim = split == ShardSplit::kInputs ? 0 : 1;
  const int64_t block = dim == 0 ? dtype_block_size(dtype) : 1;
  CERA_ASSIGN_OR_RETURN(ShardRange range, shard_range(tensor, shape[dim], unit, block, spec));
  shape[dim] = range.count;
  return shape;
}

Result<std::vector<std::byte>> shard_bytes(const std::string& tensor, DType dtype,
                                           std::array<int64_t, 4> shape,
                                           std::span<const std::byte> bytes, ShardSplit split,
                                           ShardUnit unit, const ShardSpec& spec) {
  const int64_t block = dtype_block_size(dtype);
  const int64_t block_bytes = dtype_type_size(dtype);
  if (shape[0] % block != 0) {
    return corrupt("tensor '" + tensor + "': rows of " + std::to_string(shape[0]) +
                   " elements are not whole " + std::string(dtype_name(dtype)) + " blocks");
  }
  const int64_t row_bytes = shape[0] / block * block_bytes;
  const int64_t rows = shape[1] * shape[2] * shape[3];
  if (static_cast<int64_t>(bytes.size()) != rows * row_bytes) {
    return corrupt("tensor '" + tensor + "' holds " + std::to_string(bytes.size()) +
                   " bytes, its shape needs " + std::to_string(rows * row_bytes));
  }
  if (split == ShardSplit::kReplicated || !spec.split())
    return std::vector<std::byte>(bytes.begin(), bytes.end());

  std::vector<std::byte> out;
  if (split == ShardSplit::kOutputs) {
    CERA_ASSIGN_OR_RETURN(ShardRange range, shard_range(tensor, shape[1], unit, 1, spec));
    const int64_t matrices =
        shape[2] * shape[3];  // e.g. one per expert: each is split the same way
    out.resize(static_cast<size_t>(matrices * range.count * row_bytes));
    for (int64_t m = 0; m < matrices; ++m) {
      const std::byte* src = bytes.data() + (m * shape[1] + range.first) * row_bytes;
      std::memcpy(out.data() + m * range.count * row_bytes, src,
                  static_cast<size_t>(range.count * row_bytes));
    }
    return out;
  }
  CERA_ASSIGN_OR_RETURN(ShardRange range, shard_range(tensor, shape[0], unit, block, spec));
  const int64_t run_bytes = range.count / block * block_bytes;
  const int64_t skip_bytes = range.first / block * block_bytes;
  out.resize(static_cast<size_t>(rows * run_bytes));
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(out.data() + r * run_bytes, bytes.data() + r * row_bytes + skip_bytes,
                static_cast<size_t>(run_bytes));
  }
  return out;
}

}  // namespace cera::model
