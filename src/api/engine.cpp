#include "api/engine.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "core/thread_pool.h"
#include "ops/cpu/host_collective.h"
#include "model/tensor_parallel.h"
#include "ops/cpu/cpu_backend.h"
#if defined(CERA_HAVE_CUDA)
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/device_info.h"
#include "ops/cuda/nccl_collective.h"
#endif

namespace cera::api {

std::optional<DeviceChoice> device_choice_from_name(std::string_view name) {
  if (name == "cpu") return DeviceChoice::kCpu;
  if (name == "cuda") return DeviceChoice::kCuda;
  if (name == "auto") return DeviceChoice::kAuto;
  return std::nullopt;
}

std::optional<KvTypeChoice> kv_type_choice_from_name(std::string_view name) {
  if (name == "auto") return KvTypeChoice::kAuto;
  if (name == "f32") return KvTypeChoice::kF32;
  if (name == "f16") return KvTypeChoice::kF16;
  return std::nullopt;
}

namespace {

// `cuda` requires a usable device; `auto` takes CUDA when this build has it and a device is
// present, else the CPU.
Result<std::unique_ptr<ops::Backend>> make_backend(const EngineOptions& options) {
#if defined(CERA_HAVE_CUDA)
  bool use_cuda = options.device == DeviceChoice::kCuda;
  if (options.device == DeviceChoice::kAuto) {
    auto devices = cuda::list_devices();
    use_cuda = devices.ok() && !devices->empty();
  }
  if (use_cuda) {
    auto backend = ops::make_cuda_backend({});
    if (!backend.ok()) return backend.status().with_context("--device cuda");
    return std::move(backend).value();
  }
#else
  if (options.device == DeviceChoice::kCuda) {
    return unsupported("--device cuda: this build of cera has no CUDA backend (configure with -DCERA_CUDA=ON)");
  }
#endif
  return ops::make_cpu_backend({.n_threads = options.n_threads,
                                 .activations = options.cpu_int8_activations ? ops::ActivationPrecision::kInt8
                                                                             : ops::ActivationPrecision::kInt8x2});
}

// kAuto: F16 on CUDA, F32 on the CPU. On the CPU the accuracy claims (docs/quality.md) and the
// parity tests against transformers are made with float32 K/V. On the H200 the F16 cache halves
// the K/V bytes and, since the tensor-core decode kernel (src/ops/cuda/attention.cu), is the faster
// one at every depth (8B Q4_0 tg128 at depth 4096: 436 vs 362 t/s with F32; pp4096 25.5k vs
// 24.7k; docs/benchmarks/cuda.md, v6), within the parity tests' F16 tolerance.
DType resolve_kv_type(KvTypeChoice choice, Device device) {
  switch (choice) {
    case KvTypeChoice::kF32: return DType::kF32;
    case KvTypeChoice::kF16: return DType::kF16;
    case KvTypeChoice::kAuto: break;
  }
  return device == Device::kCuda ? DType::kF16 : DType::kF32;
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::load(const EngineOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (options.n_threads < 0 || options.n_threads > kMaxThreads) {
    return invalid_argument("n_threads " + std::to_string(options.n_threads) + " must be from 0 (every core) to " +
                            std::to_string(kMaxThreads));
  }
  std::unique_ptr<Engine> engine(new Engine());
  CERA_ASSIGN_OR_RETURN(engine->file_, format::GgufFile::open(options.model_path));
  if (options.tensor_parallel < 1 || options.tensor_parallel > kMaxTensorParallel) {
    return invalid_argument("tensor_parallel " + std::to_string(options.tensor_parallel) + " must be from 1 to " +
                            std::to_string(kMaxTensorParallel));
  }
  CERA_ASSIGN_OR_RETURN(engine->backend_, make_backend(options));
  engine->kv_type_ = resolve_kv_type(options.kv_type, engine->backend_->device());
  auto tok = tokenizer::Tokenizer::from_gguf(engine->file_);
  if (!tok.ok()) return tok.status().with_context(options.model_path.string());
  engine->tokenizer_.emplace(std::move(tok).value());
  const model::LoadOptions load{.max_batch_tokens = options.max_batch_tokens, .progress = options.progress};
  auto model = options.tensor_parallel > 1 ? engine->load_tensor_parallel(options, load)
                                           : model::load_model(engine->file_, *engine->backend_, load);
  if (!model.ok()) return model.status().with_context(options.model_path.string());
  engine->model_ = std::move(model).value();
  engine->load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return engine;
}

Result<std::unique_ptr<model::Model>> Engine::load_tensor_parallel(const EngineOptions& options,
                                                                   const model::LoadOptions& load) {
  const int n = options.tensor_parallel;
  model::TensorParallelRanks ranks;
  if (backend_->device() == Device::kCpu) {
    if (!options.devices.empty()) {
      return invalid_argument("--devices names CUDA devices, but the model runs on the CPU (" + backend_->name() +
                              "): use --device cuda, or --tensor-parallel N alone for CPU ranks");
    }
    // The CPU ranks share the threads: each rank's backend computes its slice with its own pool.
    const int threads = options.n_threads > 0 ? options.n_threads : available_cores();
    const ops::CpuBackendOptions cpu{.n_threads = std::max(1, threads / n),
                                     .activations = options.cpu_int8_activations ? ops::ActivationPrecision::kInt8
                                                                                 : ops::ActivationPrecision::kInt8x2};
    backend_ = ops::make_cpu_backend(cpu);
    for (int r = 1; r < n; ++r) rank_backends_.push_back(ops::make_cpu_backend(cpu));
  } else {
#if defined(CERA_HAVE_CUDA)
    std::vector<int32_t> devices = options.devices;
    if (devices.empty()) {
      for (int r = 0; r < n; ++r) devices.push_back(r);
    }
    if (static_cast<int>(devices.size()) != n) {
      return invalid_argument("--devices names " + std::to_string(devices.size()) + " devices for --tensor-parallel " +
                              std::to_string(n) + ": name one per rank");
    }
    CERA_ASSIGN_OR_RETURN(const auto found, cuda::list_devices());
    for (int32_t d : devices) {
      if (d < 0 || d >= static_cast<int32_t>(found.size())) {
        return invalid_argument("--tensor-parallel " + std::to_string(n) + ": CUDA device " + std::to_string(d) +
                                " does not exist; this machine has " + std::to_string(found.size()) +
                                " (pass --devices to choose them)");
      }
    }
    for (int r = 0; r < n; ++r) {
      auto b = ops::make_cuda_backend({.device = devices[static_cast<size_t>(r)]});
      if (!b.ok()) return b.status().with_context("tensor-parallel rank " + std::to_string(r));
      if (r == 0) {
        backend_ = std::move(b).value();
      } else {
        rank_backends_.push_back(std::move(b).value());
      }
    }
    ranks.backends.push_back(backend_.get());
    for (const auto& b : rank_backends_) ranks.backends.push_back(b.get());
    // One GPU per rank: NCCL, on the ranks' streams and inside their graphs. A GPU named twice
    // (testing the split on one device) cannot be an NCCL rank twice: the host collective then
    // stages each all-reduce through the host, correct but a synchronisation per layer.
    const bool distinct = std::set<int32_t>(devices.begin(), devices.end()).size() == devices.size();
    if (distinct) {
      CERA_ASSIGN_OR_RETURN(collectives_, ops::make_nccl_group(ranks.backends, devices));
    }
#endif
  }
  if (ranks.backends.empty()) {  // the CPU ranks (the CUDA branch filled them for NCCL)
    ranks.backends.push_back(backend_.get());
    for (const auto& b : rank_backends_) ranks.backends.push_back(b.get());
  }
  // The host collective: in place on the CPU's tensors, staged through the host on a device's.
  if (!collectives_) collectives_ = std::make_unique<ops::HostCollectiveGroup>(n, ranks.backends);
  for (int r = 0; r < n; ++r) ranks.collectives.push_back(&collectives_->rank(r));
  return model::load_tensor_parallel(file_, ranks, load);
}

std::string Engine::device_name() const {
  const size_t ranks = model_->ranks().size();
  return backend_->name() + (ranks > 1 ? ", " + std::to_string(ranks) + " tensor-parallel ranks" : "");
}

Result<std::unique_ptr<runtime::Session>> Engine::new_session(const runtime::SessionOptions& options) {
  runtime::SessionOptions o = options;
  o.kv_type = kv_type_;  // EngineOptions::kv_type decides for every session of the engine
  return runtime::Session::create(*model_, *tokenizer_, o);
}

int64_t Engine::session_n_ctx(const runtime::SessionOptions& options) const {
  return options.n_ctx > 0 ? options.n_ctx : model_->hparams().n_ctx_train;
}

uint64_t Engine::kv_cache_bytes(const runtime::SessionOptions& options, bool paged_sliding) const {
  const model::KvGeometry g = model_->kv_geometry();
  const int64_t block = std::max<int64_t>(options.kv_block_size, 1);
  const int64_t n_blocks = (std::max<int64_t>(session_n_ctx(options), 0) + block - 1) / block;
  // A sliding-window layer holds a ring of window + max(batch, window) tokens, at most the cache.
  const int64_t window = g.sliding_window;
  const int64_t ring_blocks = std::min(n_blocks, (window + std::max<int64_t>(options.n_batch, window) + block - 1) / block);
  const uint64_t row_bytes = static_cast<uint64_t>(std::max(g.kv_width, 0)) * dtype_type_size(kv_type_);
  uint64_t total = 0;
  for (int32_t il = 0; il < g.n_layer; ++il) {
    if (g.kind(il) != model::LayerKind::kAttention) continue;
    const int64_t rows = (g.is_sliding(il) && !paged_sliding ? ring_blocks : n_blocks) * block;
    total += 2 * static_cast<uint64_t>(rows) * row_bytes;  // K and V
  }
  return total;
}

}  // namespace cera::api
