// Turning float rows into a GGUF tensor of any type src/quant can write, spread over threads,
// and the per-tensor type rule shared by `convert` and `synth` (llama.cpp's convert_hf_to_gguf:
// 1-D tensors and norms stay F32; a row that is not whole blocks falls back to F16).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace cera::convert {

// Writes row `row` (n_cols floats) into `out`. Called concurrently from several threads with
// distinct rows; must be thread-safe.
using RowSource = std::function<void(uint64_t row, float* out)>;

struct QuantizeJob {
  DType dtype = DType::kF32;
  uint64_t n_cols = 0;  // GGUF shape[0]
  uint64_t n_rows = 0;  // product of the other dimensions
  RowSource source;
  int n_threads = 0;    // 0: std::thread::hardware_concurrency()
};

// True for the types `convert --type` and `synth --type` accept as targets.
bool is_output_type(DType dtype);
// Precondition: is_output_type(job.dtype); out is exactly n_rows rows of the type.
Status quantize_tensor(const QuantizeJob& job, std::span<std::byte> out);

// Runs fn(begin, end) over [0, n) split into contiguous ranges, one per thread.
void parallel_for(uint64_t n, int n_threads, const std::function<void(uint64_t, uint64_t)>& fn);

struct TypeChoice {
  DType dtype = DType::kF32;
  std::optional<std::string> fallback;  // why the requested type was not used, for the user
};
// The type a tensor is stored in when `requested` is asked for. `name` is the GGUF name.
TypeChoice choose_tensor_type(DType requested, const std::string& name, const std::vector<uint64_t>& shape);

// general.file_type (llama.cpp's LlamaFileType) for a file made mostly of `dtype`; pure K-quant
// files use the "_S" variants, as llama-quantize --pure reports them.
uint32_t llama_file_type(DType dtype);

}  // namespace cera::convert
