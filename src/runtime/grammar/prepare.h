// What a front end does with a grammar a user gave (GBNF text or a JSON Schema) before it
// submits a request: compile it (cached by text), take the shared tables for the model's
// vocabulary (cached), and compute every state's table now, on the caller's thread, so that the
// engine loop's first masks of the request cost what every later one does.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "core/status.h"
#include "runtime/grammar/json_schema.h"
#include "runtime/grammar/token_tables.h"
#include "runtime/grammar/vocab_index.h"

namespace cera::runtime::grammar {

enum class GrammarSyntax : uint8_t {
  kGbnf,        // llama.cpp's GBNF, start rule `root`
  kJsonSchema,  // a JSON Schema (json_schema.h says which keywords)
  kJsonObject,  // any JSON object (`text` is ignored): OpenAI's response_format json_object
};

struct PreparedGrammar {
  std::shared_ptr<const TokenTables> tables;
  double seconds = 0;  // compile + precompute, on this call (0 when everything was cached)
};

// Errors name the syntax and say what is wrong (gbnf_parser's line:column, json_schema's JSON
// pointer and keyword).
Result<PreparedGrammar> prepare_grammar(GrammarSyntax syntax, std::string_view text,
                                        const std::shared_ptr<const VocabIndex>& vocab,
                                        const JsonSchemaOptions& schema_options = {});

}  // namespace cera::runtime::grammar
