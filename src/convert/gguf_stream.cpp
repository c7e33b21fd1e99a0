// Header serialisation here mirrors format/gguf_writer.cpp; tests read every file we write back
// through format::GgufFile, which validates it independently.
#include "convert/gguf_stream.h"

#include <fstream>

namespace cera::convert {
namespace {

constexpr uint64_t kAlign = 32;
uint64_t align_up(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

class Sink {
 public:
  template <class T>
  void put(T v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    out.insert(out.end(), p, p + s.size());
  }
  void put_value(const format::GgufValue& value) {
    std::visit(
        [this](const auto& x) {
          using X = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<X, std::string>) {
            put_string(x);
          } else if constexpr (std::is_same_v<X, format::GgufArray>) {
            put<uint32_t>(static_cast<uint32_t>(x.element_type));
            put<uint64_t>(x.size());
            if (format::gguf_scalar_size(x.element_type) != 0) {
              const auto* p = reinterpret_cast<const std::byte*>(x.packed.data());
              out.insert(out.end(), p, p + x.packed.size());
            } else {
              for (const format::GgufValue& item : x.values) put_value(item);
            }
          } else if constexpr (std::is_same_v<X, bool>) {
            put<uint8_t>(x ? 1 : 0);
          } else {
            put<X>(x);
          }
        },
        value.v);
  }
  std::vector<std::byte> out;
};

}  // namespace

std::optional<uint64_t> tensor_bytes(DType dtype, const std::vector<uint64_t>& shape) {
  if (shape.empty()) return std::nullopt;
  const auto row = dtype_row_bytes(dtype, shape[0]);
  if (!row) return std::nullopt;
  uint64_t rows = 1;
  for (size_t i = 1; i < shape.size(); ++i) rows *= shape[i];
  return *row * rows;
}

void GgufStreamWriter::set(const std::string& key, format::GgufValue value) {
  for (format::GgufKv& kv : kvs_) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  kvs_.push_back({key, std::move(value)});
}

bool GgufStreamWriter::has(const std::string& key) const {
  for (const format::GgufKv& kv : kvs_) {
    if (kv.key == key) return true;
  }
  return false;
}

Status GgufStreamWriter::add_tensor(format::GgufTensorSpec spec, TensorFill fill) {
  for (const auto& s : specs_) {
    if (s.name == spec.name) return invalid_argument("duplicate tensor '" + spec.name + "'");
  }
  if (spec.shape.empty() || spec.shape.size() > format::kGgufMaxDims) {
    return invalid_argument("tensor '" + spec.name + "': needs 1..4 dimensions");
  }
  const auto bytes = tensor_bytes(spec.dtype, spec.shape);
  if (!bytes) {
    return invalid_argument("tensor '" + spec.name + "': row of " + std::to_string(spec.shape[0]) +
                            " is not a multiple of the " + std::string(dtype_name(spec.dtype)) + " block size");
  }
  specs_.push_back(std::move(spec));
  sizes_.push_back(*bytes);
  fills_.push_back(std::move(fill));
  return {};
}

Status GgufStreamWriter::write(const std::filesystem::path& path, const format::WriteProgress& progress) const {
  Sink sink;
  sink.put<uint32_t>(0x46554747);  // "GGUF"
  sink.put<uint32_t>(3);
  sink.put<uint64_t>(specs_.size());
  sink.put<uint64_t>(kvs_.size());
  for (const format::GgufKv& kv : kvs_) {
    sink.put_string(kv.key);
    sink.put<uint32_t>(static_cast<uint32_t>(kv.value.type()));
    sink.put_value(kv.value);
  }
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (size_t i = 0; i < specs_.size(); ++i) {
    sink.put_string(specs_[i].name);
    sink.put<uint32_t>(static_cast<uint32_t>(specs_[i].shape.size()));
    for (uint64_t d : specs_[i].shape) sink.put<uint64_t>(d);
    sink.put<uint32_t>(static_cast<uint32_t>(specs_[i].dtype));
    sink.put<uint64_t>(offset);
    offsets.push_back(offset);
    offset = align_up(offset + sizes_[i]);
  }
  const uint64_t total = offset;
  sink.out.resize(align_up(sink.out.size()));

  const std::filesystem::path tmp = path.string() + ".partial";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) return io_error("cannot create '" + tmp.string() + "'");
  auto fail = [&](Status st) {
    out.close();
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    return st;
  };
  out.write(reinterpret_cast<const char*>(sink.out.data()), static_cast<std::streamsize>(sink.out.size()));
  const char zeros[kAlign] = {};
  std::vector<std::byte> buffer;
  for (size_t i = 0; i < specs_.size(); ++i) {
    buffer.assign(sizes_[i], std::byte{0});
    const Status st = fills_[i](buffer);
    if (!st.ok()) return fail(st.with_context("tensor '" + specs_[i].name + "'"));
    out.write(reinterpret_cast<const char*>(buffer.data()), static_cast<std::streamsize>(buffer.size()));
    out.write(zeros, static_cast<std::streamsize>(align_up(sizes_[i]) - sizes_[i]));
    if (!out) return fail(io_error("writing '" + tmp.string() + "' failed (disk full?)"));
    if (progress) progress(offsets[i] + sizes_[i], total);
  }
  out.flush();
  if (!out) return fail(io_error("writing '" + tmp.string() + "' failed (disk full?)"));
  out.close();
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return io_error("cannot rename '" + tmp.string() + "' to '" + path.string() + "': " + ec.message());
  return {};
}

}  // namespace cera::convert
