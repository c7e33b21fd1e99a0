// Engine: a loaded model ready for sessions — the GGUF map, the backend chosen for the device,
// the model's weights on it and the tokenizer. Apps (CLI, server, bindings) start here.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "ops/collective.h"
#include "model/model.h"
#include "ops/backend.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace cera::api {

enum class DeviceChoice { kCpu, kCuda, kAuto };
// "cpu", "cuda", "auto"
std::optional<DeviceChoice> device_choice_from_name(std::string_view name);

// Element type of the KV cache. F16 halves the bytes attention reads per token at long context;
// F32 keeps K/V exact. kAuto: F32 on both backends for now (engine.cpp says why).
enum class KvTypeChoice { kAuto, kF32, kF16 };
// "auto", "f32", "f16"
std::optional<KvTypeChoice> kv_type_choice_from_name(std::string_view name);

// The most CPU threads Engine::load accepts: far beyond any host's cores, and far below the
// thousands at which creating threads fails (which used to abort the process).
inline constexpr int32_t kMaxThreads = 1024;
// The most tensor-parallel ranks Engine::load accepts: the GPUs of one NVLink host.
inline constexpr int32_t kMaxTensorParallel = 8;

struct EngineOptions {
  std::filesystem::path model_path;
  DeviceChoice device = DeviceChoice::kAuto;
  int32_t n_threads = 0;           // CPU threads; 0 = every core this process may use; <= kMaxThreads
  int32_t max_batch_tokens = 512;  // largest forward() batch (prompt chunk)
  KvTypeChoice kv_type = KvTypeChoice::kAuto;  // of every session's KV cache
  // CPU only: round activations to one 8-bit term (as llama.cpp and the CUDA GEMV do) instead of
  // the default two terms; for comparing the backends with the same activation rounding.
  bool cpu_int8_activations = false;
  model::LoadProgress progress;    // weights loaded so far (bytes), e.g. for a progress bar
  // Tensor parallelism (model/tensor_parallel.h): > 1 splits the model's heads, FFN columns and
  // vocabulary over that many ranks, each with its share of the weights and K/V. On the CPU the
  // ranks are CPU backends sharing n_threads; on CUDA they are devices 0..N-1, joined by NCCL.
  int32_t tensor_parallel = 1;
  // CUDA: the device of each rank (tensor_parallel of them; a device may repeat, e.g. to test the
  // split on one GPU); empty: devices 0..tensor_parallel-1.
  std::vector<int32_t> devices;
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> load(const EngineOptions& options);

  model::Model& model() { return *model_; }
  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  const format::GgufFile& file() const { return file_; }
  ops::Backend& backend() { return *backend_; }  // rank 0's with tensor parallelism
  // What the model runs on, for messages: the backend's name, and the rank count when it is split
  // ("cuda (NVIDIA H200), 2 tensor-parallel ranks").
  std::string device_name() const;
  double load_seconds() const { return load_seconds_; }
  // The KV cache element type sessions get: EngineOptions::kv_type resolved for the backend
  // (DType::kF32 or DType::kF16).
  DType kv_type() const { return kv_type_; }

  // A session whose KV cache has this engine's kv_type() (options.kv_type is replaced).
  Result<std::unique_ptr<runtime::Session>> new_session(const runtime::SessionOptions& options);

  // The context new_session(options) gets (options.n_ctx, or the model's training context when 0)
  // and the bytes of K/V storage it allocates for it, computed in 64 bits before anything is
  // allocated (an upper bound of KvCache::create's sizing), so that a caller can refuse an
  // absurd context with a message instead of attempting the allocation.
  int64_t session_n_ctx(const runtime::SessionOptions& options) const;
  // paged_sliding: the sliding-window layers are paged like the others instead of kept in rings
  // (an engine loop with its prefix cache on: KvCacheConfig::prefix_cache).
  uint64_t kv_cache_bytes(const runtime::SessionOptions& options, bool paged_sliding = false) const;

 private:
  Engine() = default;
  // EngineOptions::tensor_parallel > 1: the ranks' backends and collectives, then the model.
  Result<std::unique_ptr<model::Model>> load_tensor_parallel(const EngineOptions& options,
                                                            const model::LoadOptions& load);
  format::GgufFile file_;
  std::unique_ptr<ops::Backend> backend_;  // rank 0's with tensor parallelism
  // Tensor parallelism: ranks 1..N-1's backends and the ranks' collectives (declared before the
  // model, which uses them, so they outlive it).
  std::vector<std::unique_ptr<ops::Backend>> rank_backends_;
  std::unique_ptr<ops::CollectiveGroup> collectives_;
  std::unique_ptr<model::Model> model_;
  std::optional<tokenizer::Tokenizer> tokenizer_;
  double load_seconds_ = 0;
  DType kv_type_ = DType::kF32;
};

}  // namespace cera::api
