// `cera`: the command-line front end. Each subcommand lives in its own cmd_*.cpp. The exit status
// is the command's, or 1 when writing to stdout failed (output.h), or CLI11's for a usage error.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "commands.h"
#include "output.h"

namespace {

// "run, chat, ...": the names of the registered commands, in registration order.
std::string command_list(CLI::App& app) {
  std::string names;
  for (const CLI::App* sub : app.get_subcommands({}))
    names += (names.empty() ? "" : ", ") + sub->get_name();
  return names;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cera: run large language models stored as GGUF files"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cera 0.1.0");
  cera::cli::register_run(app);
  cera::cli::register_chat(app);
  cera::cli::register_serve(app);
  cera::cli::register_embed(app);
  cera::cli::register_bench(app);
  cera::cli::register_logits(app);
  cera::cli::register_inspect(app);
  cera::cli::register_tokenize(app);
  cera::cli::register_convert(app);
  cera::cli::register_quant_error(app);
  cera::cli::register_synth(app);
  // CLI11 says only "A subcommand is required" for a missing or misspelt command: name the word
  // and the commands there are.
  if (argc < 2 || argv[1][0] != '-') {
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({}))
      known = known || (argc >= 2 && sub->check_name(argv[1]));
    if (!known) {
      if (argc < 2) {
        std::fprintf(stderr, "cera: give a command: %s (cera --help describes them)\n",
                     command_list(app).c_str());
      } else {
        std::fprintf(
            stderr,
            "cera: unknown command '%s'; the commands are: %s (cera --help describes them)\n",
            argv[1], command_list(app).c_str());
      }
      return static_cast<int>(CLI::ExitCodes::RequiredError);
    }
  }
  int status = 0;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    status = app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cera: internal error: %s\n", e.what());
    status = 3;
  }
  return cera::cli::finish_stdout(status);
}
