// Every `cera` subcommand registers itself on the root CLI11 app through one function here;
// main.cpp only builds the root and dispatches. One file per command: cmd_<name>.cpp.
#pragma once

#include <CLI/CLI.hpp>

namespace cera::cli {

void register_inspect(CLI::App& app);     // cmd_inspect.cpp
void register_tokenize(CLI::App& app);    // cmd_tokenize.cpp
void register_convert(CLI::App& app);     // cmd_convert.cpp
void register_quant_error(CLI::App& app); // cmd_quant_error.cpp
void register_synth(CLI::App& app);       // cmd_synth.cpp
void register_run(CLI::App& app);         // cmd_run.cpp
void register_logits(CLI::App& app);      // cmd_logits.cpp
void register_bench(CLI::App& app);       // cmd_bench.cpp
void register_chat(CLI::App& app);        // cmd_chat.cpp
void register_serve(CLI::App& app);       // cmd_serve.cpp
void register_embed(CLI::App& app);       // cmd_embed.cpp

}  // namespace cera::cli
