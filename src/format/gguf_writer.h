// GGUF writer (version 3) for converters, synth models and tests. Metadata keeps insertion
// order; tensor data is owned, a view into memory that outlives write(), or produced by a fill
// callback only when that tensor is written (so converting an 8B model holds one tensor at a
// time). write() goes to a temporary file renamed into place, so a failed conversion never leaves
// a half file and never replaces what it reads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "format/gguf.h"

namespace cera::format {

struct GgufTensorSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;  // GGUF order: shape[0] is the contiguous row dimension
};

// Called during write() with bytes written so far and the total, for progress display.
using WriteProgress = std::function<void(uint64_t done, uint64_t total)>;

// Fills exactly the tensor's byte size; called once, on the writing thread, in tensor order.
using TensorFill = std::function<Status(std::span<std::byte> out)>;

// Bytes of a tensor of the given type and GGUF shape, or nullopt when shape[0] is not whole blocks.
std::optional<uint64_t> tensor_bytes(DType dtype, const std::vector<uint64_t>& shape);

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t alignment = 32);

  // Adds or replaces a key (a replaced key keeps its original position).
  void set(const std::string& key, GgufValue value);
  void set_string(const std::string& key, std::string value) { set(key, {std::move(value)}); }
  void set_u32(const std::string& key, uint32_t value) { set(key, {value}); }
  void set_i32(const std::string& key, int32_t value) { set(key, {value}); }
  void set_f32(const std::string& key, float value) { set(key, {value}); }
  void set_bool(const std::string& key, bool value) { set(key, {value}); }
  void set_array(const std::string& key, GgufArray value) { set(key, {std::move(value)}); }

  bool has(const std::string& key) const;

  // The data must be exactly the tensor's byte size; names must be unique.
  Status add_tensor(GgufTensorSpec spec, std::vector<std::byte> data);
  Status add_tensor_view(GgufTensorSpec spec, std::span<const std::byte> data);
  Status add_tensor_fill(GgufTensorSpec spec, TensorFill fill);
  size_t n_tensors() const { return tensors_.size(); }

  // Writes the file through OutputFile (core/output_file.h): `path` must not be a device or one of
  // `inputs`, and a failure leaves no partial file.
  Status write(const std::filesystem::path& path, const WriteProgress& progress = {},
               std::span<const std::filesystem::path> inputs = {}) const;
  std::vector<std::byte> to_bytes() const;

 private:
  struct Tensor {
    GgufTensorSpec spec;
    std::vector<std::byte> owned;
    std::span<const std::byte> view;
    TensorFill fill;  // when set, the data comes from here at write time
    uint64_t n_bytes = 0;
    uint64_t offset = 0;
  };
  // The tensor's bytes: its view, or `scratch` filled by its callback.
  Result<std::span<const std::byte>> data_of(const Tensor& t, std::vector<std::byte>& scratch) const;
  Status add(Tensor tensor);
  // Serialises everything before the data section (header, metadata, tensor infos, padding).
  std::vector<std::byte> header_bytes() const;

  uint32_t alignment_;
  std::vector<GgufKv> kvs_;
  std::vector<Tensor> tensors_;
  uint64_t data_size_ = 0;
};

}  // namespace cera::format
