// OpenAI's response_format: "text" (free), "json_object" (any JSON object) or "json_schema"
// ({"name", "schema", "strict", "description"}: JSON valid under the schema). A grammar is
// compiled and its tables precomputed here, on the HTTP thread, so that the engine loop never
// waits for them; compiled grammars and tables are cached by text. The one decision: a schema is
// enforced whether "strict" is true or false (OpenAI treats false as a hint; an engine that can
// guarantee the shape should), and a schema cera cannot convert is refused with the JSON pointer
// and keyword at fault rather than dropped.
#pragma once

#include <memory>
#include <optional>

#include "api_error.h"
#include "request_json.h"
#include "runtime/grammar/token_tables.h"
#include "runtime/grammar/vocab_index.h"

namespace cera::server {

// The tables of the request's response_format (null: free text), or the refusal.
std::variant<std::shared_ptr<const runtime::grammar::TokenTables>, ApiError> read_response_format(
    const Json& body, const std::shared_ptr<const runtime::grammar::VocabIndex>& vocab);

}  // namespace cera::server
