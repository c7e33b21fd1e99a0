#include "request_json.h"

#include <fmt/format.h>

#include <cmath>

#include "format/json.h"

namespace cera::server {

std::variant<Json, ApiError> parse_request_body(std::string_view body, int max_depth) {
  // Checked before the library builds anything: it parses iteratively, but a document nested
  // 100,000 deep would still cost a node per level before it could be refused.
  if (format::json_nesting_past(body, static_cast<size_t>(max_depth)) != std::string_view::npos) {
    return bad_request(fmt::format("the JSON body nests deeper than the server's limit of {} levels "
                                   "(--max-json-depth sets it)",
                                   max_depth),
                       "", "json_too_deep");
  }
  Json json;
  try {
    json = Json::parse(body.begin(), body.end());
  } catch (const Json::exception& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 9: ..." (or
    // out_of_range.406 "number overflow parsing '1e400'": a number no double holds).
    std::string what = e.what();
    if (const size_t at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
    return bad_request("the body is not valid JSON: " + what, "", "invalid_json");
  }
  if (!json.is_object()) return bad_request(fmt::format("the body must be a JSON object, not {}", json_type_name(json)));
  return json;
}

std::string dump(const Json& json) { return json.dump(-1, ' ', false, Json::error_handler_t::replace); }

const char* json_type_name(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a number";
    default: return "a value";
  }
}

const Json* FieldReader::get(std::string_view key) const {
  if (!object_.is_object()) return nullptr;
  const auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

void FieldReader::fail(std::string_view key, std::string message) {
  if (!error_) error_ = bad_request(std::move(message), name(key));
}

void FieldReader::fail(ApiError error) {
  if (!error_) error_ = std::move(error);
}

void FieldReader::wrong_type(std::string_view key, const char* expected, const Json& value) {
  fail(key, fmt::format("'{}' must be {}, not {}", name(key), expected, json_type_name(value)));
}

std::optional<bool> FieldReader::boolean(std::string_view key) {
  const Json* v = get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    wrong_type(key, "a boolean", *v);
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<double> FieldReader::number(std::string_view key, double lo, double hi) {
  const Json* v = get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) {
    wrong_type(key, "a number", *v);
    return std::nullopt;
  }
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    fail(key, fmt::format("'{}' is {}: it must be between {} and {}", name(key), v->dump(), lo, hi));
    return std::nullopt;
  }
  return d;
}

std::optional<int64_t> FieldReader::integer(std::string_view key, int64_t lo, int64_t hi) {
  const Json* v = get(key);
  if (v == nullptr) return std::nullopt;
  // 3.0 is accepted as 3 (JavaScript clients cannot tell them apart); 3.5 is not an integer.
  std::optional<int64_t> value;
  if (v->is_number_integer()) {
    value = v->get<int64_t>();
  } else if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u <= static_cast<uint64_t>(INT64_MAX)) value = static_cast<int64_t>(u);
  } else if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) value = static_cast<int64_t>(d);
    else if (!std::isfinite(d) || d != std::floor(d)) {
      wrong_type(key, "an integer", *v);
      return std::nullopt;
    }
  } else {
    wrong_type(key, "an integer", *v);
    return std::nullopt;
  }
  if (!value || *value < lo || *value > hi) {
    fail(key, fmt::format("'{}' is {}: it must be between {} and {}", name(key), v->dump(), lo, hi));
    return std::nullopt;
  }
  return value;
}

std::optional<std::string> FieldReader::string(std::string_view key, size_t max_bytes) {
  const Json* v = get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) {
    wrong_type(key, "a string", *v);
    return std::nullopt;
  }
  const auto& s = v->get_ref<const std::string&>();
  if (s.size() > max_bytes) {
    fail(key, fmt::format("'{}' is {} bytes, more than the {} allowed", name(key), s.size(), max_bytes));
    return std::nullopt;
  }
  return s;
}

}  // namespace cera::server
