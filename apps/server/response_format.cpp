#include "response_format.h"

#include <fmt/format.h>

#include "runtime/grammar/prepare.h"

namespace cera::server {

namespace grammar = runtime::grammar;

std::variant<std::shared_ptr<const grammar::TokenTables>, ApiError> read_response_format(
    const Json& body, const std::shared_ptr<const grammar::VocabIndex>& vocab) {
  const auto it = body.find("response_format");
  if (it == body.end() || it->is_null()) return std::shared_ptr<const grammar::TokenTables>();
  const Json& rf = *it;
  if (!rf.is_object()) {
    return bad_request(fmt::format("'response_format' must be an object such as {{\"type\": \"json_object\"}}, not {}",
                                   json_type_name(rf)),
                       "response_format");
  }
  FieldReader r(rf, "response_format.");
  const std::optional<std::string> type = r.string("type");
  if (!r.ok()) return *r.error();
  if (!type) return bad_request("'response_format.type' is missing: text, json_object or json_schema", "response_format.type");
  grammar::GrammarSyntax syntax = grammar::GrammarSyntax::kJsonObject;
  std::string schema_text;
  if (*type == "text") return std::shared_ptr<const grammar::TokenTables>();
  if (*type == "json_schema") {
    const Json* js = r.get("json_schema");
    if (js == nullptr || !js->is_object()) {
      return bad_request("'response_format.json_schema' must be an object {\"name\": ..., \"schema\": {...}} with "
                         "type json_schema",
                         "response_format.json_schema");
    }
    FieldReader jr(*js, "response_format.json_schema.");
    const std::optional<std::string> name = jr.string("name", 64);
    jr.boolean("strict");
    jr.string("description");
    if (!jr.ok()) return *jr.error();
    if (!name || name->empty()) {
      return bad_request("'response_format.json_schema.name' is missing: give the schema a name (1 to 64 characters)",
                         "response_format.json_schema.name");
    }
    if (const Json* schema = jr.get("schema"); schema != nullptr) {
      if (!schema->is_object() && !schema->is_boolean()) {
        return bad_request(fmt::format("'response_format.json_schema.schema' must be a JSON Schema object, not {}",
                                       json_type_name(*schema)),
                           "response_format.json_schema.schema");
      }
      syntax = grammar::GrammarSyntax::kJsonSchema;
      schema_text = schema->dump();
    }
  } else if (*type != "json_object") {
    return bad_request(fmt::format("'response_format.type' is '{}': it must be text, json_object or json_schema",
                                   type->substr(0, 40)),
                       "response_format.type");
  }
  auto prepared = grammar::prepare_grammar(syntax, schema_text, vocab);
  if (!prepared.ok()) {
    return bad_request("'response_format.json_schema.schema' cannot be enforced: " + prepared.status().message(),
                       "response_format.json_schema.schema", "invalid_json_schema");
  }
  return prepared->tables;
}

}  // namespace cera::server
