// CpuBackend: memory verbs (host allocations, zero-copy weights) and the forwarding of compute
// verbs to cpu_*.cpp. The ISA level is detected once here (__builtin_cpu_supports) and fixes
// the kernel table for the backend's lifetime.
#include "ops/cpu/cpu_backend.h"

#include <cstring>
#include <new>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "ops/cpu/cpu_context.h"
#include "ops/cpu/cpu_optional_verbs.h"
#include "ops/cpu/repack.h"
#include "quant/quant.h"

namespace cera::ops {
namespace {

using cpu::CpuContext;

// 64-byte aligned host memory (a cache line; every SIMD load is unaligned-safe anyway).
class HostBuffer final : public Buffer {
 public:
  explicit HostBuffer(uint64_t size)
      : data_(static_cast<std::byte*>(::operator new(size == 0 ? 1 : size, std::align_val_t{64}))),
        size_(size) {}
  ~HostBuffer() override { ::operator delete(data_, std::align_val_t{64}); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  std::byte* data() override { return data_; }
  uint64_t size() const override { return size_; }

 private:
  std::byte* data_;
  uint64_t size_;
};

// A weight in the R16 layout; unregisters itself when freed.
class R16Buffer final : public Buffer {
 public:
  R16Buffer(uint64_t size, std::shared_ptr<cpu::R16Registry> registry)
      : host_(size), registry_(std::move(registry)) {}
  ~R16Buffer() override { registry_->remove(host_.data()); }
  R16Buffer(const R16Buffer&) = delete;
  R16Buffer& operator=(const R16Buffer&) = delete;
  std::byte* data() override { return host_.data(); }
  uint64_t size() const override { return host_.size(); }

 private:
  HostBuffer host_;
  std::shared_ptr<cpu::R16Registry> registry_;
};

const cpu::KernelTable& table_for(CpuIsa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case CpuIsa::kAvx2: return cpu::avx2_kernels();
    case CpuIsa::kAvx512: return cpu::avx512_kernels();
    case CpuIsa::kAvx512Vnni: return cpu::avx512_vnni_kernels();
    default: break;
  }
#endif
  (void)isa;
  return cpu::portable_kernels();
}

// Copies rows of a possibly strided view from/to packed memory.
void copy_rows(const TensorView& v, std::byte* packed, bool to_view) {
  const int64_t rb = v.row_bytes();
  for (int64_t r = 0; r < v.rows(); ++r) {
    if (to_view) {
      std::memcpy(v.row(r), packed + r * rb, static_cast<size_t>(rb));
    } else {
      std::memcpy(packed + r * rb, v.row(r), static_cast<size_t>(rb));
    }
  }
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(const CpuBackendOptions& o, CpuIsa isa) : ctx_(o.n_threads, isa, table_for(isa), o.activations) {}

  Device device() const override { return Device::kCpu; }
  std::string name() const override {
    return "cpu (" + std::string(cpu_isa_name(ctx_.isa)) + ", " + std::to_string(ctx_.pool.size()) +
           (ctx_.pool.size() == 1 ? " thread)" : " threads)");
  }

  Result<std::unique_ptr<Buffer>> allocate(uint64_t bytes) override {
    try {
      return std::unique_ptr<Buffer>(std::make_unique<HostBuffer>(bytes));
    } catch (const std::bad_alloc&) {
      return Status(ErrorCode::kOutOfRange, "cpu: cannot allocate " + std::to_string(bytes) + " bytes");
    }
  }
  Result<TensorView> import_weight(const TensorView& host, std::unique_ptr<Buffer>& keep) override {
    keep.reset();
    if (host.device != Device::kCpu) return invalid_argument("cpu: import_weight of a device tensor");
    if (ctx_.kernels->r16_matmul_for(host.dtype) == nullptr || host.cols() % 32 != 0) {
      return host;  // zero copy: the kernels read GGUF blocks in place
    }
    // Repacked copy (repack.h): the decode matmul of these types runs ~2-3x faster on it.
    const int64_t n_in = host.cols(), n_out = host.rows();
    const auto bytes = static_cast<uint64_t>(cpu::r16_size(host.dtype, n_in, n_out));
    std::unique_ptr<Buffer> buf;
    try {
      buf = std::make_unique<R16Buffer>(bytes, ctx_.r16);
    } catch (const std::bad_alloc&) {
      return Status(ErrorCode::kOutOfRange, "cpu: cannot allocate " + std::to_string(bytes) + " bytes");
    }
    std::byte* dst = buf->data();
    ctx_.pool.parallel_for(cpu::r16_groups(n_out), 16, [&](int64_t begin, int64_t end) {
      cpu::r16_repack(host.dtype, host.data, host.stride(), n_in, n_out, dst, begin, end);
    });
    ctx_.r16->add(dst, {host.dtype, n_in, n_out});
    TensorView view = host;
    view.data = dst;
    view.row_stride = 0;
    keep = std::move(buf);
    return view;
  }
  void upload(const TensorView& dst, const void* src) override {
    CERA_CHECK(dst.device == Device::kCpu);
    copy_rows(dst, static_cast<std::byte*>(const_cast<void*>(src)), true);
  }
  void download(void* dst, const TensorView& src) override {
    CERA_CHECK(src.device == Device::kCpu);
    copy_rows(src, static_cast<std::byte*>(dst), false);
  }
  void synchronize() override {}
  bool supports_weight(DType dtype) const override { return ctx_.kernels->matmul_for(dtype) != nullptr; }

  void embed(const TensorView& out, const TensorView& table, std::span<const int32_t> tokens,
             float scale) override {
    cpu::embed(ctx_, out, table, tokens, scale);
  }
  void matmul(const TensorView& out, const TensorView& weight, const TensorView& x,
              const TensorView* bias) override {
    cpu::matmul(ctx_, out, weight, x, bias);
  }
  void rms_norm(const TensorView& out, const TensorView& x, const TensorView& weight, float eps) override {
    cpu::rms_norm(ctx_, out, x, weight, eps);
  }
  void layer_norm(const TensorView& out, const TensorView& x, const TensorView& weight, const TensorView& bias,
                  float eps) override {
    cpu::layer_norm(ctx_, out, x, weight, bias, eps);
  }
  void activation(const TensorView& out, const TensorView& x, Activation act) override {
    cpu::activation(ctx_, out, x, act);
  }
  void rope(const TensorView& x, std::span<const int32_t> positions, const RopeParams& params) override {
    cpu::rope(ctx_, x, positions, params);
  }
  void gated_activation(const TensorView& out, const TensorView& gate, const TensorView& up,
                        Activation act) override {
    cpu::gated_activation(ctx_, out, gate, up, act);
  }
  void add_scaled(const TensorView& out, const TensorView& a, const TensorView& b, float scale) override {
    cpu::add_scaled(ctx_, out, a, b, scale);
  }
  void scale(const TensorView& x, float s) override { cpu::scale(ctx_, x, s); }
  void kv_store(const KvLayer& layer, const TensorView& k, const TensorView& v,
                std::span<const int32_t> slots) override {
    cpu::kv_store(ctx_, layer, k, v, slots);
  }
  void attention(const TensorView& out, const TensorView& q, const KvLayer& layer,
                 const AttentionBatch& batch, const AttentionParams& params) override {
    cpu::attention(ctx_, out, q, layer, batch, params);
  }
  void kv_copy(const KvLayer& layer, std::span<const int32_t> src_slots,
               std::span<const int32_t> dst_slots) override {
    cpu::kv_copy(ctx_, layer, src_slots, dst_slots);
  }
  void kv_rerotate(const KvLayer& layer, std::span<const int32_t> slots, int32_t delta,
                   int32_t head_dim, const RopeParams& params) override {
    cpu::kv_rerotate(ctx_, layer, slots, delta, head_dim, params);
  }
  bool supports(Feature) const override { return true; }  // kShortConv and kMoe (cpu_conv/cpu_moe.cpp)
  void short_conv(const TensorView& out, const TensorView& bcx, const TensorView& kernel,
                  const TensorView& state) override {
    cpu::short_conv(ctx_, out, bcx, kernel, state);
  }
  void moe_route(const TensorView& ids, const TensorView& weights, const TensorView& logits,
                 const RouterParams& params) override {
    cpu::moe_route(ctx_, ids, weights, logits, params);
  }
  void matmul_experts(const TensorView& out, const TensorView& experts, const TensorView& x,
                      const TensorView& ids) override {
    cpu::matmul_experts(ctx_, out, experts, x, ids);
  }
  void moe_combine(const TensorView& out, const TensorView& expert_out, const TensorView& weights) override {
    cpu::moe_combine(ctx_, out, expert_out, weights);
  }

 private:
  CpuContext ctx_;
};

}  // namespace

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAuto: return "auto";
    case CpuIsa::kPortable: return "portable";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
    case CpuIsa::kAvx512Vnni: return "avx512-vnni";
  }
  return "?";
}

#if defined(__x86_64__)
namespace {
// F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c".
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}
}  // namespace
#endif

bool cpu_isa_supported(CpuIsa isa) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  switch (isa) {
    case CpuIsa::kAuto:
    case CpuIsa::kPortable: return true;
    case CpuIsa::kAvx2: return avx2;
    case CpuIsa::kAvx512: return avx512;
    case CpuIsa::kAvx512Vnni: return avx512 && __builtin_cpu_supports("avx512vnni");
  }
  return false;
#else
  return isa == CpuIsa::kAuto || isa == CpuIsa::kPortable;
#endif
}

CpuIsa cpu_best_isa() {
  for (CpuIsa isa : {CpuIsa::kAvx512Vnni, CpuIsa::kAvx512, CpuIsa::kAvx2}) {
    if (cpu_isa_supported(isa)) return isa;
  }
  return CpuIsa::kPortable;
}

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options) {
  const CpuIsa isa = options.isa == CpuIsa::kAuto ? cpu_best_isa() : options.isa;
  CERA_CHECK_MSG(cpu_isa_supported(isa),
                 "cpu backend: this CPU cannot run the " + std::string(cpu_isa_name(isa)) + " kernels");
  CERA_CHECK(options.n_threads >= 0);
  return std::make_unique<CpuBackend>(options, isa);
}

}  // namespace cera::ops
