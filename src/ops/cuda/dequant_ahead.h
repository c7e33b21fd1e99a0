// The f16 copies of quantized weights that prompt GEMMs read through cuBLAS (matmul.cu), made one
// GEMM ahead. A copy is memory-bound (the weight read, 4x its Q4_0 bytes written) and a prompt
// GEMM is compute-bound, so DequantAhead overlaps them: it learns which weight followed which in
// earlier forwards, and once the GEMM of weight W is enqueued it dequantizes the weight that
// followed W last time on a side stream into the other of two buffers. A wrong guess costs a
// wasted copy, never a wrong result: a buffer serves only the weight (data, type, shape) it was
// made from, and the backend reports every freed or rewritten range (forget), since a weight's
// address may come back with other contents. CERA_CUDA_DEQUANT_AHEAD=0 turns the copies ahead off (A/B runs).
// Measured on the H200 (docs/benchmarks/cuda.md, v5).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <unordered_map>

#include "core/tensor.h"

namespace cera::ops::cuda {

class DequantAhead {
 public:
  // Enqueues on `stream` the conversion of `weight` into `out` ([n_out, n_in] f16, packed).
  using Dequantize = void (*)(cudaStream_t stream, const TensorView& weight, __half* out);

  DequantAhead();
  ~DequantAhead();
  DequantAhead(const DequantAhead&) = delete;
  DequantAhead& operator=(const DequantAhead&) = delete;

  // The f16 copy of `weight`, valid for work enqueued on `stream` from now on (made now unless a
  // copy of it is held already).
  const __half* acquire(cudaStream_t stream, const TensorView& weight, Dequantize dequantize);
  // After the GEMM reading the acquired copy is enqueued on `stream`: its buffer is free once that
  // GEMM is done, and the copy of the weight expected next starts on the side stream.
  void release(cudaStream_t stream, Dequantize dequantize);
  // The device bytes [lo, hi) are freed or rewritten: copies and guesses of weights there go.
  void forget(const std::byte* lo, const std::byte* hi);

 private:
  struct Slot {
    TensorView weight;  // what buf holds (data null: nothing)
    __half* buf = nullptr;
    uint64_t bytes = 0;
    cudaEvent_t ready = nullptr;  // buf holds the copy
    cudaEvent_t free = nullptr;   // the last GEMM reading buf is done
  };
  static bool same(const TensorView& a, const TensorView& b);
  static uint64_t copy_bytes(const TensorView& w) { return uint64_t(w.n_elements()) * 2; }
  void fit(Slot& s, uint64_t bytes);  // grows buf (cudaFree/cudaMalloc synchronize the device)
  int holding(const TensorView& w) const;

  Slot slots_[2];
  int current_ = -1;  // the slot acquire() returned last
  std::unordered_map<const std::byte*, TensorView> next_;  // weight data -> the weight after it
  const std::byte* last_ = nullptr;
  cudaStream_t side_ = nullptr;
  bool ahead_ = true;
};

}  // namespace cera::ops::cuda
