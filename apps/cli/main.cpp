// `cera`: the command-line front end. Each subcommand lives in its own cmd_*.cpp.
#include <cstdio>
#include <exception>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"cera: run large language models stored as GGUF files"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cera 0.1.0");
  cera::cli::register_run(app);
  cera::cli::register_chat(app);
  cera::cli::register_bench(app);
  cera::cli::register_logits(app);
  cera::cli::register_inspect(app);
  cera::cli::register_tokenize(app);
  cera::cli::register_convert(app);
  cera::cli::register_quant_error(app);
  cera::cli::register_synth(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cera: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
