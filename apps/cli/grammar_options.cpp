#include "grammar_options.h"

#include <fmt/format.h>

#include "model_options.h"
#include "runtime/grammar/prepare.h"
#include "text_input.h"

namespace cera::cli {

void add_grammar_options(CLI::App* cmd, GrammarOptions& o) {
  auto* g = cmd->add_option("--grammar", o.grammar_file,
                            "constrain the reply to a GBNF grammar (llama.cpp's syntax, start rule `root`) read from "
                            "this file");
  auto* s = cmd->add_option("--json-schema", o.json_schema_file,
                            "constrain the reply to JSON valid under the JSON Schema in this file (compact: no "
                            "whitespace between tokens; the README lists the keywords)");
  g->excludes(s);
  s->excludes(g);
}

std::shared_ptr<const runtime::grammar::TokenTables> load_grammar_or_exit(const char* command, const GrammarOptions& o,
                                                                          const tokenizer::Tokenizer& tokenizer,
                                                                          int64_t max_input_mib) {
  if (!o.any()) return nullptr;
  namespace grammar = runtime::grammar;
  const bool schema = !o.json_schema_file.empty();
  const std::string& path = schema ? o.json_schema_file : o.grammar_file;
  auto text = read_text_input(command, path, max_input_mib);
  if (!text.ok()) fail(command, text.status());
  auto prepared = grammar::prepare_grammar(schema ? grammar::GrammarSyntax::kJsonSchema : grammar::GrammarSyntax::kGbnf,
                                           *text, grammar::VocabIndex::from_tokenizer(tokenizer));
  if (!prepared.ok()) {
    fail(command, prepared.status().with_context(fmt::format("{} {}", schema ? "--json-schema" : "--grammar", path)));
  }
  return prepared->tables;
}

}  // namespace cera::cli
