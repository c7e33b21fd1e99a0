// JsonValue and its reader: nlohmann-json parses (strict RFC 8259, UTF-8 validated, surrogate
// pairs decoded, lone surrogates refused); a SAX handler builds the ordered JsonValue tree.
#include "format/json.h"

#include <nlohmann/json.hpp>

#include <climits>
#include <cstdint>

#include "core/read_file.h"

namespace cera::format {

JsonValue JsonValue::make_bool(bool b) {
  JsonValue v;
  v.kind_ = JsonKind::kBool;
  v.bool_ = b;
  return v;
}
JsonValue JsonValue::make_number(double d, std::optional<int64_t> exact_int) {
  JsonValue v;
  v.kind_ = JsonKind::kNumber;
  v.number_ = d;
  v.int_ = exact_int;
  return v;
}
JsonValue JsonValue::make_string(std::string s) {
  JsonValue v;
  v.kind_ = JsonKind::kString;
  v.string_ = std::move(s);
  return v;
}
JsonValue JsonValue::make_array(std::vector<JsonValue> items) {
  JsonValue v;
  v.kind_ = JsonKind::kArray;
  v.array_ = std::move(items);
  return v;
}
JsonValue JsonValue::make_object(std::vector<Member> members) {
  JsonValue v;
  v.kind_ = JsonKind::kObject;
  v.object_ = std::move(members);
  return v;
}

std::optional<bool> JsonValue::as_bool() const {
  if (kind_ != JsonKind::kBool) return std::nullopt;
  return bool_;
}
std::optional<double> JsonValue::as_double() const {
  if (kind_ != JsonKind::kNumber) return std::nullopt;
  return number_;
}
std::optional<int64_t> JsonValue::as_int() const {
  if (kind_ != JsonKind::kNumber) return std::nullopt;
  return int_;
}
const std::string* JsonValue::as_string() const { return kind_ == JsonKind::kString ? &string_ : nullptr; }
const std::vector<JsonValue>* JsonValue::as_array() const {
  return kind_ == JsonKind::kArray ? &array_ : nullptr;
}
const std::vector<JsonValue::Member>* JsonValue::as_object() const {
  return kind_ == JsonKind::kObject ? &object_ : nullptr;
}
const JsonValue* JsonValue::find(std::string_view key) const {
  if (kind_ != JsonKind::kObject) return nullptr;
  for (const Member& m : object_) {
    if (m.first == key) return &m.second;
  }
  return nullptr;
}
size_t JsonValue::size() const {
  if (kind_ == JsonKind::kArray) return array_.size();
  if (kind_ == JsonKind::kObject) return object_.size();
  return 0;
}

namespace {

constexpr size_t kMaxDepth = 512;

// nlohmann-json (the project's one JSON library) parses; this SAX handler builds JsonValue as it
// goes, keeping members in file order (duplicates too: find() takes the first), integers exact
// where they fit int64, and refusing nesting deeper than kMaxDepth before the library recurses.
class Builder final : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return put(JsonValue()); }
  bool boolean(bool b) override { return put(JsonValue::make_bool(b)); }
  bool number_integer(number_integer_t i) override { return put(JsonValue::make_number(static_cast<double>(i), i)); }
  bool number_unsigned(number_unsigned_t u) override {
    const bool fits = u <= static_cast<number_unsigned_t>(INT64_MAX);
    return put(JsonValue::make_number(static_cast<double>(u),
                                      fits ? std::optional<int64_t>(static_cast<int64_t>(u)) : std::nullopt));
  }
  bool number_float(number_float_t d, const string_t&) override { return put(JsonValue::make_number(d, std::nullopt)); }
  bool string(string_t& v) override { return put(JsonValue::make_string(std::move(v))); }
  bool binary(binary_t&) override { return false; }  // not JSON text: the parser never produces it
  bool start_object(std::size_t) override { return open(false); }
  bool key(string_t& k) override {
    stack_.back().key = std::move(k);
    return true;
  }
  bool end_object() override {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    return put(JsonValue::make_object(std::move(f.members)));
  }
  bool start_array(std::size_t) override { return open(true); }
  bool end_array() override {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    return put(JsonValue::make_array(std::move(f.items)));
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    // "[json.exception.parse_error.101] parse error at line L, column C: what" -> "parse error at ..."
    std::string what = e.what();
    if (const size_t at = what.find("] "); at != std::string::npos) what.erase(0, at + 2);
    error_ = corrupt("JSON: " + what + " (byte " + std::to_string(position > 0 ? position - 1 : 0) + ")");
    return false;
  }

  Result<JsonValue> result(std::string_view text) && {
    if (!error_.ok()) return error_;
    if (too_deep_) {
      return corrupt("JSON: nesting deeper than " + std::to_string(kMaxDepth) + " levels at " + where(text, depth_at_));
    }
    return std::move(root_);
  }
  // Where the parse stopped without an error of the library's (the depth limit).
  void stopped_at(size_t byte) { depth_at_ = byte; }
  bool too_deep() const { return too_deep_; }

 private:
  struct Frame {
    bool array = false;
    std::vector<JsonValue> items;
    std::vector<JsonValue::Member> members;
    std::string key;
  };
  bool open(bool array) {
    if (stack_.size() >= kMaxDepth) {
      too_deep_ = true;
      return false;
    }
    stack_.push_back({.array = array});
    return true;
  }
  bool put(JsonValue v) {
    if (stack_.empty()) {
      root_ = std::move(v);
    } else if (stack_.back().array) {
      stack_.back().items.push_back(std::move(v));
    } else {
      stack_.back().members.emplace_back(std::move(stack_.back().key), std::move(v));
    }
    return true;
  }
  static std::string where(std::string_view text, size_t byte) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < byte && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(col) + " (byte " + std::to_string(byte) + ")";
  }

  std::vector<Frame> stack_;
  JsonValue root_;
  Status error_;
  bool too_deep_ = false;
  size_t depth_at_ = 0;
};

}  // namespace

size_t json_nesting_past(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if ((c == '[' || c == '{') && ++depth > max_depth) {
      return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

Result<JsonValue> parse_json(std::string_view text) {
  Builder b;
  nlohmann::json::sax_parse(text.begin(), text.end(), &b, nlohmann::json::input_format_t::json, /*strict=*/true);
  // The opening bracket past the limit: the first position where the nesting exceeds it.
  if (b.too_deep()) b.stopped_at(json_nesting_past(text, kMaxDepth));
  return std::move(b).result(text);
}

Result<JsonValue> read_json_file(const std::string& path) {
  // The largest JSON files of a checkpoint are tokenizer.json files of a few tens of MB.
  constexpr uint64_t kMaxJsonBytes = 512ull << 20;
  CERA_ASSIGN_OR_RETURN(std::string text, read_file(path, kMaxJsonBytes));
  auto v = parse_json(text);
  if (!v.ok()) return v.status().with_context(path);
  return v;
}

}  // namespace cera::format
