#include "model/weights.h"

#include <new>

namespace cera::model {
namespace {

// A shard's host copy. Backends may import host weights without copying (the CPU reads GGUF
// blocks in place from the mapped file), so the slice must live as long as the model. Aligned to
// 64 bytes: a mapped GGUF's tensors start on 32-byte boundaries and kernels may rely on that.
class HostBytes final : public ops::Buffer {
 public:
  explicit HostBytes(uint64_t size)
      : data_(new (std::align_val_t{64}) std::byte[size]), size_(size) {}
  std::byte* data() override { return data_.get(); }
  uint64_t size() const override { return size_; }

 private:
  struct AlignedDelete {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<std::byte[], AlignedDelete> data_;
  uint64_t size_;
};

std::string shape_text(const std::array<int64_t, 4>& s) {
  std::string out = "[";
  int n = 4;
  while (n > 1 && s[n - 1] == 1) --n;
  for (int i = 0; i < n; ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

WeightLoader::WeightLoader(const format::GgufFile& file, ops::Backend& backend,
                           LoadProgress progress)
    : file_(file), backend_(backend), progress_(std::move(progress)) {
  for (const format::GgufTensorInfo& t : file_.tensors()) bytes_total_ += t.n_bytes;
}

std::string layer_tensor(int layer, const char* role, const char* suffix) {
  return "blk." + std::to_string(layer) + "." + role + "." + suffix;
}

std::optional<std::array<int64_t, 4>> WeightLoader::shape_of(const std::string& name) const {
  const format::GgufTensorInfo* info = file_.find_tensor(name);
  if (info == nullptr) return std::nullopt;
  std::array<int64_t, 4> s = {1, 1, 1, 1};
  for (size_t i = 0; i < info->shape.size(); ++i) s[i] = static_cast<int64_t>(info->shape[i]);
  return s;
}

Status WeightLoader::check(const format::GgufTensorInfo& info, std::array<int64_t, 4> shape,
                           WeightUse use) const {
  const std::array<int64_t, 4> have = *shape_of(info.name);
  if (have != shape) {
    return invalid_argument("tensor '" + info.name + "' has shape " + shape_text(have) +
                            ", expected " + shape_text(shape));
  }
  const bool type_ok =
      use == WeightUse::kVector ? info.dtype == DType::kF32 : backend_.supports_weight(info.dtype);
  if (!type_ok) {
    return unsupported(
        "tensor '" + info.name + "' has type " + std::string(dtype_name(info.dtype)) +
        (use == WeightUse::kVector ? ", expected F32"
                                   : ", which has no " + backend_.name() + " kernel"));
  }
  return ok_status();
}

Result<TensorView> WeightLoader::import(const format::GgufTensorInfo& info,
                                        const TensorView& host) {
  std::unique_ptr<ops::Buffer> keep;
  auto view = backend_.import_weight(host, keep);
  if (!view.ok()) return view.status().with_context("tensor '" + info.name + "'");
  if (keep) buffers_.push_back(std::move(keep));
  bytes_done_ += info.n_bytes;
  if (progress_) progress_(bytes_done_, bytes_total_);
  return view;
}

Result<TensorView> WeightLoader::load(const format::GgufTensorInfo& info,
                                      std::array<int64_t, 4> shape, WeightUse use) {
  CERA_RETURN_IF_ERROR(check(info, shape, use));
  auto bytes = file_.tensor_data(info);
  return import(info, make_view(const_cast<std::byte*>(bytes.data()), info.dtype, shape));
}

Result<TensorView> WeightLoader::require_shard(const std::string& name,
                                               std::array<int64_t, 4> shape, WeightUse use,
                                               ShardSplit split, ShardUnit unit,
                                               const ShardSpec& shard) {
  if (!shard.split() || split == ShardSplit::kReplicated) return require(name, shape, use);
  const format::GgufTensorInfo* info = file_.find_tensor(name);
  if (info == nullptr) return not_found("tensor '" + name + "' is missing");
  CERA_RETURN_IF_ERROR(check(*info, shape, use));
  using Shape = std::array<int64_t, 4>;
  CERA_ASSIGN_OR_RETURN(Shape part_shape,
                        shard_shape(name, info->dtype, shape, split, unit, shard));
  const TensorView part = make_view(nullptr, info->dtype, part_shape);  // for its byte count
  auto host = std::make_unique<HostBytes>(static_cast<uint64_t>(part.row_bytes() * part.rows()));
  CERA_RETURN_IF_ERROR(shard_copy(name, info->dtype, shape, file_.tensor_data(*info), split, unit,
                                  shard, {host->data(), host->size()}));
  const TensorView view = make_view(host->data(), info->dtype, part_shape);
  CERA_ASSIGN_OR_RETURN(TensorView imported, import(*info, view));
  if (imported.data == host->data()) buffers_.push_back(std::move(host));  // in place: keep it
  return imported;
}

Result<TensorView> WeightLoader::require(const std::string& name, std::array<int64_t, 4> shape,
                                         WeightUse use) {
  const format::GgufTensorInfo* info = file_.find_tensor(name);
  if (info == nullptr) return not_found("tensor '" + name + "' is missing");
  return load(*info, shape, use);
}

Result<std::optional<TensorView>> WeightLoader::optional(const std::string& name,
                                                         std::array<int64_t, 4> shape,
                                                         WeightUse use) {
  const format::GgufTensorInfo* info = file_.find_tensor(name);
  if (info == nullptr) return std::optional<TensorView>{};
  CERA_ASSIGN_OR_RETURN(TensorView v, load(*info, shape, use));
  return std::optional<TensorView>{v};
}

}  // namespace cera::model
