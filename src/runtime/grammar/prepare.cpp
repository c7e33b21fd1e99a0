#include "runtime/grammar/prepare.h"

#include <chrono>
#include <string>

#include "runtime/grammar/grammar.h"

namespace cera::runtime::grammar {

Result<PreparedGrammar> prepare_grammar(GrammarSyntax syntax, std::string_view text,
                                        const std::shared_ptr<const VocabIndex>& vocab,
                                        const JsonSchemaOptions& schema_options) {
  const auto start = std::chrono::steady_clock::now();
  std::string gbnf;
  switch (syntax) {
    case GrammarSyntax::kGbnf: gbnf = text; break;
    case GrammarSyntax::kJsonSchema: {
      auto converted = json_schema_to_gbnf(text, schema_options);
      if (!converted.ok()) return converted.status().with_context("the JSON schema");
      gbnf = std::move(converted).value();
      break;
    }
    case GrammarSyntax::kJsonObject: gbnf = json_object_gbnf(); break;
  }
  auto compiled = compile_gbnf(gbnf);
  if (!compiled.ok()) {
    return compiled.status().with_context(syntax == GrammarSyntax::kGbnf ? "the grammar"
                                                                         : "the grammar made from the JSON schema");
  }
  PreparedGrammar out{.tables = token_tables_for(std::move(compiled).value(), vocab)};
  out.tables->precompute_all();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace cera::runtime::grammar
