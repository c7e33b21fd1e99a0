// The GPU layout of imported weights. Blocks whose size is not a multiple of 16 bytes (Q4_0 18,
// Q4_1 20, Q5_0 22, Q5_1 24, Q8_0 34, Q6_K 210) are split at import into regions of equal-sized
// fields (all codes, then all scales), so that every lane of a GEMV reads its codes with aligned
// 16-byte loads; Q4_K (144) and Q5_K (176) and the plain types keep the file layout. The
// TensorView of such a weight keeps its dtype and shape and points at region 0; a view of part of
// it (slice_rows) is not a valid weight, which matmul checks (weights must be packed).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace cera::ops::cuda {

struct WeightLayout {
  uint64_t region_offset[3] = {0, 0, 0};  // bytes from the start of the buffer
  uint64_t total_bytes = 0;
  bool repacked = false;  // false: the file's bytes unchanged
};

bool is_supported_weight(DType dtype);
// Layout of n_rows rows of n_in elements (n_in a multiple of the block size).
WeightLayout weight_layout(DType dtype, int64_t n_in, int64_t n_rows);

// What kernels get: the region base pointers and the blocks per row.
struct QWeight {
  const uint8_t* r0 = nullptr;
  const uint8_t* r1 = nullptr;
  const uint8_t* r2 = nullptr;
  int64_t blocks_per_row = 0;  // quantized types
  int64_t row_stride = 0;      // bytes between rows, plain types
};

QWeight qweight_of(DType dtype, const void* data, int64_t n_in, int64_t n_rows, int64_t row_stride);

// Rewrites raw file blocks (device memory) into the layout at dst (device memory), on stream.
void repack_weight(DType dtype, const void* raw, void* dst, int64_t n_in, int64_t n_rows, void* stream);
// The same rewrite on the host (host memory on both sides), for tests that build the layout.
void repack_weight_host(DType dtype, const void* raw, void* dst, int64_t n_in, int64_t n_rows);

}  // namespace cera::ops::cuda
