// The JSON reader for config.json, tokenizer.json and safetensors headers: strict RFC 8259, parsed
// by nlohmann-json (the project's one JSON library) into JsonValue, whose objects keep their
// members in file order (tokenizer vocabularies are looked up by key, but merges and added tokens
// are order-sensitive); errors name the line, column and byte offset.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace cera::format {

enum class JsonKind { kNull, kBool, kNumber, kString, kArray, kObject };

class JsonValue {
 public:
  using Member = std::pair<std::string, JsonValue>;

  JsonValue() = default;
  static JsonValue make_bool(bool b);
  static JsonValue make_number(double d, std::optional<int64_t> exact_int);
  static JsonValue make_string(std::string s);
  static JsonValue make_array(std::vector<JsonValue> items);
  static JsonValue make_object(std::vector<Member> members);

  JsonKind kind() const { return kind_; }
  bool is_null() const { return kind_ == JsonKind::kNull; }
  bool is_bool() const { return kind_ == JsonKind::kBool; }
  bool is_number() const { return kind_ == JsonKind::kNumber; }
  bool is_string() const { return kind_ == JsonKind::kString; }
  bool is_array() const { return kind_ == JsonKind::kArray; }
  bool is_object() const { return kind_ == JsonKind::kObject; }

  // Accessors return nullopt (or nullptr) on a kind mismatch, never throw.
  std::optional<bool> as_bool() const;
  std::optional<double> as_double() const;
  // Integers written without fraction or exponent that fit int64 ("3", "-7"); 3.0 is not one.
  std::optional<int64_t> as_int() const;
  const std::string* as_string() const;
  const std::vector<JsonValue>* as_array() const;
  const std::vector<Member>* as_object() const;

  // Object member by key (first match); nullptr when absent or when this is not an object.
  const JsonValue* find(std::string_view key) const;
  size_t size() const;  // elements of an array or members of an object; 0 otherwise

 private:
  JsonKind kind_ = JsonKind::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::optional<int64_t> int_;
  std::string string_;
  std::vector<JsonValue> array_;
  std::vector<Member> object_;
};

// Parses one JSON document (surrounding whitespace allowed, nothing else). Nesting deeper than
// 512 levels is refused so hostile input cannot exhaust the stack. Strings must be valid UTF-8;
// \u escapes including surrogate pairs are decoded, lone surrogates are errors.
// The byte offset of the first '[' or '{' that opens nesting level max_depth + 1 (brackets
// inside strings do not count), or std::string_view::npos when the text nests no deeper. A scan
// of the bytes, valid JSON or not: a caller can refuse deep nesting before any parse.
size_t json_nesting_past(std::string_view text, size_t max_depth);

Result<JsonValue> parse_json(std::string_view text);

// Reads and parses a file; errors are prefixed with the path.
Result<JsonValue> read_json_file(const std::string& path);

}  // namespace cera::format
