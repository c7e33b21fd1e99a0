// `cera synth`: random-weight benchmark models of named shapes (PERFORMANCE.md), optionally with
// the vocabulary of a real GGUF, written streaming and quantized on every core.
#include <chrono>
#include <cstdio>

#include "cleanup_on_signal.h"
#include "arg_checks.h"
#include "commands.h"
#include "convert/quantize.h"
#include "convert/synth.h"
#include "progress.h"

namespace cera::cli {

void register_synth(CLI::App& app) {
  auto* cmd = app.add_subcommand("synth", "Write a random-weight model of a named shape (for benchmarks)");
  struct Options {
    std::string arch, shape, type = "q4_0", output, vocab_from;
    uint64_t seed = 42;
    int threads = 0;
  };
  auto opts = std::make_shared<Options>();
  std::string shapes;
  for (const std::string& s : convert::synth_shape_names()) shapes += (shapes.empty() ? "" : ", ") + s;
  cmd->add_option("--arch", opts->arch, "architecture: llama, lfm2, qwen3moe (default: the shape's own)");
  cmd->add_option("--shape", opts->shape, "shape: " + shapes)->required();
  cmd->add_option("--type", opts->type, "matrix type: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k")
      ->capture_default_str();
  cmd->add_option("-o,--output", opts->output, "GGUF file to write")->required();
  cmd->add_option("--vocab-from", opts->vocab_from, "GGUF whose tokenizer.* keys (and vocabulary size) to use")
      ->check(CLI::ExistingFile);
  cmd->add_option("--seed", opts->seed, "random seed")->capture_default_str();
  cmd->add_option("-t,--threads", opts->threads, "threads (default: all)")->check(threads_range());
  cmd->callback([opts] {
    remove_partial_outputs_on_signal();
    std::optional<convert::SynthArch> arch;
    if (!opts->arch.empty()) {
      arch = convert::synth_arch_from_name(opts->arch);
      if (!arch) {
        throw CLI::ValidationError("--arch", "unsupported architecture '" + opts->arch + "' (supported: llama, lfm2, qwen3moe)");
      }
    }
    const auto type = dtype_from_name(opts->type);
    if (!type || !convert::is_output_type(*type)) throw CLI::ValidationError("--type", "unsupported type '" + opts->type + "'");
    const auto start = std::chrono::steady_clock::now();
    ProgressBar bar("synth " + opts->shape + " " + opts->type);
    auto report = convert::synth_model({.arch = arch,
                                        .shape = opts->shape,
                                        .type = *type,
                                        .output = opts->output,
                                        .vocab_from = opts->vocab_from,
                                        .seed = opts->seed,
                                        .n_threads = opts->threads},
                                       [&](uint64_t done, uint64_t total) { bar.update(done, total); });
    if (!report.ok()) {
      std::fprintf(stderr, "cera synth: %s\n", report.status().to_string().c_str());
      throw CLI::RuntimeError(1);
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (const std::string& note : report->notes) std::fprintf(stderr, "note: %s\n", note.c_str());
    std::fprintf(stderr, "wrote %s: %s %s, vocab %u, %.3f B parameters, %.2f GB of tensors, %.1f s\n",
                 opts->output.c_str(), opts->shape.c_str(), opts->type.c_str(), report->n_vocab,
                 static_cast<double>(report->n_params) / 1e9, static_cast<double>(report->n_bytes) / 1e9, secs);
  });
}

}  // namespace cera::cli
