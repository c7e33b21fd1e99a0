// GGUF reader over a read-only memory map (versions 2 and 3). Everything is validated once at
// open(); afterwards accessors cannot fail except on a missing key or a type mismatch. Strings and
// tensor data are views into the map: a GgufFile must outlive every view taken from it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/status.h"

namespace cera::format {

// Value type ids of GGUF metadata (the numbers are the file's).
enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
std::string_view gguf_type_name(GgufType type);

struct GgufValue;
struct GgufArray {
  GgufType element_type = GgufType::kUint8;
  std::vector<GgufValue> items;  // nested arrays are GgufValues holding GgufArray
};

// One metadata value. Strings are std::string (owned) so files built in memory and read files
// share one representation; token lists of 262k entries cost a few MB, read once at load.
struct GgufValue {
  using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                               std::string, GgufArray, uint64_t, int64_t, double>;
  Storage v;

  GgufType type() const { return static_cast<GgufType>(v.index()); }
  const GgufArray* array() const { return std::get_if<GgufArray>(&v); }
  const std::string* string() const { return std::get_if<std::string>(&v); }
  // Any integer or bool as int64 / any number as double; nullopt for strings, arrays, or a
  // uint64 above INT64_MAX.
  std::optional<int64_t> as_int() const;
  std::optional<double> as_double() const;
};

struct GgufKv {
  std::string key;
  GgufValue value;
};

constexpr uint32_t kGgufMaxDims = 4;

struct GgufTensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;  // GGUF order: shape[0] is the contiguous (row) dimension
  uint64_t offset = 0;          // from the start of the data section
  uint64_t n_bytes = 0;         // validated: whole blocks, inside the file

  uint64_t n_elements() const;
};

class GgufFile {
 public:
  // Maps and validates a file; the error names the key or tensor and what was expected/found.
  static Result<GgufFile> open(const std::filesystem::path& path);
  // Validates bytes owned by the caller (fuzzing, tests); they must outlive the GgufFile.
  static Result<GgufFile> parse(std::span<const std::byte> bytes);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return bytes_.size(); }

  const std::vector<GgufKv>& metadata() const { return kvs_; }
  const GgufValue* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed accessors. Integers convert between widths when the value fits (files disagree on
  // u32 vs i32); floats accept any number; a wrong type or a missing key is an error naming it.
  template <class T>
  Result<T> get(std::string_view key) const;
  template <class T>
  Result<T> get_or(std::string_view key, T fallback) const {
    if (!has(key)) return fallback;
    return get<T>(key);
  }
  // Arrays of numbers or strings, converted element-wise with the same rules.
  template <class T>
  Result<std::vector<T>> get_array(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // The tensor's bytes inside the map (n_bytes long, alignment-respecting offset).
  std::span<const std::byte> tensor_data(const GgufTensorInfo& info) const;

 private:
  friend class GgufParser;
  std::shared_ptr<MappedFile> map_;  // null when parsing caller-owned bytes
  std::span<const std::byte> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufKv> kvs_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

// Conversions used by the typed accessors; exposed for the writer and tests.
template <class T>
Result<T> gguf_value_as(const GgufValue& value, std::string_view what);

}  // namespace cera::format
