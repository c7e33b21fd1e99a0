// `cera convert`: foreign checkpoints to GGUF. Today: llama2.c checkpoints (--llama2c).
#include <cstdio>

#include "commands.h"
#include "format/llama2c_import.h"
#include "progress.h"

namespace cera::cli {

void register_convert(CLI::App& app) {
  auto* cmd = app.add_subcommand("convert", "Convert a checkpoint to GGUF");
  struct Options {
    std::string llama2c, tokenizer, output, name;
  };
  auto opts = std::make_shared<Options>();
  cmd->add_option("--llama2c", opts->llama2c, "llama2.c checkpoint (model.bin)")->check(CLI::ExistingFile);
  cmd->add_option("--tokenizer", opts->tokenizer, "llama2.c tokenizer.bin")->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", opts->output, "GGUF file to write")->required();
  cmd->add_option("--name", opts->name, "general.name (default: the checkpoint's file name)");
  cmd->callback([opts] {
    if (opts->llama2c.empty()) throw CLI::ValidationError("convert", "give a source: --llama2c CHECKPOINT");
    if (opts->tokenizer.empty()) throw CLI::ValidationError("--tokenizer", "required with --llama2c");
    ProgressBar bar("writing " + opts->output);
    const Status st = format::convert_llama2c(
        {.checkpoint = opts->llama2c, .tokenizer = opts->tokenizer, .output = opts->output, .name = opts->name},
        [&](uint64_t done, uint64_t total) { bar.update(done, total); });
    if (!st.ok()) {
      std::fprintf(stderr, "cera convert: %s\n", st.to_string().c_str());
      throw CLI::RuntimeError(1);
    }
    std::fprintf(stderr, "wrote %s\n", opts->output.c_str());
  });
}

}  // namespace cera::cli
