// Reader for Hugging Face safetensors files over a memory map: one file or a sharded checkpoint
// (model.safetensors.index.json). Every header field is validated at open(): header length,
// dtype (F32, F16, BF16, and I64 for index buffers such as BERT's position_ids), shape, and data offsets inside the file with the exact byte size.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"

namespace cera::convert {

enum class StDType { kF32, kF16, kBF16, kI64 };
uint32_t st_dtype_size(StDType t);
const char* st_dtype_name(StDType t);

struct StTensor {
  std::string name;
  StDType dtype = StDType::kF32;
  std::vector<uint64_t> shape;       // safetensors (row-major, PyTorch) order: shape.back() is contiguous
  std::span<const std::byte> data;   // inside the owning file's map
  std::string file;                  // the file it came from, for error messages

  uint64_t n_elements() const;
  // Elements [first, first + n) converted to float (I64: exact up to 2^24). Precondition:
  // first + n <= n_elements().
  void read_f32(uint64_t first, uint64_t n, float* out) const;
};

class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::filesystem::path& path);
  // Validates caller-owned bytes (tests); they must outlive the object.
  static Result<SafetensorsFile> parse(std::span<const std::byte> bytes, const std::string& name);

  const std::vector<StTensor>& tensors() const { return tensors_; }

 private:
  std::shared_ptr<MappedFile> map_;
  std::vector<StTensor> tensors_;
};

// All tensors of a checkpoint folder, by name. Shards named in the index must all exist and the
// index's weight map must name exactly the tensors found in them.
class SafetensorsCheckpoint {
 public:
  static Result<SafetensorsCheckpoint> open_dir(const std::filesystem::path& dir);

  const StTensor* find(const std::string& name) const;
  const std::map<std::string, const StTensor*>& by_name() const { return by_name_; }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const StTensor*> by_name_;
};

}  // namespace cera::convert
