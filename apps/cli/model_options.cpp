#include "model_options.h"

#include <cstdio>
#include <filesystem>

#include "progress.h"

namespace cera::cli {

void add_model_options(CLI::App* cmd, ModelOptions& opts) {
  cmd->add_option("-m,--model", opts.model, "GGUF model file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--device", opts.device, "cpu, cuda or auto")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  cmd->add_option("-t,--threads", opts.threads, "CPU threads (0: all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_option("-c,--ctx-size", opts.ctx, "context size in tokens (0: the model's)")->check(CLI::NonNegativeNumber);
  cmd->add_option("-b,--batch-size", opts.batch, "prompt tokens per forward pass")->check(CLI::PositiveNumber);
  cmd->add_option("--kv-type", opts.kv_type,
                  "KV cache element type: f16 (half the memory), f32 or auto (f16 on cuda, where it is the "
                  "faster one; f32 on the cpu, where the accuracy results are made)")
      ->check(CLI::IsMember({"f16", "f32", "auto"}));
  cmd->add_option("--cpu-activations", opts.cpu_activations,
                  "CPU rounding of activations for quantized weights: int8x2 (two 8-bit terms, default) or "
                  "int8 (one, as llama.cpp and the CUDA GEMV: for comparing backends)")
      ->check(CLI::IsMember({"int8", "int8x2"}));
}

void fail(const char* command, const Status& status) {
  std::fprintf(stderr, "cera %s: %s\n", command, status.to_string().c_str());
  throw CLI::RuntimeError(1);
}

std::unique_ptr<api::Engine> load_engine_or_exit(const char* command, const ModelOptions& opts) {
  ProgressBar bar("loading " + std::filesystem::path(opts.model).filename().string());
  auto engine = api::Engine::load({.model_path = opts.model,
                                   .device = *api::device_choice_from_name(opts.device),
                                   .n_threads = opts.threads,
                                   .max_batch_tokens = opts.batch,
                                   .kv_type = *api::kv_type_choice_from_name(opts.kv_type),
                                   .cpu_int8_activations = opts.cpu_activations == "int8",
                                   .progress = [&bar](uint64_t done, uint64_t total) { bar.update(done, total); }});
  if (!engine.ok()) fail(command, engine.status());
  return std::move(engine).value();
}

std::unique_ptr<runtime::Session> new_session_or_exit(const char* command, api::Engine& engine,
                                                      const runtime::SessionOptions& options) {
  auto session = engine.new_session(options);
  if (!session.ok()) fail(command, session.status());
  return std::move(session).value();
}

}  // namespace cera::cli
