// CudaContext: stream and cuBLAS handle, grow-only scratch, and the host-array upload cache.
// Small uploads go host -> pinned ring -> device asynchronously; the ring is reused only after
// the stream has drained (a synchronize when it wraps, every few thousand forwards).
#include <algorithm>
#include <cstring>

#include "ops/cuda/cuda_context.h"
#include "ops/cuda/bind_device.h"

#include "ops/cuda/dequant_ahead.h"

namespace cera::ops::cuda {

namespace {
constexpr uint64_t kStagingBytes = 4ull << 20;
thread_local int t_bound_device = -1;  // the device bind_device last made current on this thread
}  // namespace

void bind_device(int device) {
  if (t_bound_device != device) rebind_device(device);
}

void rebind_device(int device) {
  CERA_CUDA_CHECK(cudaSetDevice(device));
  t_bound_device = device;
}

CudaContext::CudaContext(int device) : device_(device) {
  bind_device(device);
  cudaDeviceProp prop{};
  CERA_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  sm_count_ = prop.multiProcessorCount;
  device_name_ = prop.name;
  CERA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CERA_CUBLAS_CHECK(cublasCreate(&cublas_));
  CERA_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  // A workspace of the context's own (set after the stream: cublasSetStream resets it), so that
  // cuBLAS calls captured into graphs (graph.cu: prompt-path batches of at most 256 rows) never
  // allocate. 32 MiB is what NVIDIA's cuBLAS documentation recommends for Hopper.
  constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;
  CERA_CUDA_CHECK(cudaMalloc(&cublas_workspace_, kCublasWorkspaceBytes));
  CERA_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspaceBytes));
  CERA_CUDA_CHECK(cudaMallocHost(&staging_, kStagingBytes));
  staging_bytes_ = kStagingBytes;
}

CudaContext::~CudaContext() {
  // Destructors must not throw: errors here are ignored (the process is tearing the device down).
  cudaStreamSynchronize(stream_);
  dequant_ahead_.reset();
  for (void* p : scratch_) cudaFree(p);
  for (CachedArray& a : arrays_) cudaFree(a.device);
  cudaFreeHost(staging_);
  cublasDestroy(cublas_);
  cudaFree(cublas_workspace_);
  cudaStreamDestroy(stream_);
}

void* CudaContext::scratch(ScratchKind kind, uint64_t bytes) {
  const auto k = static_cast<size_t>(kind);
  if (bytes > scratch_bytes_[k]) {
    CERA_CHECK_MSG(mode_ != OpMode::kCapture, "cuda: scratch must not grow during graph capture");
    ++scratch_epoch_;
    if (k == size_t(ScratchKind::kActQ8) || k == size_t(ScratchKind::kGemmX)) act_cache_ = {};
    CERA_CUDA_CHECK(cudaFree(scratch_[k]));
    scratch_[k] = nullptr;
    const uint64_t grown = std::max<uint64_t>(bytes, scratch_bytes_[k] + scratch_bytes_[k] / 4);
    CERA_CUDA_CHECK(cudaMalloc(&scratch_[k], grown));
    scratch_bytes_[k] = grown;
  }
  return scratch_[k];
}

DequantAhead& CudaContext::dequant_ahead() {
  if (!dequant_ahead_) dequant_ahead_ = std::make_unique<DequantAhead>();
  return *dequant_ahead_;
}

void CudaContext::memory_changed(const void* data, uint64_t bytes) {
  const auto* lo = static_cast<const std::byte*>(data);
  if (dequant_ahead_) dequant_ahead_->forget(lo, lo + bytes);
}

void* CudaContext::zeroed_scratch(ScratchKind kind, uint64_t bytes) {
  const uint64_t before = scratch_epoch_;
  void* p = scratch(kind, bytes);
  // Ordered before any later kernel on the stream (a graph launched after this call included).
  if (scratch_epoch_ != before) CERA_CUDA_CHECK(cudaMemsetAsync(p, 0, scratch_bytes_[size_t(kind)], stream_));
  return p;
}

const void* CudaContext::device_bytes(const void* host, uint64_t bytes) {
  if (bytes == 0) return nullptr;
  ++use_clock_;
  CachedArray* victim = &arrays_[0];
  for (CachedArray& a : arrays_) {
    if (a.host.size() == bytes && std::memcmp(a.host.data(), host, bytes) == 0) {
      a.last_use = use_clock_;
      return a.device;
    }
    if (a.last_use < victim->last_use) victim = &a;
  }
  if (victim->capacity < bytes) {
    CERA_CUDA_CHECK(cudaFree(victim->device));
    victim->device = nullptr;
    victim->capacity = std::max<uint64_t>(bytes, 4096);
    CERA_CUDA_CHECK(cudaMalloc(&victim->device, victim->capacity));
  }
  if (bytes > staging_bytes_) {
    CERA_CUDA_CHECK(cudaStreamSynchronize(stream_));
    CERA_CUDA_CHECK(cudaFreeHost(staging_));
    staging_ = nullptr;
    CERA_CUDA_CHECK(cudaMallocHost(&staging_, bytes));
    staging_bytes_ = bytes;
    staging_pos_ = 0;
  }
  if (staging_pos_ + bytes > staging_bytes_) {  // wrap: earlier copies out of the ring must be done
    CERA_CUDA_CHECK(cudaStreamSynchronize(stream_));
    staging_pos_ = 0;
  }
  std::byte* src = staging_ + staging_pos_;
  std::memcpy(src, host, bytes);
  staging_pos_ += (bytes + 255) & ~uint64_t{255};
  CERA_CUDA_CHECK(cudaMemcpyAsync(victim->device, src, bytes, cudaMemcpyHostToDevice, stream_));
  victim->host.assign(static_cast<const std::byte*>(host), static_cast<const std::byte*>(host) + bytes);
  victim->last_use = use_clock_;
  return victim->device;
}

const void* CudaContext::arena_bytes(const void* host, uint64_t bytes) const {
  if (bytes == 0) return nullptr;
  const auto* p = static_cast<const std::byte*>(host);
  CERA_CHECK_MSG(p >= arena_host_ && p + bytes <= arena_host_ + arena_bytes_,
                 "cuda: a host array outside the graph staging arena in graph mode");
  return arena_device_ + (p - arena_host_);
}

const int32_t* CudaContext::device_array(std::span<const int32_t> host) {
  if (mode_ != OpMode::kEager) return static_cast<const int32_t*>(arena_bytes(host.data(), host.size_bytes()));
  return static_cast<const int32_t*>(device_bytes(host.data(), host.size_bytes()));
}
const float* CudaContext::device_array(std::span<const float> host) {
  if (mode_ != OpMode::kEager) return static_cast<const float*>(arena_bytes(host.data(), host.size_bytes()));
  return static_cast<const float*>(device_bytes(host.data(), host.size_bytes()));
}

void check_f32_device(const TensorView& v, const char* what) {
  CERA_CHECK_MSG(v.device == Device::kCuda, std::string(what) + ": not a CUDA tensor");
  CERA_CHECK_MSG(v.dtype == DType::kF32,
                 std::string(what) + ": expected F32, got " + std::string(dtype_name(v.dtype)));
  CERA_CHECK_MSG(v.data != nullptr || v.n_elements() == 0, std::string(what) + ": null data");
  CERA_CHECK_MSG(v.stride() % 4 == 0, std::string(what) + ": row stride is not a multiple of 4 bytes");
}

}  // namespace cera::ops::cuda
