// Serialisation mirrors gguf_reader.cpp field by field; the round-trip test holds them together.
#include "format/gguf_writer.h"

#include <cstdio>
#include <span>

#include "core/check.h"
#include "core/output_file.h"

namespace cera::format {
namespace {

class ByteSink {
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
  void put_value(const GgufValue& value) {
    std::visit(
        [this](const auto& x) {
          using X = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<X, std::string>) {
            put_string(x);
          } else if constexpr (std::is_same_v<X, GgufArray>) {
            put<uint32_t>(static_cast<uint32_t>(x.element_type));
            put<uint64_t>(x.size());
            if (gguf_scalar_size(x.element_type) != 0) {
              const auto* p = reinterpret_cast<const std::byte*>(x.packed.data());
              out.insert(out.end(), p, p + x.packed.size());
            } else {
              for (const GgufValue& item : x.values) put_value(item);
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

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment_ != 32) set_u32("general.alignment", alignment_);
}

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (GgufKv& kv : kvs_) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  kvs_.push_back({key, std::move(value)});
}

std::optional<uint64_t> tensor_bytes(DType dtype, const std::vector<uint64_t>& shape) {
  if (shape.empty()) return std::nullopt;
  const auto row = dtype_row_bytes(dtype, shape[0]);
  if (!row) return std::nullopt;
  uint64_t rows = 1;
  for (size_t i = 1; i < shape.size(); ++i) rows *= shape[i];
  return *row * rows;
}

bool GgufWriter::has(const std::string& key) const {
  for (const GgufKv& kv : kvs_) {
    if (kv.key == key) return true;
  }
  return false;
}

Status GgufWriter::add(Tensor tensor) {
  const GgufTensorSpec& spec = tensor.spec;
  for (const Tensor& t : tensors_) {
    if (t.spec.name == spec.name) return invalid_argument("duplicate tensor '" + spec.name + "'");
  }
  if (spec.shape.empty() || spec.shape.size() > kGgufMaxDims) {
    return invalid_argument("tensor '" + spec.name + "': needs 1..4 dimensions");
  }
  const auto size = tensor_bytes(spec.dtype, spec.shape);
  if (!size) {
    return invalid_argument("tensor '" + spec.name + "': row of " + std::to_string(spec.shape[0]) +
                            " is not a multiple of the " + std::string(dtype_name(spec.dtype)) +
                            " block size");
  }
  const uint64_t bytes = *size;
  const uint64_t have = tensor.fill ? bytes : tensor.owned.empty() ? tensor.view.size() : tensor.owned.size();
  if (have != bytes) {
    return invalid_argument("tensor '" + spec.name + "': data is " + std::to_string(have) +
                            " bytes, expected " + std::to_string(bytes));
  }
  tensor.n_bytes = bytes;
  tensor.offset = align_up(data_size_, alignment_);
  // Like the gguf package, every tensor's data (the last one too) is padded to the alignment.
  data_size_ = align_up(tensor.offset + bytes, alignment_);
  tensors_.push_back(std::move(tensor));
  return {};
}

Status GgufWriter::add_tensor(GgufTensorSpec spec, std::vector<std::byte> data) {
  Tensor t{.spec = std::move(spec), .owned = std::move(data)};
  t.view = t.owned;
  return add(std::move(t));
}

Status GgufWriter::add_tensor_view(GgufTensorSpec spec, std::span<const std::byte> data) {
  return add(Tensor{.spec = std::move(spec), .view = data});
}

Status GgufWriter::add_tensor_fill(GgufTensorSpec spec, TensorFill fill) {
  if (!fill) return invalid_argument("tensor '" + spec.name + "': no fill function");
  return add(Tensor{.spec = std::move(spec), .fill = std::move(fill)});
}

Result<std::span<const std::byte>> GgufWriter::data_of(const Tensor& t, std::vector<std::byte>& scratch) const {
  if (!t.fill) return t.view;
  scratch.assign(t.n_bytes, std::byte{0});
  const Status st = t.fill(scratch);
  if (!st.ok()) return st.with_context("tensor '" + t.spec.name + "'");
  return std::span<const std::byte>(scratch);
}

std::vector<std::byte> GgufWriter::header_bytes() const {
  ByteSink sink;
  sink.put<uint32_t>(0x46554747);  // "GGUF"
  sink.put<uint32_t>(3);
  sink.put<uint64_t>(tensors_.size());
  sink.put<uint64_t>(kvs_.size());
  for (const GgufKv& kv : kvs_) {
    sink.put_string(kv.key);
    sink.put<uint32_t>(static_cast<uint32_t>(kv.value.type()));
    sink.put_value(kv.value);
  }
  for (const Tensor& t : tensors_) {
    sink.put_string(t.spec.name);
    sink.put<uint32_t>(static_cast<uint32_t>(t.spec.shape.size()));
    for (uint64_t d : t.spec.shape) sink.put<uint64_t>(d);
    sink.put<uint32_t>(static_cast<uint32_t>(t.spec.dtype));
    sink.put<uint64_t>(t.offset);
  }
  sink.out.resize(align_up(sink.out.size(), alignment_));
  return std::move(sink.out);
}

std::vector<std::byte> GgufWriter::to_bytes() const {
  std::vector<std::byte> out = header_bytes();
  const uint64_t base = out.size();
  out.resize(base + data_size_);
  std::vector<std::byte> scratch;
  for (const Tensor& t : tensors_) {
    auto data = data_of(t, scratch);
    CERA_CHECK_MSG(data.ok(), data.status().to_string());  // to_bytes is for tests and small files
    std::copy(data->begin(), data->end(), out.begin() + static_cast<ptrdiff_t>(base + t.offset));
  }
  return out;
}

Status GgufWriter::write(const std::filesystem::path& path, const WriteProgress& progress,
                         std::span<const std::filesystem::path> inputs) const {
  // OutputFile refuses devices and the inputs, and removes its temporary file on every return
  // below that is not the commit.
  CERA_ASSIGN_OR_RETURN(OutputFile out, OutputFile::create(path, inputs));
  CERA_RETURN_IF_ERROR(out.write(std::span<const std::byte>(header_bytes())));
  uint64_t pos = 0;
  const std::vector<std::byte> zeros(alignment_, std::byte{0});
  auto pad = [&](uint64_t n) { return out.write(std::span(zeros).first(n)); };
  std::vector<std::byte> scratch;  // one filled tensor at a time
  for (const Tensor& t : tensors_) {
    CERA_ASSIGN_OR_RETURN(std::span<const std::byte> data, data_of(t, scratch));
    CERA_RETURN_IF_ERROR(pad(t.offset - pos));
    // Large tensors go out in chunks so progress moves and the OS can flush as we go.
    constexpr uint64_t kChunk = 64ull << 20;
    for (uint64_t done = 0; done < data.size(); done += kChunk) {
      const uint64_t n = std::min<uint64_t>(kChunk, data.size() - done);
      CERA_RETURN_IF_ERROR(out.write(data.subspan(done, n)));
      if (progress) progress(t.offset + done + n, data_size_);
    }
    pos = t.offset + data.size();
  }
  CERA_RETURN_IF_ERROR(pad(data_size_ - pos));
  return out.commit();
}

}  // namespace cera::format
