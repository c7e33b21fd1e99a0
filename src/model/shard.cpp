#include "model/shard.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/check.h"

namespace cera::model {

using ShardShape = std::array<int64_t, 4>;

namespace {

// Bytes of a packed tensor of `shape`, or an error when its rows are not whole blocks.
Result<int64_t> packed_bytes(const std::string& tensor, DType dtype, const ShardShape& shape) {
  const std::optional<uint64_t> row = dtype_row_bytes(dtype, static_cast<uint64_t>(shape[0]));
  if (!row) {
    return corrupt("tensor '" + tensor + "': rows of " + std::to_string(shape[0]) +
                   " elements are not whole " + std::string(dtype_name(dtype)) + " blocks");
  }
  return static_cast<int64_t>(*row) * shape[1] * shape[2] * shape[3];
}

}  // namespace

Status check_shard_spec(const ShardSpec& spec) {
  if (spec.n_ranks < 1 || spec.rank < 0 || spec.rank >= spec.n_ranks) {
    return invalid_argument("rank " + std::to_string(spec.rank) + " of " +
                            std::to_string(spec.n_ranks) +
                            " tensor-parallel ranks is not a rank (0 <= rank < N, N >= 1)");
  }
  return ok_status();
}

ShardSpec kv_head_shard(const ShardSpec& spec, int32_t n_head_kv) {
  if (n_head_kv <= 0 || n_head_kv >= spec.n_ranks) return spec;
  const int replicas = spec.n_ranks / n_head_kv;
  return {.rank = spec.rank / replicas, .n_ranks = n_head_kv};
}

Result<ShardRange> shard_range(const std::string& tensor, int64_t extent, ShardUnit unit,
                               int64_t block, const ShardSpec& spec) {
  CERA_RETURN_IF_ERROR(check_shard_spec(spec).with_context("tensor '" + tensor + "'"));
  if (unit.elements < 1 || extent % unit.elements != 0) {
    return invalid_argument("tensor '" + tensor + "': " + std::to_string(extent) +
                            " elements are not whole " + unit.what + "s of " +
                            std::to_string(unit.elements));
  }
  const int64_t units = extent / unit.elements;
  if ((units % spec.n_ranks != 0 && !unit.uneven) || units < spec.n_ranks) {
    return invalid_argument(
        "tensor '" + tensor + "' has " + std::to_string(units) + " " + unit.what + "s, which " +
        (units < spec.n_ranks ? "are fewer than the " : "do not divide among ") +
        std::to_string(spec.n_ranks) + " tensor-parallel ranks; choose a rank count that " +
        (unit.uneven ? "is at most " : "divides ") + std::to_string(units));
  }
  const ShardRange in_units = balanced_range(units, spec);
  const ShardRange range{.first = in_units.first * unit.elements,
                         .count = in_units.count * unit.elements};
  if (block > 1 && (range.count % block != 0 || range.first % block != 0)) {
    return invalid_argument("tensor '" + tensor + "': rank " + std::to_string(spec.rank) + "'s " +
                            std::to_string(range.count) + " elements would cut its " +
                            std::to_string(block) + "-element quant blocks (" +
                            std::to_string(spec.n_ranks) +
                            " ranks); choose fewer ranks or a file quantized with smaller blocks");
  }
  return range;
}

ShardRange balanced_range(int64_t units, const ShardSpec& spec) {
  const int64_t base = units / spec.n_ranks, extra = units % spec.n_ranks;
  return {.first = spec.rank * base + std::min<int64_t>(spec.rank, extra),
          .count = base + (spec.rank < extra ? 1 : 0)};
}

HeadSplit head_split(int32_t n_head, int32_t n_head_kv, int64_t head_dim, const ShardSpec& spec) {
  if (n_head_kv > 0 && n_head_kv < spec.n_ranks) {
    return {.q = {.elements = head_dim, .what = "head"},
            .kv = {.elements = head_dim, .what = "KV head"}};
  }
  const int64_t group = n_head_kv > 0 ? n_head / n_head_kv : 1;
  return {.q = {.elements = group * head_dim, .what = "KV-head group", .uneven = true},
          .kv = {.elements = head_dim, .what = "KV head", .uneven = true}};
}

Result<std::array<int64_t, 4>> shard_shape(const std::string& tensor, DType dtype,
                                           std::array<int64_t, 4> shape, ShardSplit split,
                                           ShardUnit unit, const ShardSpec& spec) {
  if (split == ShardSplit::kReplicated || !spec.split()) return shape;
  const int dim = split == ShardSplit::kOutputs ? 1 : 0;
  const int64_t block = dim == 0 ? dtype_block_size(dtype) : 1;
  if (unit.groups < 1 || shape[dim] % unit.groups != 0) {
    return invalid_argument("tensor '" + tensor + "': ne[" + std::to_string(dim) +
                            "] = " + std::to_string(shape[dim]) + " is not " +
                            std::to_string(unit.groups) + " equal parts");
  }
  CERA_ASSIGN_OR_RETURN(ShardRange range,
                        shard_range(tensor, shape[dim] / unit.groups, unit, block, spec));
  shape[dim] = range.count * unit.groups;
  return shape;
}

Status shard_copy(const std::string& tensor, DType dtype, std::array<int64_t, 4> shape,
                  std::span<const std::byte> bytes, ShardSplit split, ShardUnit unit,
                  const ShardSpec& spec, std::span<std::byte> out) {
  CERA_ASSIGN_OR_RETURN(int64_t whole_bytes, packed_bytes(tensor, dtype, shape));
  if (static_cast<int64_t>(bytes.size()) != whole_bytes) {
    return corrupt("tensor '" + tensor + "' holds " + std::to_string(bytes.size()) +
                   " bytes, its shape needs " + std::to_string(whole_bytes));
  }
  CERA_ASSIGN_OR_RETURN(ShardShape part, shard_shape(tensor, dtype, shape, split, unit, spec));
  CERA_ASSIGN_OR_RETURN(int64_t part_bytes, packed_bytes(tensor, dtype, part));
  CERA_CHECK_MSG(static_cast<int64_t>(out.size()) == part_bytes,
                 "shard_copy: the output must be the slice's size");
  const int64_t rows = shape[1] * shape[2] * shape[3];
  if (rows == 0) return ok_status();
  const int64_t row_bytes = whole_bytes / rows;
  if (part == shape) {  // replicated or unsplit
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return ok_status();
  }
  const int dim = split == ShardSplit::kOutputs ? 1 : 0;
  CERA_ASSIGN_OR_RETURN(ShardRange range,
                        shard_range(tensor, shape[dim] / unit.groups, unit,
                                    dim == 0 ? dtype_block_size(dtype) : 1, spec));
  if (split == ShardSplit::kOutputs) {
    // Matrices of `whole` rows (one per expert and per group), each giving its run.
    const int64_t whole = shape[1] / unit.groups;
    const int64_t matrices = shape[2] * shape[3] * unit.groups;
    for (int64_t m = 0; m < matrices; ++m) {
      std::memcpy(out.data() + m * range.count * row_bytes,
                  bytes.data() + (m * whole + range.first) * row_bytes,
                  static_cast<size_t>(range.count * row_bytes));
    }
    return ok_status();
  }
  // Every row gives its run of each of the `groups` parts of ne[0] (whole blocks: shard_range
  // checked that the run starts and ends on block boundaries).
  const int64_t block = dtype_block_size(dtype);
  const int64_t block_bytes =
      static_cast<int64_t>(*dtype_row_bytes(dtype, static_cast<uint64_t>(block)));
  const int64_t run_bytes = range.count / block * block_bytes,
                skip_bytes = range.first / block * block_bytes;
  const int64_t part_stride = row_bytes / unit.groups;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < unit.groups; ++g) {
      std::memcpy(out.data() + (r * unit.groups + g) * run_bytes,
                  bytes.data() + r * row_bytes + g * part_stride + skip_bytes,
                  static_cast<size_t>(run_bytes));
    }
  }
  return ok_status();
}

Result<std::vector<std::byte>> shard_bytes(const std::string& tensor, DType dtype,
                                           std::array<int64_t, 4> shape,
                                           std::span<const std::byte> bytes, ShardSplit split,
                                           ShardUnit unit, const ShardSpec& spec) {
  CERA_ASSIGN_OR_RETURN(ShardShape part, shard_shape(tensor, dtype, shape, split, unit, spec));
  CERA_ASSIGN_OR_RETURN(int64_t part_bytes, packed_bytes(tensor, dtype, part));
  std::vector<std::byte> out(static_cast<size_t>(part_bytes));
  CERA_RETURN_IF_ERROR(shard_copy(tensor, dtype, shape, bytes, split, unit, spec, out));
  return out;
}

}  // namespace cera::model
