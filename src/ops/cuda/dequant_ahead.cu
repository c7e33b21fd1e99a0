// DequantAhead (dequant_ahead.h): two f16 buffers, events ordering them between the main stream
// (GEMMs) and the side stream (copies ahead).
#include "ops/cuda/dequant_ahead.h"

#include <cstdlib>
#include <cstring>

#include "ops/cuda/cuda_context.h"

namespace cera::ops::cuda {

DequantAhead::DequantAhead() {
  const char* e = std::getenv("CERA_CUDA_DEQUANT_AHEAD");
  ahead_ = e == nullptr || std::strcmp(e, "0") != 0;
  CERA_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  for (Slot& s : slots_) {
    CERA_CUDA_CHECK(cudaEventCreateWithFlags(&s.ready, cudaEventDisableTiming));
    CERA_CUDA_CHECK(cudaEventCreateWithFlags(&s.free, cudaEventDisableTiming));
  }
}

DequantAhead::~DequantAhead() {  // destructors must not throw: errors are ignored
  cudaStreamSynchronize(side_);
  for (Slot& s : slots_) {
    cudaFree(s.buf);
    cudaEventDestroy(s.ready);
    cudaEventDestroy(s.free);
  }
  cudaStreamDestroy(side_);
}

bool DequantAhead::same(const TensorView& a, const TensorView& b) {
  return a.data == b.data && a.dtype == b.dtype && a.ne == b.ne && a.row_stride == b.row_stride;
}

int DequantAhead::holding(const TensorView& w) const {
  for (int i = 0; i < 2; ++i) {
    if (slots_[i].weight.data != nullptr && same(slots_[i].weight, w)) return i;
  }
  return -1;
}

void DequantAhead::fit(Slot& s, uint64_t bytes) {
  if (bytes <= s.bytes) return;
  CERA_CUDA_CHECK(cudaFree(s.buf));  // waits for the device: no stream still uses it
  s.buf = nullptr;
  s.bytes = 0;
  CERA_CUDA_CHECK(cudaMalloc(&s.buf, bytes));
  s.bytes = bytes;
}

const __half* DequantAhead::acquire(cudaStream_t stream, const TensorView& weight, Dequantize dequantize) {
  if (last_ != nullptr && last_ != weight.data) next_[last_] = weight;
  last_ = weight.data;
  if (const int i = holding(weight); i >= 0) {
    CERA_CUDA_CHECK(cudaStreamWaitEvent(stream, slots_[i].ready, 0));
    current_ = i;
    return slots_[i].buf;
  }
  // Not held: made now, in the slot not holding the other guess (slot 0 if both are taken).
  const int i = slots_[0].weight.data == nullptr || slots_[1].weight.data != nullptr ? 0 : 1;
  Slot& s = slots_[i];
  // A copy ahead may still be writing this buffer.
  if (s.weight.data != nullptr) CERA_CUDA_CHECK(cudaStreamWaitEvent(stream, s.ready, 0));
  s.weight = {};
  fit(s, copy_bytes(weight));
  dequantize(stream, weight, s.buf);
  CERA_CUDA_CHECK(cudaEventRecord(s.ready, stream));
  s.weight = weight;
  current_ = i;
  return s.buf;
}

void DequantAhead::release(cudaStream_t stream, Dequantize dequantize) {
  CERA_CHECK(current_ >= 0);
  const Slot& used = slots_[current_];
  CERA_CUDA_CHECK(cudaEventRecord(used.free, stream));
  if (!ahead_) return;
  const auto it = next_.find(used.weight.data);
  if (it == next_.end() || holding(it->second) >= 0) return;
  Slot& t = slots_[1 - current_];
  // The buffer's last GEMM must be done before the side stream overwrites it (a never-recorded
  // event is complete).
  CERA_CUDA_CHECK(cudaStreamWaitEvent(side_, t.free, 0));
  t.weight = {};
  fit(t, copy_bytes(it->second));
  dequantize(side_, it->second, t.buf);
  CERA_CUDA_CHECK(cudaEventRecord(t.ready, side_));
  t.weight = it->second;
}

void DequantAhead::forget(const std::byte* lo, const std::byte* hi) {
  const auto inside = [&](const std::byte* p) { return p != nullptr && lo <= p && p < hi; };
  for (Slot& s : slots_) {
    if (inside(s.weight.data)) s.weight = {};  // a copy still reading it finishes before any cudaFree
  }
  std::erase_if(next_, [&](const auto& kv) { return inside(kv.first) || inside(kv.second.data); });
  if (inside(last_)) last_ = nullptr;
}

}  // namespace cera::ops::cuda
