// CudaBackend: device memory (cudaMalloc'd Buffers), weight import (upload once, then repack
// into the GPU layout), host<->device copies on the backend's stream, and the forwarding of the
// verbs, as Calls, to the GraphRunner (graph.h), which logs them into CUDA graphs or runs them
// eagerly. Every verb is asynchronous on the one stream; upload/download/synchronize/import and
// the release of a Buffer first launch what is logged. download_async reads back through a small
// ring of pinned slots (a copy into pageable memory would block the host until it is done).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ops/cuda/bind_device.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/device_info.h"
#include "ops/cuda/graph.h"
#include "ops/cuda/weight_layout.h"

namespace cera::ops {
namespace {

using cuda::Call;
using cuda::CudaContext;
using cuda::GraphRunner;
using cuda::Verb;

class DeviceBuffer final : public Buffer {
 public:
  DeviceBuffer(std::byte* data, uint64_t size, int device, std::weak_ptr<GraphRunner> runner)
      : data_(data), size_(size), device_(device), runner_(std::move(runner)) {}
  ~DeviceBuffer() override {
    try {
      cuda::bind_device(device_);  // a KV cache may be freed from another rank's thread
    } catch (const std::exception&) {
    }
    // Logged calls may still use this memory: launch them first (cudaFree then waits for them).
    // Errors ignored: destructors must not throw.
    if (auto r = runner_.lock()) {
      try {
        r->flush();
        r->memory_changed(data_, size_);
      } catch (const std::exception&) {
      }
    }
    cudaFree(data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::byte* data() override { return data_; }
  uint64_t size() const override { return size_; }

 private:
  std::byte* data_;
  uint64_t size_;
  int device_;
  std::weak_ptr<GraphRunner> runner_;
};

// The pinned slots of download_async. A slot is reused round robin; if the readback still in it
// was not waited for, reuse completes it first (copies it to its dst), so any number may be
// outstanding and wait() of a completed one does nothing.
class ReadbackRing {
 public:
  static constexpr int kSlots = 4;
  static constexpr uint64_t kSlotBytes = 4096;  // a few sampled ids and scores; larger reads are synchronous

  ReadbackRing() {
    CERA_CUDA_CHECK(cudaMallocHost(&host_, kSlots * kSlotBytes));
    for (Slot& s : slots_) CERA_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
  }
  ~ReadbackRing() {  // destructors must not throw: errors ignored
    for (Slot& s : slots_) cudaEventDestroy(s.done);
    cudaFreeHost(host_);
  }
  ReadbackRing(const ReadbackRing&) = delete;
  ReadbackRing& operator=(const ReadbackRing&) = delete;

  // Queues the copy of src (after what the stream holds) into the next slot.
  Readback start(void* dst, const TensorView& src, cudaStream_t stream) {
    const uint64_t id = ++last_id_;
    Slot& s = slots_[id % kSlots];
    finish(s);
    std::byte* pinned = host_ + (id % kSlots) * kSlotBytes;
    CERA_CUDA_CHECK(cudaMemcpy2DAsync(pinned, size_t(src.row_bytes()), src.data, size_t(src.stride()),
                                      size_t(src.row_bytes()), size_t(src.rows()), cudaMemcpyDeviceToHost, stream));
    CERA_CUDA_CHECK(cudaEventRecord(s.done, stream));
    s = {.done = s.done, .id = id, .dst = dst, .bytes = uint64_t(src.row_bytes() * src.rows())};
    return {id};
  }
  void wait(Readback r) {
    if (r.id == 0) return;
    Slot& s = slots_[r.id % kSlots];
    if (s.id == r.id) finish(s);  // otherwise a later start() finished it already
  }

 private:
  struct Slot {
    cudaEvent_t done = nullptr;
    uint64_t id = 0;  // 0: nothing to finish
    void* dst = nullptr;
    uint64_t bytes = 0;
  };
  void finish(Slot& s) {
    if (s.id == 0) return;
    CERA_CUDA_CHECK(cudaEventSynchronize(s.done));
    std::memcpy(s.dst, host_ + (s.id % kSlots) * kSlotBytes, s.bytes);
    s.id = 0;
  }
  std::byte* host_ = nullptr;
  Slot slots_[kSlots];
  uint64_t last_id_ = 0;
};

Result<std::unique_ptr<Buffer>> device_alloc(uint64_t bytes, int device, std::weak_ptr<GraphRunner> runner) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls are not blamed
    return Status(ErrorCode::kOutOfRange,
                  "cuda: cannot allocate " + std::to_string(bytes) + " bytes: " + cudaGetErrorString(err));
  }
  return std::unique_ptr<Buffer>(std::make_unique<DeviceBuffer>(static_cast<std::byte*>(p), bytes, device, std::move(runner)));
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, bool graphs)
      : device_(device), ctx_(device), runner_(std::make_shared<GraphRunner>(ctx_, graphs)) {}
  ~CudaBackend() override {
    try {
      cuda::bind_device(device_);
      runner_->flush();
    } catch (const std::exception&) {  // destructors must not throw
    }
    cudaStreamSynchronize(ctx_.stream());  // readbacks still copying into readbacks_'s pinned slots
    if (const char* env = std::getenv("CERA_CUDA_GRAPH_STATS"); env != nullptr && env[0] == '1') {
      const GraphRunner::Stats& s = runner_->stats();
      std::fprintf(stderr,
                   "cuda graphs: %llu launches, %llu captures, %llu updates, %llu instantiations; host: %.1f us "
                   "recording + %.1f us launching per launch\n",
                   (unsigned long long)s.launches, (unsigned long long)s.captures, (unsigned long long)s.updates,
                   (unsigned long long)s.instantiations, 1e6 * s.record_seconds / double(std::max<uint64_t>(1, s.launches)),
                   1e6 * s.flush_seconds / double(std::max<uint64_t>(1, s.launches)));
    }
  }

  Device device() const override { return Device::kCuda; }
  std::string name() const override { return "cuda (" + ctx_.device_name() + ")"; }

  Result<std::unique_ptr<Buffer>> allocate(uint64_t bytes) override {
    cuda::bind_device(device_);
    return device_alloc(bytes, device_, runner_);
  }

  Result<TensorView> import_weight(const TensorView& host, std::unique_ptr<Buffer>& keep) override {
    cuda::bind_device(device_);
    keep.reset();
    if (host.device != Device::kCpu) return invalid_argument("cuda: import_weight of a non-host tensor");
    if (!cuda::is_supported_weight(host.dtype)) {
      return unsupported("cuda: no kernels for weight type " + std::string(dtype_name(host.dtype)));
    }
    if (!host.packed()) return invalid_argument("cuda: import_weight needs a packed host tensor");
    const int64_t n_in = host.cols(), rows = host.rows();
    const cuda::WeightLayout layout = cuda::weight_layout(host.dtype, n_in, rows);
    runner_->flush();
    CERA_ASSIGN_OR_RETURN(keep, device_alloc(layout.total_bytes, device_, runner_));
    const uint64_t raw_bytes = uint64_t(host.row_bytes()) * uint64_t(rows);
    void* target = keep->data();
    if (layout.repacked) target = ctx_.scratch(cuda::ScratchKind::kGemmWeight, raw_bytes);
    // Synchronous copy from the file map: the source may be pageable mmap memory.
    CERA_CUDA_CHECK(cudaMemcpyAsync(target, host.data, raw_bytes, cudaMemcpyHostToDevice, ctx_.stream()));
    if (layout.repacked) cuda::repack_weight(host.dtype, target, keep->data(), n_in, rows, ctx_.stream());
    CERA_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream()));
    TensorView v = host;
    v.data = keep->data();
    v.device = Device::kCuda;
    v.row_stride = 0;
    return v;
  }
  void upload(const TensorView& dst, const void* src) override {
    cuda::bind_device(device_);
    CERA_CHECK(dst.device == Device::kCuda);
    if (dst.n_elements() == 0) return;
    runner_->flush();
    ctx_.act_cache() = {};
    ctx_.memory_changed(dst.data, uint64_t(dst.extent_bytes()));
    CERA_CUDA_CHECK(cudaMemcpy2DAsync(dst.data, size_t(dst.stride()), src, size_t(dst.row_bytes()),
                                      size_t(dst.row_bytes()), size_t(dst.rows()), cudaMemcpyHostToDevice,
                                      ctx_.stream()));
    CERA_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream()));  // src may be freed when we return
    runner_->synced();
  }
  void flush() override {
    cuda::bind_device(device_);
    runner_->flush();
  }
  void download(void* dst, const TensorView& src) override {
    cuda::bind_device(device_);
    CERA_CHECK(src.device == Device::kCuda);
    runner_->flush();
    if (src.n_elements() == 0) return;
    CERA_CUDA_CHECK(cudaMemcpy2DAsync(dst, size_t(src.row_bytes()), src.data, size_t(src.stride()),
                                      size_t(src.row_bytes()), size_t(src.rows()), cudaMemcpyDeviceToHost,
                                      ctx_.stream()));
    CERA_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream()));
    runner_->synced();
  }
  void copy(const TensorView& dst, const TensorView& src) override {
    cuda::bind_device(device_);
    CERA_CHECK(dst.device == Device::kCuda && src.device == Device::kCuda);
    CERA_CHECK_MSG(dst.dtype == src.dtype && dst.ne == src.ne, "cuda copy: views differ in type or shape");
    runner_->flush();  // logged verbs first: the copy is ordered after them on the stream
    ctx_.act_cache() = {};
    if (src.n_elements() == 0) return;
    ctx_.memory_changed(dst.data, uint64_t(dst.extent_bytes()));
    CERA_CUDA_CHECK(cudaMemcpy2DAsync(dst.data, size_t(dst.stride()), src.data, size_t(src.stride()),
                                      size_t(src.row_bytes()), size_t(src.rows()), cudaMemcpyDeviceToDevice,
                                      ctx_.stream()));
  }
  void synchronize() override {
    cuda::bind_device(device_);
    runner_->flush();
    CERA_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream()));
    runner_->synced();
  }
  // Launches what is logged and returns: the host records the next step while this one runs.
  Readback download_async(void* dst, const TensorView& src) override {
    cuda::bind_device(device_);
    CERA_CHECK(src.device == Device::kCuda);
    if (src.n_elements() == 0) return {};
    if (uint64_t(src.row_bytes() * src.rows()) > ReadbackRing::kSlotBytes) {
      download(dst, src);
      return {};
    }
    runner_->flush();
    return readbacks_.start(dst, src, ctx_.stream());
  }
  void wait(Readback r) override { readbacks_.wait(r); }
  bool overlaps_host() const override { return true; }
  bool supports_weight(DType dtype) const override { return cuda::is_supported_weight(dtype); }

  void embed(const TensorView& out, const TensorView& table, std::span<const int32_t> tokens,
             float scale) override {
    Call c{.verb = Verb::kEmbed, .out = out, .a = table, .f = scale};
    c.i[0] = tokens;
    run(c);
  }
  // The rows this rank holds, -1 for the others' tokens (the kernel writes them zero rows): one
  // launch, no upload of zeros (the default body's, which would synchronize every step).
  void embed_slice(const TensorView& out, const TensorView& table, std::span<const int32_t> tokens, int64_t first,
                   float scale) override {
    slice_rows_.resize(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      const int64_t row = int64_t(tokens[i]) - first;
      slice_rows_[i] = row >= 0 && row < table.rows() ? int32_t(row) : -1;
    }
    Call c{.verb = Verb::kEmbedSlice, .out = out, .a = table, .f = scale};
    c.i[0] = slice_rows_;  // copied when the call is logged or run
    run(c);
  }
  void embed_ids(const TensorView& out, const TensorView& table, const TensorView& ids, float scale) override {
    run({.verb = Verb::kEmbedIds, .out = out, .a = table, .b = ids, .f = scale});
  }
  void matmul(const TensorView& out, const TensorView& weight, const TensorView& x,
              const TensorView* bias) override {
    run({.verb = Verb::kMatmul, .out = out, .a = weight, .b = x, .c = bias != nullptr ? *bias : TensorView{}});
  }
  void rms_norm(const TensorView& out, const TensorView& x, const TensorView& weight, float eps) override {
    run({.verb = Verb::kRmsNorm, .out = out, .a = x, .b = weight, .f = eps});
  }
  void layer_norm(const TensorView& out, const TensorView& x, const TensorView& weight, const TensorView& bias,
                  float eps) override {
    run({.verb = Verb::kLayerNorm, .out = out, .a = x, .b = weight, .c = bias, .f = eps});
  }
  void activation(const TensorView& out, const TensorView& x, Activation act) override {
    run({.verb = Verb::kActivation, .out = out, .a = x, .act = act});
  }
  void rope(const TensorView& x, std::span<const int32_t> positions, const RopeParams& params) override {
    Call c{.verb = Verb::kRope, .out = x, .rope = params};
    c.i[0] = positions;
    run(c);
  }
  void gated_activation(const TensorView& out, const TensorView& gate, const TensorView& up,
                        Activation act) override {
    run({.verb = Verb::kGatedActivation, .out = out, .a = gate, .b = up, .act = act});
  }
  void add_scaled(const TensorView& out, const TensorView& a, const TensorView& b, float scale) override {
    run({.verb = Verb::kAddScaled, .out = out, .a = a, .b = b, .f = scale});
  }
  void scale(const TensorView& x, float s) override { run({.verb = Verb::kScale, .out = x, .f = s}); }
  void kv_store(const KvLayer& layer, const TensorView& k, const TensorView& v,
                std::span<const int32_t> slots) override {
    Call c{.verb = Verb::kKvStore, .a = k, .b = v, .layer = layer};
    c.i[0] = slots;
    run(c);
  }
  void attention(const TensorView& out, const TensorView& q, const KvLayer& layer, const AttentionBatch& batch,
                 const AttentionParams& params) override {
    Call c{.verb = Verb::kAttention, .out = out, .a = q, .layer = layer, .attn = params};
    c.i[0] = batch.positions;
    c.i[1] = batch.token_seq;
    c.i[2] = batch.block_tables;
    c.i[3] = batch.table_offset;
    run(c);
  }
  void top_k(const TensorView& ids, const TensorView& values, const TensorView& lse, const TensorView& logits,
             const TopKParams& params) override {
    run({.verb = Verb::kTopK, .out = ids, .a = logits, .b = values, .c = lse, .f = params.softcap, .n = params.k});
  }
  void mask_logits(const TensorView& logits, std::span<const uint32_t> masks, std::span<const int32_t> rows) override {
    if (rows.empty()) return;
    Call c{.verb = Verb::kMaskLogits, .out = logits};
    c.i[0] = std::span(reinterpret_cast<const int32_t*>(masks.data()), masks.size());
    c.i[1] = rows;
    run(c);
  }
  // Rare (prefix reuse, context shift): launched eagerly after what is logged.
  void kv_copy(const KvLayer& layer, std::span<const int32_t> src_slots,
               std::span<const int32_t> dst_slots) override {
    cuda::bind_device(device_);
    runner_->flush();
    ctx_.act_cache() = {};
    cuda::kv_copy(ctx_, layer, src_slots, dst_slots);
  }
  void kv_rerotate(const KvLayer& layer, std::span<const int32_t> slots, int32_t delta, int32_t head_dim,
                   const RopeParams& params) override {
    cuda::bind_device(device_);
    runner_->flush();
    ctx_.act_cache() = {};
    cuda::kv_rerotate(ctx_, layer, slots, delta, head_dim, params);
  }

  // --- optional verbs: all on the device, recorded into graphs like the dense verbs ---
  bool supports(Feature f) const override { return f == Feature::kShortConv || f == Feature::kMoe; }
  void short_conv(const TensorView& out, const TensorView& bcx, const TensorView& kernel,
                  const TensorView& state) override {
    run({.verb = Verb::kShortConv, .out = out, .a = bcx, .b = kernel, .c = state});
  }
  void moe_route(const TensorView& ids, const TensorView& weights, const TensorView& logits,
                 const RouterParams& params) override {
    Call c{.verb = Verb::kMoeRoute, .out = ids, .a = weights, .b = logits};
    c.router = params;
    c.router.selection_bias = nullptr;  // the view travels by value in c: the pointer dies with the call
    if (params.selection_bias != nullptr) c.c = *params.selection_bias;
    run(c);
  }
  void matmul_experts(const TensorView& out, const TensorView& experts, const TensorView& x,
                      const TensorView& ids) override {
    run({.verb = Verb::kMatmulExperts, .out = out, .a = experts, .b = x, .c = ids});
  }
  void moe_combine(const TensorView& out, const TensorView& expert_out, const TensorView& weights) override {
    run({.verb = Verb::kMoeCombine, .out = out, .a = expert_out, .b = weights});
  }

  void post(const Call& c) { run(c); }

 private:
  void run(const Call& c) {
    cuda::bind_device(device_);
    runner_->run(c);
  }

  int device_;
  std::vector<int32_t> slice_rows_;  // embed_slice's rows, reused
  CudaContext ctx_;
  std::shared_ptr<GraphRunner> runner_;  // shared with the Buffers (weakly), which flush it
  ReadbackRing readbacks_;
};

bool graphs_enabled(bool requested) {
  const char* env = std::getenv("CERA_CUDA_GRAPHS");
  return requested && !(env != nullptr && env[0] == '0') && !cuda::batch_invariant();
}

}  // namespace

namespace cuda {
void post_call(Backend& cuda_backend, const Call& call) {
  // Only make_cuda_backend's backends report Device::kCuda.
  CERA_CHECK_MSG(cuda_backend.device() == Device::kCuda, "post_call: not a CUDA backend");
  static_cast<CudaBackend&>(cuda_backend).post(call);
}
}  // namespace cuda

Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaBackendOptions& options) {
  CERA_ASSIGN_OR_RETURN(auto devices, ::cera::cuda::list_devices());
  if (devices.empty()) return unsupported("cuda: no CUDA device found (is the NVIDIA driver loaded?)");
  if (options.device < 0 || options.device >= static_cast<int>(devices.size())) {
    return invalid_argument("cuda: device " + std::to_string(options.device) + " does not exist (" +
                            std::to_string(devices.size()) + " found)");
  }
  try {
    return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(options.device, graphs_enabled(options.graphs)));
  } catch (const CheckFailure& e) {
    return io_error(std::string("cuda: cannot start the backend: ") + e.what());
  }
}

}  // namespace cera::ops
