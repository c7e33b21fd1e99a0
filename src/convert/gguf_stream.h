// A GGUF (v3) writer that asks for each tensor's bytes only when it is written, so converting or
// synthesising an 8B model holds one tensor at a time instead of the whole file. Metadata and
// layout follow format/gguf_writer.h (insertion order, 32-byte alignment, padded tensor data).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "format/gguf_writer.h"

namespace cera::convert {

// Fills exactly the tensor's byte size; called once, on the writing thread, in tensor order.
using TensorFill = std::function<Status(std::span<std::byte> out)>;

class GgufStreamWriter {
 public:
  void set(const std::string& key, format::GgufValue value);
  void set_string(const std::string& key, std::string v) { set(key, {std::move(v)}); }
  void set_u32(const std::string& key, uint32_t v) { set(key, {v}); }
  void set_i32(const std::string& key, int32_t v) { set(key, {v}); }
  void set_f32(const std::string& key, float v) { set(key, {v}); }
  void set_bool(const std::string& key, bool v) { set(key, {v}); }
  void set_array(const std::string& key, format::GgufArray v) { set(key, {std::move(v)}); }
  bool has(const std::string& key) const;

  // Validates the name (unique) and that shape[0] is whole blocks of dtype.
  Status add_tensor(format::GgufTensorSpec spec, TensorFill fill);

  // Writes to path + ".partial" and renames, like format::GgufWriter. progress gets data bytes.
  Status write(const std::filesystem::path& path, const format::WriteProgress& progress = {}) const;

  const std::vector<format::GgufTensorSpec>& specs() const { return specs_; }

 private:
  std::vector<format::GgufKv> kvs_;
  std::vector<format::GgufTensorSpec> specs_;
  std::vector<uint64_t> sizes_;
  std::vector<TensorFill> fills_;
};

// Bytes of a tensor of the given type and GGUF shape, or nullopt when shape[0] is not whole blocks.
std::optional<uint64_t> tensor_bytes(DType dtype, const std::vector<uint64_t>& shape);

}  // namespace cera::convert
