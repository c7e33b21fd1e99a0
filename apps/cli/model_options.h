// Options shared by every command that loads a model (-m, --device, --threads, -c, -b, --kv-type,
// --cpu-activations, --tensor-parallel), each range-checked (arg_checks.h), and the functions that turn them into an
// Engine and a Session, printing the error and failing the command.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "api/engine.h"
#include "runtime/engine/engine_loop.h"
#include "commands.h"

namespace cera::cli {

inline constexpr int64_t kMaxBatch = 65536;  // -b: far beyond any useful prompt chunk

struct ModelOptions {
  std::string model;
  std::string device = "auto";
  int threads = 0;
  int ctx = 0;
  int batch = 512;
  std::string kv_type = "auto";
  std::string cpu_activations = "int8x2";
  int tensor_parallel = 0;     // 0: one rank, or one per --devices entry
  std::vector<int32_t> devices;  // CUDA devices of the ranks
};

void add_model_options(CLI::App* cmd, ModelOptions& opts);
// Loads the engine or prints "cera CMD: error" and throws CLI::RuntimeError(1). Warns on stderr
// when --threads is above the cores this process may use.
std::unique_ptr<api::Engine> load_engine_or_exit(const char* command, const ModelOptions& opts);
// A session, or the error. Before allocating, a context whose KV cache needs more than this host's
// memory (CPU backend) is refused with a message naming the context, the bytes, the model's
// training context and `ctx_option`, the option(s) that set the context ("-c" by default).
std::unique_ptr<runtime::Session> new_session_or_exit(const char* command, api::Engine& engine,
                                                      const runtime::SessionOptions& options,
                                                      const char* ctx_option = "-c");
// The engine loop of one conversation (`cera run`, `cera chat`: one request at a time, a KV pool
// of one context), or the error, with the same checks and messages as new_session_or_exit.
std::unique_ptr<runtime::EngineLoop> new_loop_or_exit(const char* command, api::Engine& engine, const ModelOptions& model,
                                                      const char* ctx_option = "-c");
[[noreturn]] void fail(const char* command, const Status& status);
// This machine's memory in bytes (0 when the system does not say), for refusing KV caches that cannot fit.
uint64_t physical_memory_bytes();

}  // namespace cera::cli
