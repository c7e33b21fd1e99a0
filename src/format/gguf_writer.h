// GGUF writer (version 3) for converters, synth models and tests. Metadata keeps insertion
// order; tensor data is either owned or a view into memory that outlives write(). write() goes
// to a temporary file renamed into place, so a failed conversion never leaves a half file.
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

  // The data must be exactly the tensor's byte size; names must be unique.
  Status add_tensor(GgufTensorSpec spec, std::vector<std::byte> data);
  Status add_tensor_view(GgufTensorSpec spec, std::span<const std::byte> data);

  Status write(const std::filesystem::path& path, const WriteProgress& progress = {}) const;
  std::vector<std::byte> to_bytes() const;

 private:
  struct Tensor {
    GgufTensorSpec spec;
    std::vector<std::byte> owned;
    std::span<const std::byte> view;
    uint64_t offset = 0;
  };
  Status add(Tensor tensor);
  // Serialises everything before the data section (header, metadata, tensor infos, padding).
  std::vector<std::byte> header_bytes() const;

  uint32_t alignment_;
  std::vector<GgufKv> kvs_;
  std::vector<Tensor> tensors_;
  uint64_t data_size_ = 0;
};

}  // namespace cera::format
