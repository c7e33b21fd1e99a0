#include "api/engine.h"

#include <chrono>

#include "ops/cpu/cpu_backend.h"

namespace cera::api {

std::optional<DeviceChoice> device_choice_from_name(std::string_view name) {
  if (name == "cpu") return DeviceChoice::kCpu;
  if (name == "cuda") return DeviceChoice::kCuda;
  if (name == "auto") return DeviceChoice::kAuto;
  return std::nullopt;
}

Result<std::unique_ptr<Engine>> Engine::load(const EngineOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Engine> engine(new Engine());
  CERA_ASSIGN_OR_RETURN(engine->file_, format::GgufFile::open(options.model_path));
  // The CUDA backend is not part of this build yet: `auto` means CPU, `cuda` is an error.
  if (options.device == DeviceChoice::kCuda) {
    return unsupported("--device cuda: this build of cera has no CUDA backend yet (use --device cpu)");
  }
  engine->backend_ = ops::make_cpu_backend({.n_threads = options.n_threads});
  auto tok = tokenizer::Tokenizer::from_gguf(engine->file_);
  if (!tok.ok()) return tok.status().with_context(options.model_path.string());
  engine->tokenizer_.emplace(std::move(tok).value());
  auto model = model::load_model(engine->file_, *engine->backend_, {.max_batch_tokens = options.max_batch_tokens});
  if (!model.ok()) return model.status().with_context(options.model_path.string());
  engine->model_ = std::move(model).value();
  engine->load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return engine;
}

Result<std::unique_ptr<runtime::Session>> Engine::new_session(const runtime::SessionOptions& options) {
  return runtime::Session::create(*model_, *tokenizer_, options);
}

}  // namespace cera::api
