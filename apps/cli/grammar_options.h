// --grammar FILE (llama.cpp's GBNF) and --json-schema FILE for the commands that generate (run,
// chat): the reply is constrained to the grammar (runtime/grammar). The file is read and the
// grammar compiled and precomputed for the model's vocabulary before anything is generated, so a
// bad grammar fails at once with the file's name and the position of the error.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "runtime/grammar/token_tables.h"
#include "tokenizer/tokenizer.h"

namespace cera::cli {

struct GrammarOptions {
  std::string grammar_file;
  std::string json_schema_file;
  bool any() const { return !grammar_file.empty() || !json_schema_file.empty(); }
};

void add_grammar_options(CLI::App* cmd, GrammarOptions& o);

// The tables for the reply's constraint, or null without one; exits with the error on failure.
std::shared_ptr<const runtime::grammar::TokenTables> load_grammar_or_exit(const char* command, const GrammarOptions& o,
                                                                          const tokenizer::Tokenizer& tokenizer,
                                                                          int64_t max_input_mib);

}  // namespace cera::cli
