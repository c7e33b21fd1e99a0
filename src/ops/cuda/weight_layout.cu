// Import-time repacking of the block formats into field regions (weight_layout.h). One thread
// per block, byte copies: this runs once per weight at load, at PCIe-upload speed anyway.
#include <cstring>

#include "ops/cuda/cuda_context.h"
#include "ops/cuda/weight_layout.h"

namespace cera::ops::cuda {
namespace {

// Field split of one block: region k receives field_bytes[k] bytes starting at field_offset[k].
struct Split {
  int block_bytes = 0;
  int n_fields = 0;
  int field_offset[3] = {0, 0, 0};
  int field_bytes[3] = {0, 0, 0};
};

Split split_of(DType t) {
  switch (t) {
    // Regions: codes first (16-byte aligned per block), then the small fields.
    case DType::kQ4_0: return {18, 2, {2, 0, 0}, {16, 2, 0}};
    case DType::kQ4_1: return {20, 2, {4, 0, 0}, {16, 4, 0}};
    case DType::kQ5_0: return {22, 3, {6, 2, 0}, {16, 4, 2}};
    case DType::kQ5_1: return {24, 3, {8, 4, 0}, {16, 4, 4}};
    case DType::kQ8_0: return {34, 2, {2, 0, 0}, {32, 2, 0}};
    case DType::kQ6_K: return {210, 2, {0, 208, 0}, {208, 2, 0}};  // ql, qh, scales | d
    default: return {};
  }
}

uint64_t align256(uint64_t x) { return (x + 255) & ~uint64_t{255}; }

struct RepackParams {
  const uint8_t* raw;
  uint8_t* dst;
  int64_t n_blocks;
  Split split;
  uint64_t region_offset[3];
};

__global__ void repack_kernel(const __grid_constant__ RepackParams p) {
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= p.n_blocks) return;
  const uint8_t* src = p.raw + b * p.split.block_bytes;
  for (int f = 0; f < p.split.n_fields; ++f) {
    const int n = p.split.field_bytes[f];
    uint8_t* dst = p.dst + p.region_offset[f] + b * n;
    for (int i = 0; i < n; ++i) dst[i] = src[p.split.field_offset[f] + i];
  }
}

}  // namespace

bool is_supported_weight(DType t) {
  switch (t) {
    case DType::kF32: case DType::kF16: case DType::kBF16: case DType::kQ4_0: case DType::kQ4_1:
    case DType::kQ5_0: case DType::kQ5_1: case DType::kQ8_0: case DType::kQ4_K: case DType::kQ5_K:
    case DType::kQ6_K: return true;
    default: return false;
  }
}

WeightLayout weight_layout(DType t, int64_t n_in, int64_t n_rows) {
  WeightLayout l;
  const uint64_t n_blocks = uint64_t(n_in / dtype_block_size(t)) * uint64_t(n_rows);
  const Split s = split_of(t);
  if (s.n_fields == 0) {
    l.total_bytes = n_blocks * dtype_type_size(t);
    return l;
  }
  l.repacked = true;
  uint64_t off = 0;
  for (int f = 0; f < s.n_fields; ++f) {
    l.region_offset[f] = off;
    off += align256(n_blocks * uint64_t(s.field_bytes[f]));
  }
  l.total_bytes = off;
  return l;
}

QWeight qweight_of(DType t, const void* data, int64_t n_in, int64_t n_rows, int64_t row_stride) {
  const WeightLayout l = weight_layout(t, n_in, n_rows);
  const auto* base = static_cast<const uint8_t*>(data);
  QWeight q;
  q.r0 = base + l.region_offset[0];
  q.r1 = base + l.region_offset[1];
  q.r2 = base + l.region_offset[2];
  q.blocks_per_row = n_in / dtype_block_size(t);
  q.row_stride = row_stride;
  return q;
}

void repack_weight(DType t, const void* raw, void* dst, int64_t n_in, int64_t n_rows, void* stream) {
  const WeightLayout l = weight_layout(t, n_in, n_rows);
  CERA_CHECK(l.repacked);
  RepackParams p{};
  p.raw = static_cast<const uint8_t*>(raw);
  p.dst = static_cast<uint8_t*>(dst);
  p.n_blocks = (n_in / dtype_block_size(t)) * n_rows;
  p.split = split_of(t);
  for (int f = 0; f < 3; ++f) p.region_offset[f] = l.region_offset[f];
  if (p.n_blocks == 0) return;
  repack_kernel<<<ceil_div(p.n_blocks, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(p);
  CERA_CUDA_LAUNCHED();
}

void repack_weight_host(DType t, const void* raw, void* dst, int64_t n_in, int64_t n_rows) {
  const WeightLayout l = weight_layout(t, n_in, n_rows);
  CERA_CHECK(l.repacked);
  const Split s = split_of(t);
  const auto* src = static_cast<const uint8_t*>(raw);
  auto* out = static_cast<uint8_t*>(dst);
  const int64_t n_blocks = (n_in / dtype_block_size(t)) * n_rows;
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (int f = 0; f < s.n_fields; ++f) {
      std::memcpy(out + l.region_offset[f] + b * s.field_bytes[f], src + b * s.block_bytes + s.field_offset[f],
                  size_t(s.field_bytes[f]));
    }
  }
}

}  // namespace cera::ops::cuda
