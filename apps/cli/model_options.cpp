#include "model_options.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "arg_checks.h"
#include "progress.h"

namespace cera::cli {
uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

namespace {

double gib(uint64_t bytes) { return static_cast<double>(bytes) / (1ull << 30); }

}  // namespace

void add_model_options(CLI::App* cmd, ModelOptions& opts) {
  cmd->add_option("-m,--model", opts.model, "GGUF model file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--device", opts.device, "cpu, cuda or auto")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  cmd->add_option("-t,--threads", opts.threads, "CPU threads (0: all cores)")->check(threads_range());
  cmd->add_option("-c,--ctx-size", opts.ctx, "context size in tokens (0: the model's)")
      ->check(int_range(0, kInt32Max, "0: the model's training context"));
  cmd->add_option("-b,--batch-size", opts.batch, "prompt tokens per forward pass")->check(int_range(1, kMaxBatch));
  cmd->add_option("--kv-type", opts.kv_type,
                  "KV cache element type: f16 (half the memory), f32 or auto (f16 on cuda, where it is the "
                  "faster one; f32 on the cpu, where the accuracy results are made)")
      ->check(CLI::IsMember({"f16", "f32", "auto"}));
  cmd->add_option("--cpu-activations", opts.cpu_activations,
                  "CPU rounding of activations for quantized weights: int8x2 (two 8-bit terms, default) or "
                  "int8 (one, as llama.cpp and the CUDA GEMV: for comparing backends)")
      ->check(CLI::IsMember({"int8", "int8x2"}));
  cmd->add_option("--tensor-parallel", opts.tensor_parallel,
                  "split the model's heads, FFN and vocabulary over N ranks (cuda: GPUs 0..N-1; cpu: N backends "
                  "sharing --threads); each holds 1/N of the weights and of the KV cache")
      ->check(int_range(1, api::kMaxTensorParallel));
  cmd->add_option("--devices", opts.devices,
                  "CUDA devices of the tensor-parallel ranks, e.g. 0,1 (default: 0..N-1; alone it sets N)")
      ->delimiter(',')
      ->check(int_range(0, 1024));
}

void fail(const char* command, const Status& status) {
  std::fprintf(stderr, "cera %s: %s\n", command, status.to_string().c_str());
  throw CLI::RuntimeError(1);
}

std::unique_ptr<api::Engine> load_engine_or_exit(const char* command, const ModelOptions& opts) {
  if (opts.threads > cores()) {
    fmt::print(stderr,
               "cera {}: warning: --threads {} is more than the {} cores this process may use; more threads than "
               "cores usually make generation slower\n",
               command, opts.threads, cores());
  }
  ProgressBar bar("loading " + std::filesystem::path(opts.model).filename().string());
  auto engine = api::Engine::load({.model_path = opts.model,
                                   .device = *api::device_choice_from_name(opts.device),
                                   .n_threads = opts.threads,
                                   .max_batch_tokens = opts.batch,
                                   .kv_type = *api::kv_type_choice_from_name(opts.kv_type),
                                   .cpu_int8_activations = opts.cpu_activations == "int8",
                                   .progress = [&bar](uint64_t done, uint64_t total) { bar.update(done, total); },
                                   .tensor_parallel = opts.tensor_parallel > 0 ? opts.tensor_parallel
                                                      : std::max<int>(1, static_cast<int>(opts.devices.size())),
                                   .devices = opts.devices});
  if (!engine.ok()) fail(command, engine.status());
  return std::move(engine).value();
}

namespace {

// The context line of both helpers' errors; fails before allocating a KV cache larger than the
// host's memory (CPU backend): there an absurd allocation may even succeed (overcommit) and fail
// later, page by page; a device refuses it at once, with the byte count.
std::string check_context(const char* command, api::Engine& engine, const runtime::SessionOptions& options,
                          const char* ctx_option, bool paged_sliding = false) {
  const int64_t n_ctx = engine.session_n_ctx(options);
  const int32_t n_ctx_train = engine.model().hparams().n_ctx_train;
  const uint64_t kv = engine.kv_cache_bytes(options, paged_sliding);
  const std::string context =
      fmt::format("a context of {} tokens ({}{}; the model was trained with {})", n_ctx,
                  options.n_ctx > 0 ? ctx_option : "the model's training context", options.n_ctx > 0 ? " sets it" : "",
                  n_ctx_train);
  const uint64_t memory = physical_memory_bytes();
  if (engine.backend().device() == Device::kCpu && memory > 0 && kv > memory) {
    fail(command, out_of_range(fmt::format("{}: its KV cache would need {:.1f} GiB, more than the {:.1f} GiB of "
                                           "memory this machine has: use a smaller {}",
                                           context, gib(kv), gib(memory), ctx_option)));
  }
  return fmt::format("{}, KV cache {:.1f} GiB (a smaller {} needs less)", context, gib(kv), ctx_option);
}

}  // namespace

std::unique_ptr<runtime::Session> new_session_or_exit(const char* command, api::Engine& engine,
                                                      const runtime::SessionOptions& options, const char* ctx_option) {
  const std::string context = check_context(command, engine, options, ctx_option);
  auto session = engine.new_session(options);
  if (!session.ok()) fail(command, session.status().with_context(context));
  return std::move(session).value();
}

std::unique_ptr<runtime::EngineLoop> new_loop_or_exit(const char* command, api::Engine& engine, const ModelOptions& model,
                                                      const char* ctx_option) {
  const runtime::SessionOptions sized{.n_ctx = model.ctx, .n_batch = model.batch};
  // The loop's prefix cache pages the sliding-window layers too (EngineLoopOptions::prefix_cache).
  const std::string context = check_context(command, engine, sized, ctx_option, /*paged_sliding=*/true);
  const auto n_ctx = static_cast<int32_t>(engine.session_n_ctx(sized));
  auto loop = runtime::EngineLoop::create(engine.model(), engine.tokenizer(),
                                          {.n_ctx = n_ctx,
                                           .max_batch_tokens = model.batch,
                                           .max_running = 1,
                                           .max_waiting = 1,
                                           .kv_tokens = n_ctx,
                                           .kv_type = engine.kv_type()});
  if (!loop.ok()) fail(command, loop.status().with_context(context));
  return std::move(loop).value();
}

}  // namespace cera::cli
