// TensorView: a non-owning, typed window onto memory on some device. Shapes use GGUF order:
// ne[0] is the contiguous row dimension (elements per row), ne[1..3] index rows. Rows may be
// spaced by more than their size (row_stride), which lets a fused QKV output be viewed as Q, K
// and V without copies; higher dimensions are always packed multiples of rows.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "core/check.h"
#include "core/dtype.h"

namespace cera {

enum class Device : uint8_t { kCpu, kCuda };

struct TensorView {
  std::byte* data = nullptr;
  DType dtype = DType::kF32;
  Device device = Device::kCpu;
  std::array<int64_t, 4> ne = {0, 1, 1, 1};
  int64_t row_stride = 0;  // bytes between consecutive rows; 0 means packed (row_bytes())

  int64_t cols() const { return ne[0]; }
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  int64_t n_elements() const { return ne[0] * rows(); }
  int64_t row_bytes() const {
    const DTypeTraits& t = dtype_traits(dtype);
    return ne[0] / t.block_size * t.type_size;
  }
  int64_t stride() const { return row_stride != 0 ? row_stride : row_bytes(); }
  bool packed() const { return stride() == row_bytes(); }
  // Bytes from data to the end of the last row (0 without rows).
  int64_t extent_bytes() const { return rows() == 0 ? 0 : stride() * (rows() - 1) + row_bytes(); }
  std::byte* row(int64_t i) const { return data + i * stride(); }
  template <class T>
  T* row_as(int64_t i) const {
    return reinterpret_cast<T*>(row(i));
  }

  // Rows [first, first + count) of the flattened row space, as a 2-D view.
  TensorView slice_rows(int64_t first, int64_t count) const {
    CERA_CHECK(first >= 0 && count >= 0 && first + count <= rows());
    TensorView v = *this;
    v.data = row(first);
    v.ne = {ne[0], count, 1, 1};
    v.row_stride = stride();
    return v;
  }
  // Columns [first, first + count) of every row (plain types only): a strided view.
  TensorView slice_cols(int64_t first, int64_t count) const {
    CERA_CHECK(dtype_block_size(dtype) == 1 && first >= 0 && first + count <= ne[0]);
    TensorView v = *this;
    v.data = data + first * dtype_type_size(dtype);
    v.ne = {count, rows(), 1, 1};
    v.row_stride = stride();
    return v;
  }
  // The same bytes with another shape (packed views only; element count preserved).
  TensorView reshaped(std::array<int64_t, 4> shape) const {
    CERA_CHECK(packed() && shape[0] * shape[1] * shape[2] * shape[3] == n_elements());
    TensorView v = *this;
    v.ne = shape;
    v.row_stride = 0;
    return v;
  }
};

inline TensorView make_view(void* data, DType dtype, std::array<int64_t, 4> ne,
                            Device device = Device::kCpu) {
  return TensorView{static_cast<std::byte*>(data), dtype, device, ne, 0};
}

}  // namespace cera
