// Row-interleaved ("R16") layout of the 32-element block formats Q4_0, Q4_1 and Q8_0, made once
// at import_weight for the levels whose KernelTable has repacked kernels (AVX-512 VNNI). The
// decision: 16 rows share one 512-bit vector, int32 lane j = row j, so one vpdpbusd multiplies
// 4 codes of 16 rows by 4 activation bytes broadcast; scales of 16 rows convert in one
// instruction and no horizontal sum is left at the end (the GGUF layout needed one per row and
// a scalar fp16 conversion per block and row).
//
// Layout: row groups of kR16Rows (the last one zero-padded), group-major; inside a group one
// "tile" per 32-element block, kR16TileBytes(type) bytes:
//   d[16]    fp16 scales, row order
//   m[16]    fp16 minimums (Q4_1 only)
//   codes    Q4_0/Q4_1: 4 x 64 bytes, vector k lane j = row j's qs[4k..4k+3] (low nibbles:
//            elements 4k..4k+3, high nibbles: elements 16+4k..16+4k+3);
//            Q8_0: 8 x 64 bytes, vector k lane j = row j's codes 4k..4k+3 plus 128 (unsigned).
// Code vector i (after splitting nibbles: low k = i, high k = i - 4) pairs with activation bytes
// 4i..4i+3 of the block in both cases.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace cera::ops::cpu {

constexpr int64_t kR16Rows = 16;

// Bytes of one 16-row tile of one block; 0 for a type without an R16 layout.
int64_t r16_tile_bytes(DType type);
inline int64_t r16_groups(int64_t n_out) { return (n_out + kR16Rows - 1) / kR16Rows; }
inline int64_t r16_size(DType type, int64_t n_in, int64_t n_out) {
  return r16_groups(n_out) * (n_in / 32) * r16_tile_bytes(type);
}

// Writes groups [group_begin, group_end) of the R16 form of `n_out` rows of GGUF blocks
// (`src`, rows `src_stride` bytes apart) into dst (r16_size bytes in all).
void r16_repack(DType type, const std::byte* src, int64_t src_stride, int64_t n_in, int64_t n_out,
                std::byte* dst, int64_t group_begin, int64_t group_end);

// Row `row` of an R16 weight as floats (embed of a tied, repacked embedding table).
void r16_dequantize_row(DType type, const std::byte* r16, int64_t n_in, int64_t row, float* out);

}  // namespace cera::ops::cpu
