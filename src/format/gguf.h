// GGUF reader over a read-only memory map (versions 2 and 3). Everything is validated once at
// open(); afterwards accessors cannot fail except on a missing key or a type mismatch. Strings and
// tensor data are views into the map: a GgufFile must outlive every view taken from it.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
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

// An array value. Numbers and bools are kept packed (little-endian, as in the file) so a large
// numeric array costs its own size, not a variant per element; strings and nested arrays are
// GgufValues.
struct GgufArray {
  GgufType element_type = GgufType::kUint8;
  std::vector<GgufValue> values;  // element_type kString or kArray
  std::vector<uint8_t> packed;    // every other element_type: size() * element size bytes

  uint64_t size() const;
  GgufValue at(uint64_t i) const;  // precondition: i < size()

  static GgufArray of_strings(std::vector<std::string> strings);
  template <class T>
  static GgufArray of(std::span<const T> numbers);
};

// Bytes of one element of a numeric or bool type; 0 for strings and arrays.
uint32_t gguf_scalar_size(GgufType type);
// Maps a C++ scalar type to its GGUF type id.
template <class T>
constexpr GgufType gguf_type_of();

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
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// The C++ types the typed accessors (get, get_array, gguf_value_as) are instantiated for, as an
// X-macro so the two translation units that instantiate them share one list.
#define CERA_GGUF_ACCESSOR_TYPES(X) \
  X(uint8_t) X(int8_t) X(uint16_t) X(int16_t) X(uint32_t) X(int32_t) X(uint64_t) X(int64_t) X(float) \
  X(double) X(bool) X(std::string)

// Conversion used by the typed accessors: `what` names the value in the error ("key 'x'").
template <class T>
Result<T> gguf_value_as(const GgufValue& value, std::string_view what);

template <class T>
constexpr GgufType gguf_type_of() {
  if constexpr (std::is_same_v<T, uint8_t>) return GgufType::kUint8;
  else if constexpr (std::is_same_v<T, int8_t>) return GgufType::kInt8;
  else if constexpr (std::is_same_v<T, uint16_t>) return GgufType::kUint16;
  else if constexpr (std::is_same_v<T, int16_t>) return GgufType::kInt16;
  else if constexpr (std::is_same_v<T, uint32_t>) return GgufType::kUint32;
  else if constexpr (std::is_same_v<T, int32_t>) return GgufType::kInt32;
  else if constexpr (std::is_same_v<T, float>) return GgufType::kFloat32;
  else if constexpr (std::is_same_v<T, bool>) return GgufType::kBool;
  else if constexpr (std::is_same_v<T, uint64_t>) return GgufType::kUint64;
  else if constexpr (std::is_same_v<T, int64_t>) return GgufType::kInt64;
  else if constexpr (std::is_same_v<T, double>) return GgufType::kFloat64;
  else static_assert(sizeof(T) == 0, "not a GGUF scalar type");
}

template <class T>
GgufArray GgufArray::of(std::span<const T> numbers) {
  GgufArray a;
  a.element_type = gguf_type_of<T>();
  if constexpr (std::is_same_v<T, bool>) {
    for (bool b : numbers) a.packed.push_back(b ? 1 : 0);
  } else {
    a.packed.resize(numbers.size_bytes());
    if (!numbers.empty()) std::memcpy(a.packed.data(), numbers.data(), numbers.size_bytes());
  }
  return a;
}

}  // namespace cera::format
