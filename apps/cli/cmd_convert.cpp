// `cera convert`: foreign checkpoints to GGUF. A Hugging Face folder (HF_DIR: config.json +
// safetensors + tokenizer files) or a llama2.c checkpoint (--llama2c CHECKPOINT --tokenizer TOK).
#include <cstdio>

#include "cleanup_on_signal.h"
#include "arg_checks.h"
#include "commands.h"
#include "convert/hf_convert.h"
#include "convert/quantize.h"
#include "format/llama2c_import.h"
#include "progress.h"

namespace cera::cli {
namespace {

void fail(const Status& st) {
  std::fprintf(stderr, "cera convert: %s\n", st.to_string().c_str());
  throw CLI::RuntimeError(1);
}

}  // namespace

void register_convert(CLI::App& app) {
  auto* cmd = app.add_subcommand("convert", "Convert a checkpoint (Hugging Face folder or llama2.c) to GGUF");
  struct Options {
    std::string hf_dir, llama2c, tokenizer, output, name, type = "f16";
    int threads = 0;
  };
  auto opts = std::make_shared<Options>();
  cmd->add_option("HF_DIR", opts->hf_dir, "Hugging Face checkpoint folder (config.json, *.safetensors)")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--llama2c", opts->llama2c, "llama2.c checkpoint (model.bin)")->check(CLI::ExistingFile);
  cmd->add_option("--tokenizer", opts->tokenizer, "llama2.c tokenizer.bin")->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", opts->output, "GGUF file to write")->required();
  cmd->add_option("--name", opts->name, "general.name (default: the checkpoint's folder or file name)");
  cmd->add_option("--type", opts->type, "matrix type for HF_DIR: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k")
      ->capture_default_str();
  cmd->add_option("-t,--threads", opts->threads, "threads for conversion (default: all)")->check(threads_range());
  cmd->callback([opts] {
    remove_partial_outputs_on_signal();
    if (!opts->hf_dir.empty() && !opts->llama2c.empty()) {
      throw CLI::ValidationError("convert", "give one source: HF_DIR or --llama2c");
    }
    if (!opts->hf_dir.empty()) {
      const auto type = dtype_from_name(opts->type);
      if (!type || !convert::is_output_type(*type)) throw CLI::ValidationError("--type", "unsupported type '" + opts->type + "'");
      ProgressBar bar("writing " + opts->output);
      auto report = convert::convert_hf(
          {.dir = opts->hf_dir, .output = opts->output, .type = *type, .name = opts->name, .n_threads = opts->threads},
          [&](uint64_t done, uint64_t total) { bar.update(done, total); });
      if (!report.ok()) fail(report.status());
      for (const std::string& note : report->notes) std::fprintf(stderr, "note: %s\n", note.c_str());
      std::fprintf(stderr, "wrote %s (%s, %llu tensors, %s)\n", opts->output.c_str(), report->gguf_arch.c_str(),
                   static_cast<unsigned long long>(report->n_tensors), std::string(dtype_name(*type)).c_str());
      return;
    }
    if (opts->llama2c.empty()) throw CLI::ValidationError("convert", "give a source: HF_DIR or --llama2c CHECKPOINT");
    if (opts->tokenizer.empty()) throw CLI::ValidationError("--tokenizer", "required with --llama2c");
    ProgressBar bar("writing " + opts->output);
    const Status st = format::convert_llama2c(
        {.checkpoint = opts->llama2c, .tokenizer = opts->tokenizer, .output = opts->output, .name = opts->name},
        [&](uint64_t done, uint64_t total) { bar.update(done, total); });
    if (!st.ok()) fail(st);
    std::fprintf(stderr, "wrote %s\n", opts->output.c_str());
  });
}

}  // namespace cera::cli
