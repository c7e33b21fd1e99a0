// Options shared by every command that loads a model (-m, --device, --threads, -c, -b, --kv-type,
// --cpu-activations) and the
// one function that turns them into an Engine, printing the error and failing the command.
#pragma once

#include <memory>
#include <string>

#include "api/engine.h"
#include "commands.h"

namespace cera::cli {

struct ModelOptions {
  std::string model;
  std::string device = "auto";
  int threads = 0;
  int ctx = 0;
  int batch = 512;
  std::string kv_type = "auto";
  std::string cpu_activations = "int8x2";
};

void add_model_options(CLI::App* cmd, ModelOptions& opts);
// Loads the engine or prints "cera CMD: error" and throws CLI::RuntimeError(1).
std::unique_ptr<api::Engine> load_engine_or_exit(const char* command, const ModelOptions& opts);
std::unique_ptr<runtime::Session> new_session_or_exit(const char* command, api::Engine& engine,
                                                      const runtime::SessionOptions& options);
[[noreturn]] void fail(const char* command, const Status& status);

}  // namespace cera::cli
