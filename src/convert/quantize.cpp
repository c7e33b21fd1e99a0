// Rows are independent, so threads split a tensor into contiguous row ranges, each with its own
// float scratch row; the reference quantizers in src/quant are pure and thread-safe.
#include "convert/quantize.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "quant/quant.h"

namespace cera::convert {

bool is_output_type(DType d) {
  switch (d) {
    case DType::kF32: case DType::kF16: case DType::kBF16: case DType::kQ8_0: case DType::kQ4_0:
    case DType::kQ4_1: case DType::kQ5_0: case DType::kQ5_1: case DType::kQ4_K: case DType::kQ5_K:
    case DType::kQ6_K:
      return true;
    default:
      return false;
  }
}

void parallel_for(uint64_t n, int n_threads, const std::function<void(uint64_t, uint64_t)>& fn) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const uint64_t workers = std::min<uint64_t>(n_threads, n);
  if (workers <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  std::vector<std::thread> pool;
  const uint64_t per = (n + workers - 1) / workers;
  for (uint64_t w = 0; w < workers; ++w) {
    const uint64_t b = w * per, e = std::min(n, b + per);
    if (b >= e) break;
    pool.emplace_back([&fn, b, e] { fn(b, e); });
  }
  for (std::thread& t : pool) t.join();
}

Status quantize_tensor(const QuantizeJob& job, std::span<std::byte> out) {
  if (!is_output_type(job.dtype)) {
    return unsupported("cannot write tensors of type " + std::string(dtype_name(job.dtype)));
  }
  const auto row_bytes = dtype_row_bytes(job.dtype, job.n_cols);
  if (!row_bytes) {
    return invalid_argument("row of " + std::to_string(job.n_cols) + " is not whole " +
                            std::string(dtype_name(job.dtype)) + " blocks");
  }
  if (out.size() != *row_bytes * job.n_rows) {
    return Status(ErrorCode::kInternal, "output buffer is " + std::to_string(out.size()) + " bytes, expected " +
                                            std::to_string(*row_bytes * job.n_rows));
  }
  parallel_for(job.n_rows, job.n_threads, [&](uint64_t begin, uint64_t end) {
    std::vector<float> row(job.n_cols);
    for (uint64_t r = begin; r < end; ++r) {
      job.source(r, row.data());
      std::byte* dst = out.data() + r * *row_bytes;
      if (job.dtype == DType::kF32) {
        std::memcpy(dst, row.data(), job.n_cols * 4);
      } else {
        quant::quantize_row(job.dtype, row.data(), dst, static_cast<int64_t>(job.n_cols));
      }
    }
  });
  return {};
}

TypeChoice choose_tensor_type(DType requested, const std::string& name, const std::vector<uint64_t>& shape) {
  const bool is_norm = name.size() >= 12 && name.compare(name.size() - 12, 12, "_norm.weight") == 0;
  const bool is_weight = name.size() >= 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
  // llama.cpp keeps MoE routers, lfm2's convolution kernels and bert's position and token type
  // embeddings in F32 whatever the file type.
  auto ends_with = [&](const char* suffix) {
    const size_t n = std::char_traits<char>::length(suffix);
    return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
  };
  const bool always_f32 = ends_with("ffn_gate_inp.weight") || ends_with("shortconv.conv.weight") ||
                          name == "position_embd.weight" || name == "token_types.weight";
  if (shape.size() <= 1 || is_norm || !is_weight || always_f32) return {DType::kF32, std::nullopt};
  if (dtype_row_bytes(requested, shape[0])) return {requested, std::nullopt};
  const DType fallback = requested == DType::kF32 ? DType::kF32 : DType::kF16;
  return {fallback, "row of " + std::to_string(shape[0]) + " is not a multiple of the " +
                        std::string(dtype_name(requested)) + " block size (" +
                        std::to_string(dtype_block_size(requested)) + "); stored as " +
                        std::string(dtype_name(fallback))};
}

uint32_t llama_file_type(DType d) {
  switch (d) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kQ4_0: return 2;
    case DType::kQ4_1: return 3;
    case DType::kQ8_0: return 7;
    case DType::kQ5_0: return 8;
    case DType::kQ5_1: return 9;
    case DType::kQ4_K: return 14;  // Q4_K_S
    case DType::kQ5_K: return 16;  // Q5_K_S
    case DType::kQ6_K: return 18;
    case DType::kBF16: return 32;
    default: return 0;
  }
}

}  // namespace cera::convert
