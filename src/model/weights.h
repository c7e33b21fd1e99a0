// Loads named tensors from a GGUF file onto a backend, checking each one's shape and that the
// backend has a kernel for its type, so a bad file fails at load time naming the tensor.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "format/gguf.h"
#include "model/model.h"
#include "model/shard.h"
#include "ops/backend.h"

namespace cera::model {

// How a weight is used decides which types are acceptable.
enum class WeightUse {
  kMatmul,     // a Linear: any type the backend's matmul supports
  kEmbedding,  // rows gathered by token id: any type the backend's embed supports
  kVector,     // norms, biases, rope factors: F32 only (read on the host by some verbs)
};

class WeightLoader {
 public:
  WeightLoader(const format::GgufFile& file, ops::Backend& backend, LoadProgress progress = {});

  // `shape` in GGUF order (ne[0] first); trailing 1s may be omitted in the file.
  Result<TensorView> require(const std::string& name, std::array<int64_t, 4> shape, WeightUse use);
  // nullopt when the file has no such tensor; an error when it has one of the wrong shape or type.
  Result<std::optional<TensorView>> optional(const std::string& name, std::array<int64_t, 4> shape,
                                             WeightUse use);
  // Tensor parallel: rank `shard.rank`'s slice of a tensor whose whole shape is `shape`, split as
  // `split` (src/model/shard.h); the view has the slice's shape. With an unsplit ShardSpec or
  // kReplicated it is require().
  Result<TensorView> require_shard(const std::string& name, std::array<int64_t, 4> shape,
                                   WeightUse use, ShardSplit split, ShardUnit unit,
                                   const ShardSpec& shard);
  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }
  // The first dimension of a tensor's shape, e.g. n_vocab from token_embd's ne[1].
  std::optional<std::array<int64_t, 4>> shape_of(const std::string& name) const;

  // Allocations made by the backend for imported weights; moved into the model.
  std::vector<std::unique_ptr<ops::Buffer>> take_buffers() { return std::move(buffers_); }

 private:
  Result<TensorView> load(const format::GgufTensorInfo& info, std::array<int64_t, 4> shape,
                          WeightUse use);
  Status check(const format::GgufTensorInfo& info, std::array<int64_t, 4> shape,
               WeightUse use) const;
  Result<TensorView> import(const format::GgufTensorInfo& info, const TensorView& host);

  const format::GgufFile& file_;
  ops::Backend& backend_;
  LoadProgress progress_;
  uint64_t bytes_total_ = 0;  // every tensor of the file
  uint64_t bytes_done_ = 0;
  std::vector<std::unique_ptr<ops::Buffer>> buffers_;
};

// "blk.3.attn_q.weight"
std::string layer_tensor(int layer, const char* role, const char* suffix = "weight");

}  // namespace cera::model
