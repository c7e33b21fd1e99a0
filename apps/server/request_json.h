// Reading a request body: JSON parsed by nlohmann-json (the project's one JSON library) behind a
// nesting limit, and FieldReader, which reads typed, range-checked fields and keeps the first
// error naming the field. The one decision: null is treated as absent (OpenAI's SDKs send null
// for "not given"), every other wrong type is an error, and unknown fields are ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "api_error.h"

namespace cera::server {

// Ordered: objects keep the order they were sent in (a JSON Schema's properties are the order its
// output must follow) and responses list fields in the order they are built.
using Json = nlohmann::ordered_json;

// The body as a JSON object. Errors (400): nesting deeper than max_depth (checked before the
// library builds anything), malformed JSON or invalid UTF-8 (with the library's position), a
// top level that is not an object.
std::variant<Json, ApiError> parse_request_body(std::string_view body, int max_depth);

// Compact JSON for a response; invalid UTF-8 (a token's partial character) becomes U+FFFD.
std::string dump(const Json& json);

// Fields of one JSON object. `prefix` names the object inside the request ("messages[2].").
class FieldReader {
 public:
  explicit FieldReader(const Json& object, std::string prefix = "") : object_(object), prefix_(std::move(prefix)) {}

  // The field when present and not null.
  const Json* get(std::string_view key) const;
  std::optional<bool> boolean(std::string_view key);
  std::optional<double> number(std::string_view key, double lo, double hi);
  std::optional<int64_t> integer(std::string_view key, int64_t lo, int64_t hi);
  std::optional<std::string> string(std::string_view key, size_t max_bytes = SIZE_MAX);

  // Records an error about `key` (the first one wins).
  void fail(std::string_view key, std::string message);
  void fail(ApiError error);
  bool ok() const { return !error_.has_value(); }
  const std::optional<ApiError>& error() const { return error_; }
  std::string name(std::string_view key) const { return prefix_ + std::string(key); }

 private:
  void wrong_type(std::string_view key, const char* expected, const Json& value);

  const Json& object_;
  std::string prefix_;
  std::optional<ApiError> error_;
};

// "a string", "an integer", ... for messages.
const char* json_type_name(const Json& value);

}  // namespace cera::server
