// safetensors layout: u64 little-endian header length N, N bytes of JSON, then the data section
// that every "data_offsets" pair indexes (relative to the end of the header).
#include "convert/safetensors.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "format/json.h"
#include "core/half.h"

namespace cera::convert {

using format::JsonValue;
using format::parse_json;
using format::read_json_file;

uint32_t st_dtype_size(StDType t) {
  switch (t) {
    case StDType::kF32: return 4;
    case StDType::kF16:
    case StDType::kBF16: return 2;
    case StDType::kI64: return 8;
  }
  return 0;
}
const char* st_dtype_name(StDType t) {
  switch (t) {
    case StDType::kF32: return "F32";
    case StDType::kF16: return "F16";
    case StDType::kBF16: return "BF16";
    case StDType::kI64: return "I64";
  }
  return "?";
}

uint64_t StTensor::n_elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

void StTensor::read_f32(uint64_t first, uint64_t n, float* out) const {
  const std::byte* p = data.data() + first * st_dtype_size(dtype);
  switch (dtype) {
    case StDType::kF32:
      std::memcpy(out, p, n * 4);
      break;
    case StDType::kF16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = half_to_float(h);
      }
      break;
    case StDType::kBF16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = bf16_to_float(h);
      }
      break;
    case StDType::kI64:
      for (uint64_t i = 0; i < n; ++i) {
        int64_t v;
        std::memcpy(&v, p + 8 * i, 8);
        out[i] = static_cast<float>(v);
      }
      break;
  }
}

namespace {

// Sizes beyond this are refused before any multiplication can overflow.
constexpr uint64_t kMaxDim = uint64_t{1} << 40;
constexpr uint64_t kMaxHeader = uint64_t{100} << 20;  // the format's own 100 MB cap

Result<StTensor> read_entry(const std::string& name, const JsonValue& entry, uint64_t data_size,
                            const std::string& where) {
  const std::string ctx = where + ": tensor '" + name + "'";
  if (!entry.is_object()) return corrupt(ctx + ": header entry is not an object");
  StTensor t;
  t.name = name;
  t.file = where;
  const JsonValue* dtype = entry.find("dtype");
  if (!dtype || !dtype->as_string()) return corrupt(ctx + ": missing string 'dtype'");
  const std::string& d = *dtype->as_string();
  if (d == "F32") t.dtype = StDType::kF32;
  else if (d == "F16") t.dtype = StDType::kF16;
  else if (d == "BF16") t.dtype = StDType::kBF16;
  else if (d == "I64") t.dtype = StDType::kI64;
  else return unsupported(ctx + ": dtype '" + d + "' (supported: F32, F16, BF16, I64)");
  const JsonValue* shape = entry.find("shape");
  if (!shape || !shape->is_array()) return corrupt(ctx + ": missing array 'shape'");
  uint64_t n = 1;
  for (const JsonValue& dim : *shape->as_array()) {
    const auto v = dim.as_int();
    if (!v || *v < 0 || static_cast<uint64_t>(*v) > kMaxDim) {
      return corrupt(ctx + ": shape entries must be integers in 0..2^40");
    }
    t.shape.push_back(static_cast<uint64_t>(*v));
    n *= static_cast<uint64_t>(*v);
    if (n > kMaxDim) return corrupt(ctx + ": more than 2^40 elements");
  }
  const JsonValue* offs = entry.find("data_offsets");
  if (!offs || !offs->is_array() || offs->size() != 2) return corrupt(ctx + ": 'data_offsets' must be [begin, end]");
  const auto b = (*offs->as_array())[0].as_int(), e = (*offs->as_array())[1].as_int();
  if (!b || !e || *b < 0 || *e < *b) return corrupt(ctx + ": 'data_offsets' must be integers with 0 <= begin <= end");
  const uint64_t begin = static_cast<uint64_t>(*b), end = static_cast<uint64_t>(*e);
  if (end > data_size) {
    return corrupt(ctx + ": data_offsets end " + std::to_string(end) + " is past the data section (" +
                   std::to_string(data_size) + " bytes)");
  }
  if (end - begin != n * st_dtype_size(t.dtype)) {
    return corrupt(ctx + ": data is " + std::to_string(end - begin) + " bytes but shape and dtype need " +
                   std::to_string(n * st_dtype_size(t.dtype)));
  }
  t.data = {reinterpret_cast<const std::byte*>(begin), static_cast<size_t>(end - begin)};  // rebased by caller
  return t;
}

}  // namespace

Result<SafetensorsFile> SafetensorsFile::parse(std::span<const std::byte> bytes, const std::string& where) {
  if (bytes.size() < 8) return corrupt(where + ": shorter than the 8-byte header length");
  uint64_t header_len;
  std::memcpy(&header_len, bytes.data(), 8);
  if (header_len > kMaxHeader || header_len > bytes.size() - 8) {
    return corrupt(where + ": header length " + std::to_string(header_len) + " exceeds the file (" +
                   std::to_string(bytes.size()) + " bytes) or the 100 MB limit");
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), header_len);
  auto header = parse_json(text);
  if (!header.ok()) return header.status().with_context(where + ": header");
  if (!header->is_object()) return corrupt(where + ": header is not a JSON object");
  const std::byte* data = bytes.data() + 8 + header_len;
  const uint64_t data_size = bytes.size() - 8 - header_len;
  SafetensorsFile f;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, entry] : *header->as_object()) {
    if (name == "__metadata__") continue;
    CERA_ASSIGN_OR_RETURN(StTensor t, read_entry(name, entry, data_size, where));
    const auto begin = reinterpret_cast<uintptr_t>(t.data.data());
    ranges.emplace_back(begin, begin + t.data.size());
    t.data = {data + begin, t.data.size()};
    f.tensors_.push_back(std::move(t));
  }
  // Overlapping tensors mean a corrupt or hostile file (the format forbids them).
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) return corrupt(where + ": tensor data ranges overlap");
  }
  std::set<std::string> names;
  for (const StTensor& t : f.tensors_) {
    if (!names.insert(t.name).second) return corrupt(where + ": duplicate tensor '" + t.name + "'");
  }
  return f;
}

Result<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  auto map = MappedFile::open(path);
  if (!map.ok()) return map.status();
  auto shared = std::make_shared<MappedFile>(std::move(*map));
  CERA_ASSIGN_OR_RETURN(SafetensorsFile f, parse(shared->bytes(), path.string()));
  f.map_ = std::move(shared);
  return f;
}

const StTensor* SafetensorsCheckpoint::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Result<SafetensorsCheckpoint> SafetensorsCheckpoint::open_dir(const std::filesystem::path& dir) {
  SafetensorsCheckpoint c;
  const auto index_path = dir / "model.safetensors.index.json";
  std::vector<std::string> shards;
  std::map<std::string, std::string> weight_map;
  if (std::filesystem::exists(index_path)) {
    CERA_ASSIGN_OR_RETURN(JsonValue index, read_json_file(index_path.string()));
    const JsonValue* wm = index.find("weight_map");
    if (!wm || !wm->is_object()) return corrupt(index_path.string() + ": missing object 'weight_map'");
    std::set<std::string> files;
    for (const auto& [tensor, file] : *wm->as_object()) {
      if (!file.as_string()) return corrupt(index_path.string() + ": weight_map['" + tensor + "'] is not a string");
      const std::string& f = *file.as_string();
      if (f.find('/') != std::string::npos) return corrupt(index_path.string() + ": shard name '" + f + "' has a '/'");
      weight_map[tensor] = f;
      files.insert(f);
    }
    shards.assign(files.begin(), files.end());
  } else if (std::filesystem::exists(dir / "model.safetensors")) {
    shards.push_back("model.safetensors");
  } else {
    return not_found(dir.string() + ": no model.safetensors or model.safetensors.index.json");
  }
  for (const std::string& shard : shards) {
    CERA_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(dir / shard));
    c.files_.push_back(std::make_unique<SafetensorsFile>(std::move(f)));
    for (const StTensor& t : c.files_.back()->tensors()) {
      if (!weight_map.empty()) {
        auto it = weight_map.find(t.name);
        if (it == weight_map.end() || it->second != shard) {
          return corrupt(t.file + ": tensor '" + t.name + "' is not listed for this shard in " + index_path.string());
        }
      }
      if (!c.by_name_.emplace(t.name, &t).second) {
        return corrupt(t.file + ": tensor '" + t.name + "' appears in more than one shard");
      }
    }
  }
  for (const auto& [tensor, file] : weight_map) {
    if (!c.by_name_.count(tensor)) {
      return not_found(index_path.string() + ": tensor '" + tensor + "' is missing from shard '" + file + "'");
    }
  }
  return c;
}

}  // namespace cera::convert
