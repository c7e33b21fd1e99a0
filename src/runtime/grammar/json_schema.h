// JSON Schema -> GBNF (llama.cpp's syntax, root rule `root`) for constrained decoding.
// Objects keep the schema's property order (parsed with nlohmann::ordered_json); optional
// properties are a linear chain of rules, so grammar size is linear in the number of properties.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/status.h"

namespace cera::runtime::grammar {

// Where whitespace may appear between JSON tokens.
enum class JsonWhitespace {
  kCompact,   // none at all: the output is exactly json.dumps(separators=(",", ":"))
  kFlexible,  // up to max_whitespace of [ \t\n] between any two tokens (bounded, so a model
              // cannot loop on whitespace forever)
};

struct JsonSchemaOptions {
  JsonWhitespace whitespace = JsonWhitespace::kCompact;
  int max_whitespace = 4;  // only for kFlexible
  // Limits; exceeding one is an error that names it.
  std::size_t max_schema_bytes = 1 << 20;
  int max_depth = 64;             // nesting of subschemas
  std::size_t max_enum = 1024;    // values in one enum
  int max_integer_digits = 18;    // bounds of integer minimum/maximum (|bound| < 10^18)
  std::size_t max_repeat = 10000; // minLength/maxLength/minItems/maxItems and regex {m,n}
};

// Supported keywords: type (a name or an array of names: null, boolean, integer, number, string,
// object, array), properties, required, additionalProperties (false / true / a schema; ABSENT
// means no other properties, as in OpenAI's strict mode), items, prefixItems, enum, const,
// anyOf, oneOf (as anyOf: exclusivity is not enforced), allOf (only of object schemas, merged:
// a branch with additionalProperties false may not exclude another branch's properties;
// properties in order of appearance, required united; anything else is refused), $ref
// ("#", "#/$defs/x", "#/definitions/x", any local JSON pointer; recursion allowed), $defs,
// definitions, minLength, maxLength, pattern, minItems, maxItems, minimum / maximum /
// exclusiveMinimum / exclusiveMaximum on integers (exact digit-range rules; on numbers refused), format (date, time,
// date-time, uuid, email; any other format is refused rather than silently unconstrained).
// Ignored annotations: $schema, $id, title, description, examples, default, $comment.
// Any other keyword is refused: `"/properties/tags/uniqueItems": uniqueItems is not supported`.
//
// pattern: the regex subset is literals, escapes \d \D \w \W \s \S \. \\ \/ \- \t \n \r and
// escaped metacharacters, classes [...] / [^...] with ranges and the escapes above inside
// (\D \W \S only outside classes), `.`, groups ( ) and (?: ), |, quantifiers * + ? {m} {m,}
// {m,n} (greedy only), ^ only at the very start and $ only at the very end. Without ^ (or $)
// the pattern may be preceded (followed) by any text, as JSON Schema's search semantics say.
// Backreferences, lookaround, lazy quantifiers, \b, \p{..} and anchors elsewhere are refused.
// Characters that JSON must escape (" \ and controls) match only through literals and escapes;
// a negated class or `.` never produces them.
//
// Looser than the schema: with additionalProperties true or a schema, an additional property's
// key may repeat a listed property's key (the grammar does not exclude those keys), so a value
// the listed property would refuse can pass under its name; oneOf is anyOf.
//
// Strings: enum/const values match only in their canonical compact encoding (nlohmann's dump:
// raw UTF-8, \" \\ \b \f \n \r \t and \u00XX for other controls).
Result<std::string> json_schema_to_gbnf(std::string_view schema_json,
                                        const JsonSchemaOptions& options = {});

// Any JSON object (OpenAI's response_format json_object), compact.
std::string json_object_gbnf();

}  // namespace cera::runtime::grammar
