// State shared by the CUDA backend's verbs: the stream, the cuBLAS handle, grow-only device
// scratch, the host-array upload paths, and the quantized-activation cache. Internal to
// src/ops/cuda; included by .cu files only.
// Decision: in eager mode a host array is uploaded only when its bytes differ from a cached copy;
// in graph mode (graph.h) host arrays already sit in a pinned staging arena that one memcpy node
// at the head of the graph copies to a device mirror, so device_array() is an address offset.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"
#include "ops/backend.h"

#define CERA_CUDA_CHECK(expr)                                                                 \
  do {                                                                                        \
    const cudaError_t cera_cuda_err_ = (expr);                                                \
    CERA_CHECK_MSG(cera_cuda_err_ == cudaSuccess,                                             \
                   std::string(#expr) + ": " + cudaGetErrorString(cera_cuda_err_));          \
  } while (0)

#define CERA_CUBLAS_CHECK(expr)                                                                \
  do {                                                                                         \
    const cublasStatus_t cera_cublas_st_ = (expr);                                             \
    CERA_CHECK_MSG(cera_cublas_st_ == CUBLAS_STATUS_SUCCESS,                                   \
                   std::string(#expr) + ": cuBLAS status " + std::to_string(int(cera_cublas_st_))); \
  } while (0)

// After every launch: a bad configuration is reported here, not at the next synchronize.
#define CERA_CUDA_LAUNCHED() CERA_CUDA_CHECK(cudaGetLastError())

namespace cera::ops::cuda {

// Device scratch, one grow-only buffer per use; growing frees the old one (cudaFree waits for
// the device), so a kernel in flight never sees its scratch disappear.
enum class ScratchKind : uint8_t {
  kActQ8,       // 8-bit quantized activations of a GEMV
  kGemmWeight,  // a weight dequantized to f16 for the cuBLAS path
  kGemmX,       // activations converted to f16/bf16 for the cuBLAS path
  kAttnPartial, // per-split partial softmax results of attention
  kMoeGroups,   // matmul_experts' rows grouped by expert (prompt batches)
  kTopK,        // candidate keys and log-sum-exp partials of top_k's rounds
  kAttnArrivals,  // attention's per-(head group, token) split counters (zeroed_scratch)
  kGemvQueues,    // the streaming GEMV's row-group queues, one slot a launch (zeroed_scratch)
  kGemmSplit,     // gemm_rows' split-K arrival counters, then its partial tiles (zeroed_scratch)
  kRowsQueues,    // gemm_rows_stream's item queues, one slot a launch (zeroed_scratch)
  kCount,
};

// How op entries run: kEager launches at once; kRecord validates only (no launch: graph.h logs
// the call and launches it later); kCapture launches into a stream capture. In kRecord and
// kCapture every host array handed to an op entry lies in the pinned graph staging arena.
enum class OpMode : uint8_t { kEager, kRecord, kCapture };

// The activations last converted for a matmul, reused by the next matmul on the same input: Q/K/V
// and gate/up read one conversion instead of three/two. act_block 32 or 256: 8-bit blocks in kActQ8
// scratch (gemv.cu); kActF16 / kActBf16: the f16 / bf16 copy in kGemmX scratch (the prompt GEMM,
// matmul.cu). Any verb other than a matmul invalidates it (graph.cu), as does a matmul whose output
// overlaps the input or scratch that grows.
inline constexpr int64_t kActF16 = -1;
inline constexpr int64_t kActBf16 = -2;
struct QuantActCache {
  const void* x = nullptr;  // null: nothing valid
  int64_t x_stride = 0, n_in = 0, n_tokens = 0, act_block = 0;
  // Where the 8-bit codes lie when not at the start of kActQ8 scratch (the streaming GEMV's gated
  // epilogue writes them beside its queues: gemv.cu); null: kActQ8.
  int8_t* q = nullptr;
  float2* ds = nullptr;
  bool matches(const void* px, int64_t stride, int64_t n, int64_t t, int64_t blk) const {
    return x != nullptr && x == px && x_stride == stride && n_in == n && n_tokens == t && act_block == blk;
  }
};

class DequantAhead;

class CudaContext {
 public:
  explicit CudaContext(int device);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  int sm_count() const { return sm_count_; }
  const std::string& device_name() const { return device_name_; }

  void* scratch(ScratchKind kind, uint64_t bytes);
  // Scratch whose bytes are zero when (re)allocated; the kernels using it leave it zero.
  void* zeroed_scratch(ScratchKind kind, uint64_t bytes);
  // Bumped whenever scratch is reallocated: graphs captured before hold stale scratch pointers.
  uint64_t scratch_epoch() const { return scratch_epoch_; }
  // Device copy of a host array, valid for work enqueued on stream() from now on.
  const int32_t* device_array(std::span<const int32_t> host);
  const float* device_array(std::span<const float> host);

  OpMode mode() const { return mode_; }
  void set_mode(OpMode m) { mode_ = m; }
  bool launching() const { return mode_ != OpMode::kRecord; }
  // The graph staging arena (pinned host) and its device mirror (graph.cu fills and copies it).
  void set_graph_arena(const std::byte* host, uint64_t bytes, std::byte* device) {
    arena_host_ = host;
    arena_bytes_ = bytes;
    arena_device_ = device;
  }
  QuantActCache& act_cache() { return act_cache_; }
  // A counter for launches that each need their own slot of a ring (the streaming GEMV's queues).
  uint64_t next_launch_slot() { return launch_slot_++; }
  // The prompt GEMMs' f16 weight copies, made one GEMM ahead (dequant_ahead.h); created on first use.
  DequantAhead& dequant_ahead();
  // Device bytes [data, data + bytes) were freed or overwritten outside the verbs (buffer release,
  // upload, copy): what caches their contents forgets it.
  void memory_changed(const void* data, uint64_t bytes);

 private:
  const void* device_bytes(const void* host, uint64_t bytes);
  const void* arena_bytes(const void* host, uint64_t bytes) const;
  struct CachedArray {
    std::vector<std::byte> host;
    void* device = nullptr;
    uint64_t capacity = 0;
    uint64_t last_use = 0;
  };
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* cublas_workspace_ = nullptr;  // kCublasWorkspaceBytes, the handle's own (cuda_context.cu)
  int sm_count_ = 0;
  std::string device_name_;
  std::array<void*, size_t(ScratchKind::kCount)> scratch_{};
  std::array<uint64_t, size_t(ScratchKind::kCount)> scratch_bytes_{};
  std::array<CachedArray, 16> arrays_{};
  uint64_t use_clock_ = 0;
  std::byte* staging_ = nullptr;  // pinned ring the small uploads go through
  uint64_t staging_bytes_ = 0;
  uint64_t staging_pos_ = 0;
  uint64_t scratch_epoch_ = 0;
  OpMode mode_ = OpMode::kEager;
  const std::byte* arena_host_ = nullptr;
  uint64_t arena_bytes_ = 0;
  std::byte* arena_device_ = nullptr;
  QuantActCache act_cache_;
  uint64_t launch_slot_ = 0;
  std::unique_ptr<DequantAhead> dequant_ahead_;
};

// Verb checks shared by the op entries.
void check_f32_device(const TensorView& v, const char* what);

inline unsigned ceil_div(int64_t a, int64_t b) { return static_cast<unsigned>((a + b - 1) / b); }

}  // namespace cera::ops::cuda
