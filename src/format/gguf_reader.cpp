// Parses and validates a whole GGUF file up front, so that nothing downstream ever reads past the
// map or trusts a count. Every bound is checked against the bytes that remain *before* anything
// is allocated, which keeps hostile counts from turning into huge allocations.
#include <algorithm>
#include <bit>
#include <limits>

#include "format/gguf.h"

namespace cera::format {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian uint32
constexpr uint32_t kMaxNesting = 8;      // arrays of arrays; real files use none
constexpr uint64_t kMaxNameLength = 1 << 16;

std::string quote(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 120)) out += (static_cast<unsigned char>(c) < 0x20) ? '?' : c;
  if (s.size() > 120) out += "...";
  return out + "'";
}

}  // namespace

// Cursor over the file bytes; every read is bounds-checked and names what it was reading.
class GgufParser {
 public:
  explicit GgufParser(std::span<const std::byte> bytes) : bytes_(bytes) {}

  Status parse(GgufFile& file);

 private:
  uint64_t remaining() const { return bytes_.size() - pos_; }

  template <class T>
  Status read(T& out, std::string_view what) {
    if (remaining() < sizeof(T)) {
      return corrupt("file ends inside " + std::string(what) + " at byte " + std::to_string(pos_) +
                     " (needs " + std::to_string(sizeof(T)) + " bytes, " +
                     std::to_string(remaining()) + " left)");
    }
    std::memcpy(&out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return {};
  }

  Status read_string(std::string& out, std::string_view what) {
    uint64_t len = 0;
    CERA_RETURN_IF_ERROR(read(len, std::string(what) + " length"));
    if (len > remaining()) {
      return corrupt(std::string(what) + ": string length " + std::to_string(len) +
                     " exceeds the " + std::to_string(remaining()) + " bytes left in the file");
    }
    out.assign(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return {};
  }

  Status read_value(GgufType type, GgufValue& out, const std::string& what, uint32_t depth);
  Status read_array(GgufArray& out, const std::string& what, uint32_t depth);
  Status read_kvs(GgufFile& file, uint64_t n_kv);
  Status read_tensor_infos(GgufFile& file, uint64_t n_tensors);
  Status validate_tensors(GgufFile& file);

  std::span<const std::byte> bytes_;
  uint64_t pos_ = 0;
};

Status GgufParser::read_value(GgufType type, GgufValue& out, const std::string& what,
                              uint32_t depth) {
  switch (type) {
#define CERA_SCALAR(kind, T)                  \
  case GgufType::kind: {                      \
    T x{};                                    \
    CERA_RETURN_IF_ERROR(read(x, what));      \
    out.v = x;                                \
    return {};                                \
  }
    CERA_SCALAR(kUint8, uint8_t)
    CERA_SCALAR(kInt8, int8_t)
    CERA_SCALAR(kUint16, uint16_t)
    CERA_SCALAR(kInt16, int16_t)
    CERA_SCALAR(kUint32, uint32_t)
    CERA_SCALAR(kInt32, int32_t)
    CERA_SCALAR(kFloat32, float)
    CERA_SCALAR(kUint64, uint64_t)
    CERA_SCALAR(kInt64, int64_t)
    CERA_SCALAR(kFloat64, double)
#undef CERA_SCALAR
    case GgufType::kBool: {
      uint8_t b = 0;
      CERA_RETURN_IF_ERROR(read(b, what));
      if (b > 1) return corrupt(what + ": bool byte is " + std::to_string(b) + ", expected 0 or 1");
      out.v = b == 1;
      return {};
    }
    case GgufType::kString: {
      std::string s;
      CERA_RETURN_IF_ERROR(read_string(s, what));
      out.v = std::move(s);
      return {};
    }
    case GgufType::kArray: {
      GgufArray a;
      CERA_RETURN_IF_ERROR(read_array(a, what, depth + 1));
      out.v = std::move(a);
      return {};
    }
  }
  return corrupt(what + ": unknown value type id " + std::to_string(static_cast<uint32_t>(type)));
}

Status GgufParser::read_array(GgufArray& out, const std::string& what, uint32_t depth) {
  if (depth > kMaxNesting) {
    return corrupt(what + ": arrays nested deeper than " + std::to_string(kMaxNesting));
  }
  uint32_t type_id = 0;
  uint64_t count = 0;
  CERA_RETURN_IF_ERROR(read(type_id, what + " element type"));
  if (type_id > static_cast<uint32_t>(GgufType::kFloat64)) {
    return corrupt(what + ": unknown array element type id " + std::to_string(type_id) +
                   " (expected 0..12)");
  }
  out.element_type = static_cast<GgufType>(type_id);
  CERA_RETURN_IF_ERROR(read(count, what + " array length"));
  // Every element takes at least this many bytes in the file: a string its 8-byte length,
  // a nested array its 4-byte type and 8-byte count.
  const uint32_t scalar = gguf_scalar_size(out.element_type);
  const uint64_t min_element = scalar != 0 ? scalar : (out.element_type == GgufType::kString ? 8 : 12);
  if (count > remaining() / min_element) {
    return corrupt(what + ": array length " + std::to_string(count) + " of " +
                   std::string(gguf_type_name(out.element_type)) + " needs at least " +
                   std::to_string(min_element) + " bytes each, but only " +
                   std::to_string(remaining()) + " bytes are left");
  }
  if (scalar != 0) {
    out.packed.resize(count * scalar);
    if (count > 0) std::memcpy(out.packed.data(), bytes_.data() + pos_, count * scalar);
    if (out.element_type == GgufType::kBool) {
      for (uint64_t i = 0; i < count; ++i) {
        if (out.packed[i] > 1) {
          return corrupt(what + "[" + std::to_string(i) + "]: bool byte is " +
                         std::to_string(out.packed[i]) + ", expected 0 or 1");
        }
      }
    }
    pos_ += count * scalar;
    return {};
  }
  out.values.resize(count);
  for (uint64_t i = 0; i < count; ++i) {
    CERA_RETURN_IF_ERROR(
        read_value(out.element_type, out.values[i], what + "[" + std::to_string(i) + "]", depth));
  }
  return {};
}

Status GgufParser::read_kvs(GgufFile& file, uint64_t n_kv) {
  file.kvs_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    GgufKv kv;
    CERA_RETURN_IF_ERROR(read_string(kv.key, "metadata key #" + std::to_string(i)));
    if (kv.key.size() > kMaxNameLength) {
      return corrupt("metadata key #" + std::to_string(i) + " is " + std::to_string(kv.key.size()) +
                     " bytes long (limit " + std::to_string(kMaxNameLength) + ")");
    }
    const std::string what = "key " + quote(kv.key);
    uint32_t type_id = 0;
    CERA_RETURN_IF_ERROR(read(type_id, what + " type"));
    if (type_id > static_cast<uint32_t>(GgufType::kFloat64)) {
      return corrupt(what + ": unknown value type id " + std::to_string(type_id) + " (expected 0..12)");
    }
    CERA_RETURN_IF_ERROR(read_value(static_cast<GgufType>(type_id), kv.value, what, 0));
    if (file.kv_index_.count(kv.key) != 0) return corrupt("duplicate metadata " + what);
    file.kv_index_.emplace(kv.key, file.kvs_.size());
    file.kvs_.push_back(std::move(kv));
  }
  return {};
}

Status GgufParser::read_tensor_infos(GgufFile& file, uint64_t n_tensors) {
  file.tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    CERA_RETURN_IF_ERROR(read_string(t.name, "tensor #" + std::to_string(i) + " name"));
    if (t.name.size() > kMaxNameLength) {
      return corrupt("tensor #" + std::to_string(i) + " name is " + std::to_string(t.name.size()) +
                     " bytes long (limit " + std::to_string(kMaxNameLength) + ")");
    }
    const std::string what = "tensor " + quote(t.name);
    uint32_t n_dims = 0;
    CERA_RETURN_IF_ERROR(read(n_dims, what + " dimension count"));
    if (n_dims == 0 || n_dims > kGgufMaxDims) {
      return corrupt(what + ": dimension count " + std::to_string(n_dims) + ", expected 1.." +
                     std::to_string(kGgufMaxDims));
    }
    t.shape.resize(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      CERA_RETURN_IF_ERROR(read(t.shape[d], what + " dimension " + std::to_string(d)));
      if (t.shape[d] == 0 || t.shape[d] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return corrupt(what + ": dimension " + std::to_string(d) + " is " +
                       std::to_string(t.shape[d]) + ", expected 1..2^63-1");
      }
    }
    uint32_t type_id = 0;
    CERA_RETURN_IF_ERROR(read(type_id, what + " type"));
    const auto dtype = dtype_from_gguf_id(type_id);
    if (!dtype) {
      return corrupt(what + ": unknown tensor type id " + std::to_string(type_id));
    }
    t.dtype = *dtype;
    CERA_RETURN_IF_ERROR(read(t.offset, what + " offset"));
    if (file.tensor_index_.count(t.name) != 0) return corrupt("duplicate " + what);
    file.tensor_index_.emplace(t.name, file.tensors_.size());
    file.tensors_.push_back(std::move(t));
  }
  return {};
}

Status GgufParser::validate_tensors(GgufFile& file) {
  const uint64_t data_size = bytes_.size() - file.data_offset_;
  for (GgufTensorInfo& t : file.tensors_) {
    const std::string what = "tensor " + quote(t.name);
    uint64_t n = 1;
    for (uint64_t d : t.shape) {
      if (n > std::numeric_limits<int64_t>::max() / d) {
        return corrupt(what + ": element count overflows 63 bits");
      }
      n *= d;
    }
    const DTypeTraits& traits = dtype_traits(t.dtype);
    if (t.shape[0] % traits.block_size != 0) {
      return corrupt(what + ": row of " + std::to_string(t.shape[0]) + " elements is not a multiple of the " +
                     std::string(traits.name) + " block size " + std::to_string(traits.block_size));
    }
    const uint64_t blocks = n / traits.block_size;
    if (blocks > std::numeric_limits<uint64_t>::max() / traits.type_size) {
      return corrupt(what + ": byte size overflows 64 bits");
    }
    t.n_bytes = blocks * traits.type_size;
    if (t.offset % file.alignment_ != 0) {
      return corrupt(what + ": data offset " + std::to_string(t.offset) +
                     " is not a multiple of the alignment " + std::to_string(file.alignment_));
    }
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      return corrupt(what + ": data [" + std::to_string(t.offset) + ", +" + std::to_string(t.n_bytes) +
                     ") runs past the end of the data section (" + std::to_string(data_size) + " bytes)");
    }
  }
  return {};
}

Status GgufParser::parse(GgufFile& file) {
  uint32_t magic = 0;
  CERA_RETURN_IF_ERROR(read(magic, "the magic number"));
  if (magic != kMagic) {
    char found[5] = {};
    std::memcpy(found, &magic, 4);
    for (char& c : std::span(found, 4)) c = (c >= 0x20 && c < 0x7f) ? c : '?';
    return corrupt(std::string("not a GGUF file: magic is '") + found + "', expected 'GGUF'");
  }
  CERA_RETURN_IF_ERROR(read(file.version_, "the version"));
  if (file.version_ == 1) return unsupported("GGUF version 1 is not supported (expected 2 or 3)");
  if (file.version_ != 2 && file.version_ != 3) {
    return corrupt("GGUF version " + std::to_string(file.version_) + ", expected 2 or 3");
  }
  uint64_t n_tensors = 0, n_kv = 0;
  CERA_RETURN_IF_ERROR(read(n_tensors, "the tensor count"));
  CERA_RETURN_IF_ERROR(read(n_kv, "the metadata count"));
  // Minimum sizes: a kv is an 8-byte key length + 4-byte type + >= 1 byte value; a tensor info
  // is at least 8 (name length) + 4 (dims) + 4 (type) + 8 (offset).
  if (n_kv > remaining() / 13) {
    return corrupt("metadata count " + std::to_string(n_kv) + " cannot fit in the " +
                   std::to_string(remaining()) + " bytes left");
  }
  CERA_RETURN_IF_ERROR(read_kvs(file, n_kv));
  if (n_tensors > remaining() / 24) {
    return corrupt("tensor count " + std::to_string(n_tensors) + " cannot fit in the " +
                   std::to_string(remaining()) + " bytes left");
  }
  if (const GgufValue* align = file.find("general.alignment")) {
    const uint32_t* a = std::get_if<uint32_t>(&align->v);
    if (a == nullptr) {
      return corrupt("key 'general.alignment': expected uint32, found " +
                     std::string(gguf_type_name(align->type())));
    }
    if (*a == 0 || !std::has_single_bit(*a)) {
      return corrupt("key 'general.alignment': " + std::to_string(*a) + " is not a power of two");
    }
    file.alignment_ = *a;
  }
  CERA_RETURN_IF_ERROR(read_tensor_infos(file, n_tensors));
  // The data section starts at the next multiple of the alignment (it may be empty at EOF).
  const uint64_t aligned = (pos_ + file.alignment_ - 1) / file.alignment_ * file.alignment_;
  if (aligned > bytes_.size()) {
    if (!file.tensors_.empty()) {
      return corrupt("file ends at byte " + std::to_string(bytes_.size()) +
                     " before the tensor data section at byte " + std::to_string(aligned));
    }
    file.data_offset_ = bytes_.size();
  } else {
    file.data_offset_ = aligned;
  }
  return validate_tensors(file);
}

Result<GgufFile> GgufFile::parse(std::span<const std::byte> bytes) {
  GgufFile file;
  file.bytes_ = bytes;
  GgufParser parser(bytes);
  CERA_RETURN_IF_ERROR(parser.parse(file));
  return file;
}

Result<GgufFile> GgufFile::open(const std::filesystem::path& path) {
  auto map = MappedFile::open(path);
  if (!map.ok()) return map.status();
  auto shared = std::make_shared<MappedFile>(std::move(map).value());
  auto file = parse(shared->bytes());
  if (!file.ok()) return file.status().with_context(path.string());
  file->map_ = std::move(shared);
  return file;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second].value;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const std::byte> GgufFile::tensor_data(const GgufTensorInfo& info) const {
  return bytes_.subspan(data_offset_ + info.offset, info.n_bytes);
}

uint64_t GgufTensorInfo::n_elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

template <class T>
Result<T> GgufFile::get(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return not_found("metadata key '" + std::string(key) + "' is missing");
  return gguf_value_as<T>(*v, "key '" + std::string(key) + "'");
}

template <class T>
Result<std::vector<T>> GgufFile::get_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return not_found("metadata key '" + std::string(key) + "' is missing");
  const GgufArray* a = v->array();
  if (a == nullptr) {
    return invalid_argument("key '" + std::string(key) + "': expected an array, found " +
                            std::string(gguf_type_name(v->type())));
  }
  std::vector<T> out;
  out.reserve(a->size());
  const std::string what = "key '" + std::string(key) + "' element";
  for (uint64_t i = 0; i < a->size(); ++i) {
    auto x = gguf_value_as<T>(a->at(i), what);
    if (!x.ok()) return x.status();
    out.push_back(std::move(x).value());
  }
  return out;
}

#define CERA_GGUF_INSTANTIATE(T)                                            \
  template Result<T> GgufFile::get<T>(std::string_view) const;              \
  template Result<std::vector<T>> GgufFile::get_array<T>(std::string_view) const;
CERA_GGUF_ACCESSOR_TYPES(CERA_GGUF_INSTANTIATE)
#undef CERA_GGUF_INSTANTIATE

}  // namespace cera::format
