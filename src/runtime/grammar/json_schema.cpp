// The JSON Schema converter: one GBNF rule per subschema, named by its JSON pointer; $ref
// targets get their rule name before their body is built, which is what makes recursion work.
// Errors carry the JSON pointer of the offending keyword.
#include "runtime/grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/grammar/json_schema_parts.h"

namespace cera::runtime::grammar {
namespace {

using Json = nlohmann::ordered_json;

const char* kPrimitives =
    "value ::= object | array | string | number | boolean | null\n"
    "object ::= \"{\" ws ( string ws \":\" ws value ( ws \",\" ws string ws \":\" ws value )* )? ws \"}\"\n"
    "array ::= \"[\" ws ( value ( ws \",\" ws value )* )? ws \"]\"\n"
    "string ::= \"\\\"\" jchar* \"\\\"\"\n"
    "jchar ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n"
    "number ::= \"-\"? ( \"0\" | [1-9] [0-9]* ) ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]+ )?\n"
    "integer ::= \"-\"? ( \"0\" | [1-9] [0-9]* )\n"
    "boolean ::= \"true\" | \"false\"\n"
    "null ::= \"null\"\n";

const std::set<std::string> kIgnored = {"$schema", "$id", "title", "description", "examples",
                                        "default", "$comment", "$defs", "definitions"};
const std::set<std::string> kKnown = {
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "enum",
    "const", "anyOf", "oneOf", "allOf", "$ref", "minLength", "maxLength", "pattern",
    "minItems", "maxItems", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "format"};

std::string pointer_escape(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

class Converter {
 public:
  Converter(const Json& root, const JsonSchemaOptions& o) : root_(root), opt_(o) {}

  Result<std::string> run() {
    CERA_ASSIGN_OR_RETURN(std::string body, visit(root_, "", 0));
    std::string out = "root ::= " + body + "\n";
    for (auto& [name, rule] : rules_) out += name + " ::= " + rule + "\n";
    out += kPrimitives;
    if (opt_.whitespace == JsonWhitespace::kCompact) {
      out += "ws ::= \"\"\n";
    } else {
      out += "ws ::= [ \\t\\n]{0," + std::to_string(opt_.max_whitespace) + "}\n";
    }
    return out;
  }

 private:
  Status error(const std::string& path, const std::string& msg) {
    return unsupported("\"" + path + "\": " + msg);
  }

  std::string add_rule(const std::string& body) {
    auto it = by_body_.find(body);
    if (it != by_body_.end()) return it->second;
    std::string name = "r" + std::to_string(rules_.size());
    rules_.emplace_back(name, body);
    by_body_[body] = name;
    return name;
  }

  Result<std::string> ref(const std::string& target, const std::string& path, int depth) {
    if (target.empty() || target[0] != '#') return error(path + "/$ref", "remote $ref \"" + target + "\" is not supported");
    auto it = ref_names_.find(target);
    if (it != ref_names_.end()) return it->second;
    const Json* node = &root_;
    if (target.size() > 1) {
      try {
        node = &root_.at(Json::json_pointer(target.substr(1)));
      } catch (const std::exception&) {
        return error(path + "/$ref", "$ref \"" + target + "\" does not resolve");
      }
    }
    std::string name = "ref" + std::to_string(ref_names_.size());
    ref_names_[target] = name;
    std::size_t slot = rules_.size();
    rules_.emplace_back(name, "");
    CERA_ASSIGN_OR_RETURN(std::string body, visit(*node, target.substr(1), depth + 1));
    rules_[slot].second = body;
    return name;
  }

  Result<std::string> visit(const Json& s, const std::string& path, int depth) {
    if (depth > opt_.max_depth) return error(path, "nesting deeper than max_depth (" + std::to_string(opt_.max_depth) + ")");
    if (s.is_boolean()) {
      if (s.get<bool>()) return std::string("value");
      return error(path, "the schema false matches nothing");
    }
    if (!s.is_object()) return invalid_argument("\"" + path + "\": a schema must be an object or a boolean");
    for (auto& [k, v] : s.items()) {
      if (kIgnored.count(k) || kKnown.count(k)) continue;
      return error(path + "/" + pointer_escape(k), k + " is not supported");
    }
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) return invalid_argument("\"" + path + "/$ref\": must be a string");
      for (auto& [k, v] : s.items()) {
        if (k != "$ref" && kKnown.count(k)) return error(path + "/" + pointer_escape(k), k + " beside $ref is not supported");
      }
      return ref(s["$ref"].get<std::string>(), path, depth);
    }
    if (s.contains("const")) return std::string(gbnf_literal(s["const"].dump()));
    if (s.contains("enum")) {
      const Json& e = s["enum"];
      if (!e.is_array() || e.empty()) return invalid_argument("\"" + path + "/enum\": must be a non-empty array");
      if (e.size() > opt_.max_enum) return error(path + "/enum", "more values than max_enum (" + std::to_string(opt_.max_enum) + ")");
      std::string out;
      for (auto& v : e) out += (out.empty() ? "" : " | ") + gbnf_literal(v.dump());
      return "(" + out + ")";
    }
    for (const char* kw : {"anyOf", "oneOf"}) {
      if (!s.contains(kw)) continue;
      const Json& a = s[kw];
      if (!a.is_array() || a.empty()) return invalid_argument("\"" + path + "/" + kw + "\": must be a non-empty array");
      std::string out;
      for (std::size_t i = 0; i < a.size(); ++i) {
        CERA_ASSIGN_OR_RETURN(std::string alt, visit(a[i], path + "/" + kw + "/" + std::to_string(i), depth + 1));
        out += (out.empty() ? "" : " | ") + alt;
      }
      return add_rule(out);
    }
    if (s.contains("allOf")) return all_of(s, path, depth);
    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      if (t.is_string()) types.push_back(t.get<std::string>());
      else if (t.is_array()) for (auto& x : t) types.push_back(x.is_string() ? x.get<std::string>() : "?");
      else return invalid_argument("\"" + path + "/type\": must be a string or an array");
    } else {
      // Infer from keywords so that {"properties": ...} means an object.
      if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) types.push_back("object");
      else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems")) types.push_back("array");
      else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") || s.contains("format")) types.push_back("string");
      else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum")) types.push_back("number");
      else return std::string("value");
    }
    std::string out;
    for (auto& t : types) {
      CERA_ASSIGN_OR_RETURN(std::string alt, typed(s, t, path, depth));
      out += (out.empty() ? "" : " | ") + alt;
    }
    return types.size() == 1 ? out : add_rule(out);
  }

  Result<std::string> all_of(const Json& s, const std::string& path, int depth) {
    Json merged = Json::object();
    merged["type"] = "object";
    Json props = Json::object();
    Json required = Json::array();
    std::set<std::string> seen;
    std::vector<const Json*> closed;
    const Json& a = s["allOf"];
    if (!a.is_array() || a.empty()) return invalid_argument("\"" + path + "/allOf\": must be a non-empty array");
    for (std::size_t i = 0; i < a.size(); ++i) {
      std::string p = path + "/allOf/" + std::to_string(i);
      const Json& sub = a[i];
      if (!sub.is_object() || !(sub.contains("properties") || sub.value("type", "") == "object")) {
        return error(p, "allOf of schemas other than objects is not supported");
      }
      for (auto& [k, v] : sub.items()) {
        if (kIgnored.count(k) || k == "type" || k == "properties" || k == "required" || k == "additionalProperties") continue;
        return error(p + "/" + pointer_escape(k), k + " inside allOf is not supported");
      }
      if (sub.contains("properties")) for (auto& [k, v] : sub["properties"].items()) if (!props.contains(k)) props[k] = v;
      if (sub.contains("required")) for (auto& r : sub["required"]) if (r.is_string() && seen.insert(r.get<std::string>()).second) required.push_back(r);
      if (sub.contains("additionalProperties")) {
        const Json& ap = sub["additionalProperties"];
        if (!(ap.is_boolean() && !ap.get<bool>())) return error(p + "/additionalProperties", "additionalProperties inside allOf other than false is not supported");
        closed.push_back(&sub);
      }
    }
    // A branch with additionalProperties false forbids the other branches' properties: the
    // merged grammar could only be empty or wrong, so it is refused.
    for (const Json* c : closed) {
      for (auto& [k, v] : props.items()) {
        if (!c->contains("properties") || !(*c)["properties"].contains(k)) {
          return error(path + "/allOf", "additionalProperties false in one branch excludes property \"" + k + "\" of another");
        }
      }
      merged["additionalProperties"] = false;
    }
    for (auto& [k, v] : s.items()) {
      if (k == "allOf" || kIgnored.count(k) || k == "type") continue;
      return error(path + "/" + pointer_escape(k), k + " beside allOf is not supported");
    }
    merged["properties"] = props;
    merged["required"] = required;
    return typed(merged, "object", path, depth);
  }

  Result<std::size_t> count(const Json& s, const char* kw, const std::string& path, std::size_t dflt) {
    if (!s.contains(kw)) return dflt;
    const Json& v = s[kw];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) return invalid_argument("\"" + path + "/" + kw + "\": must be a non-negative integer");
    if (uint64_t(v.get<int64_t>()) > opt_.max_repeat) return error(path + "/" + kw, std::string(kw) + " over max_repeat (" + std::to_string(opt_.max_repeat) + ")");
    return std::size_t(v.get<int64_t>());
  }

  static std::string repeat(const std::string& x, std::size_t lo, std::optional<std::size_t> hi) {
    if (hi && *hi == lo) return lo == 0 ? "\"\"" : x + "{" + std::to_string(lo) + "}";
    if (!hi) return lo == 0 ? x + "*" : (lo == 1 ? x + "+" : x + "{" + std::to_string(lo) + ",}");
    return x + "{" + std::to_string(lo) + "," + std::to_string(*hi) + "}";
  }

  Result<std::string> typed(const Json& s, const std::string& t, const std::string& path, int depth) {
    if (t == "number") {
      // Bounds on non-integers would need decimal comparison rules: refused, not dropped.
      for (const char* kw : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
        if (s.contains(kw)) return error(path + "/" + kw, std::string(kw) + " on a number (not an integer) is not supported");
      }
    }
    if (t == "null" || t == "boolean" || t == "number") return t;
    if (t == "integer") return integer(s, path);
    if (t == "string") return string(s, path);
    if (t == "object") return object(s, path, depth);
    if (t == "array") return array(s, path, depth);
    return error(path + "/type", "unknown type");
  }

  Result<std::string> integer(const Json& s, const std::string& path) {
    std::optional<int64_t> lo, hi;
    int64_t limit = 1;
    for (int i = 0; i < opt_.max_integer_digits; ++i) limit *= 10;
    for (const char* kw : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
      if (!s.contains(kw)) continue;
      const Json& v = s[kw];
      std::string p = path + "/" + kw;
      if (!v.is_number()) return invalid_argument("\"" + p + "\": must be a number");
      double d = v.get<double>();
      if (!(d > -double(limit) && d < double(limit))) return error(p, std::string(kw) + " beyond max_integer_digits (" + std::to_string(opt_.max_integer_digits) + ")");
      std::string k = kw;
      int64_t b;
      if (v.is_number_integer()) {
        b = v.get<int64_t>();
        if (k == "exclusiveMinimum") ++b;
        if (k == "exclusiveMaximum") --b;
      } else {
        // A fractional bound on an integer: the nearest integer inside.
        double f = (k == "minimum" || k == "exclusiveMinimum") ? std::floor(d) + 1 : std::ceil(d) - 1;
        if ((k == "minimum") && std::floor(d) == d) f = d;
        if ((k == "maximum") && std::floor(d) == d) f = d;
        b = int64_t(f);
      }
      if (k == "minimum" || k == "exclusiveMinimum") lo = lo ? std::max(*lo, b) : b;
      else hi = hi ? std::min(*hi, b) : b;
    }
    if (!lo && !hi) return std::string("integer");
    if (lo && hi && *lo > *hi) return error(path, "no integer lies between the bounds");
    return add_rule(integer_range_gbnf(lo, hi));
  }

  Result<std::string> string(const Json& s, const std::string& path) {
    if (s.contains("format")) {
      if (!s["format"].is_string()) return invalid_argument("\"" + path + "/format\": must be a string");
      std::string f = s["format"].get<std::string>();
      if (s.contains("pattern") || s.contains("minLength") || s.contains("maxLength")) {
        return error(path + "/format", "format together with pattern or lengths is not supported");
      }
      // Exactly the calendar dates of years 0001-9999 (RFC 3339 full-date as Python's
      // date.fromisoformat and jsonschema's rfc3339 checker read it): month lengths, and 02-29
      // only in leap years (a multiple of 4 that is not a century, or a multiple of 400).
      const std::string mult4 = "( [02468] [48] | [2468] \"0\" | [13579] [26] )";  // 04 .. 96, not 00
      const std::string not4 = "( [02468] [1235679] | [13579] [01345789] )";
      const std::string d28 = "( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] )";
      const std::string months = "( ( \"01\" | \"03\" | \"05\" | \"07\" | \"08\" | \"10\" | \"12\" ) \"-\" ( " + d28 +
                                 " | \"29\" | \"30\" | \"31\" ) | ( \"04\" | \"06\" | \"09\" | \"11\" ) \"-\" ( " + d28 +
                                 " | \"29\" | \"30\" ) | \"02-\" " + d28;
      std::string date = "( ( [0-9]{2} " + mult4 + " | " + mult4 + " \"00\" ) \"-\" " + months + " | \"02-29\" ) | ( [0-9]{2} " +
                         not4 + " | " + not4 + " \"00\" ) \"-\" " + months + " ) )";
      // Seconds 00-59: the checker refuses a leap second (T and Z in either case, as it upper-cases).
      std::string time = "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]+ )? ( [Zz] | [-+] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )";
      std::string body;
      if (f == "date") body = date;
      else if (f == "time") body = time;
      else if (f == "date-time") body = date + " [Tt] " + time;
      else if (f == "uuid") body = "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}";
      else if (f == "email") body = "[a-zA-Z0-9.!#$%&'*+=?^_`{|}~-]+ \"@\" [a-zA-Z0-9] [a-zA-Z0-9-]* ( \".\" [a-zA-Z0-9] [a-zA-Z0-9-]* )*";
      else return error(path + "/format", "format \"" + f + "\" is not supported");
      return add_rule("\"\\\"\" " + body + " \"\\\"\"");
    }
    if (s.contains("pattern")) {
      if (s.contains("minLength") || s.contains("maxLength")) return error(path + "/pattern", "pattern together with minLength/maxLength is not supported");
      if (!s["pattern"].is_string()) return invalid_argument("\"" + path + "/pattern\": must be a string");
      auto r = pattern_to_gbnf(s["pattern"].get<std::string>(), "jchar", opt_.max_repeat);
      if (!r.ok()) return error(path + "/pattern", r.status().message());
      return add_rule("\"\\\"\" " + *r + " \"\\\"\"");
    }
    CERA_ASSIGN_OR_RETURN(std::size_t lo, count(s, "minLength", path, 0));
    std::optional<std::size_t> hi;
    if (s.contains("maxLength")) {
      CERA_ASSIGN_OR_RETURN(std::size_t h, count(s, "maxLength", path, 0));
      hi = h;
    }
    if (hi && *hi < lo) return error(path, "maxLength is less than minLength");
    if (lo == 0 && !hi) return std::string("string");
    return add_rule("\"\\\"\" " + repeat("jchar", lo, hi) + " \"\\\"\"");
  }

  Result<std::string> object(const Json& s, const std::string& path, int depth) {
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return invalid_argument("\"" + path + "/required\": must be an array");
      for (auto& r : s["required"]) if (r.is_string()) required.insert(r.get<std::string>());
    }
    std::vector<std::string> kv;
    std::vector<bool> opt;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) return invalid_argument("\"" + path + "/properties\": must be an object");
      for (auto& [k, v] : s["properties"].items()) {
        CERA_ASSIGN_OR_RETURN(std::string value, visit(v, path + "/properties/" + pointer_escape(k), depth + 1));
        kv.push_back(gbnf_literal(Json(k).dump()) + " ws \":\" ws " + value);
        opt.push_back(!required.count(k));
      }
    }
    for (auto& r : required) {
      if (!s.contains("properties") || !s["properties"].contains(r)) return error(path + "/required", "required property \"" + r + "\" is not in properties");
    }
    std::string extra;  // empty: no additional properties
    if (s.contains("additionalProperties")) {
      const Json& a = s["additionalProperties"];
      if (!(a.is_boolean() && !a.get<bool>())) {
        CERA_ASSIGN_OR_RETURN(std::string value, visit(a, path + "/additionalProperties", depth + 1));
        extra = add_rule("string ws \":\" ws " + value);
      }
    }
    // tail_after[i]: the properties from i on when something was already written (each one
    // then starts with a comma); tail_first[i]: nothing written yet. 2n rules: linear size.
    std::size_t n = kv.size();
    std::string after = extra.empty() ? "" : add_rule("( ws \",\" ws " + extra + " )*");
    std::string first = extra.empty() ? "" : add_rule("( " + extra + " " + after + " )?");
    for (std::size_t i = n; i-- > 0;) {
      std::string item_then = kv[i] + (after.empty() ? "" : " " + after);
      std::string new_first = opt[i] ? "( " + item_then + " )" + (first.empty() ? "?" : " | " + first) : item_then;
      std::string comma = "ws \",\" ws " + kv[i];
      std::string new_after = opt[i] ? "( " + comma + " )?" + (after.empty() ? "" : " " + after) : comma + (after.empty() ? "" : " " + after);
      first = add_rule(new_first);
      after = add_rule(new_after);
    }
    return add_rule("\"{\" ws " + (first.empty() ? "" : first + " ") + "ws \"}\"");
  }

  Result<std::string> array(const Json& s, const std::string& path, int depth) {
    CERA_ASSIGN_OR_RETURN(std::size_t lo, count(s, "minItems", path, 0));
    std::optional<std::size_t> hi;
    if (s.contains("maxItems")) {
      CERA_ASSIGN_OR_RETURN(std::size_t h, count(s, "maxItems", path, 0));
      hi = h;
    }
    if (hi && *hi < lo) return error(path, "maxItems is less than minItems");
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      const Json& p = s["prefixItems"];
      if (!p.is_array()) return invalid_argument("\"" + path + "/prefixItems\": must be an array");
      for (std::size_t i = 0; i < p.size(); ++i) {
        CERA_ASSIGN_OR_RETURN(std::string e, visit(p[i], path + "/prefixItems/" + std::to_string(i), depth + 1));
        prefix.push_back(e);
      }
    }
    std::string item = "value";
    bool items_allowed = true;
    if (s.contains("items")) {
      const Json& it = s["items"];
      if (it.is_boolean() && !it.get<bool>()) items_allowed = false;
      else if (it.is_array()) return error(path + "/items", "items as an array (draft 4 tuples) is not supported; use prefixItems");
      else {
        CERA_ASSIGN_OR_RETURN(item, visit(it, path + "/items", depth + 1));
      }
    }
    // The rest after the prefix: between rest_lo and rest_hi more items.
    std::size_t k = prefix.size();
    std::size_t rest_lo = lo > k ? lo - k : 0;
    std::optional<std::size_t> rest_hi;
    if (!items_allowed) rest_hi = 0;
    if (hi) rest_hi = rest_hi ? std::min(*rest_hi, *hi > k ? *hi - k : 0) : (*hi > k ? *hi - k : 0);
    if (rest_hi && rest_lo > *rest_hi) return error(path, "minItems cannot be met by the allowed items");
    // Written after at least one item: each starts with a comma.
    std::string comma_item = "( ws \",\" ws " + item + " )";
    std::string rest_after;
    if (!rest_hi || *rest_hi > 0) rest_after = repeat(comma_item, rest_lo, rest_hi);
    std::string rest_first;  // nothing written yet
    if (!rest_hi || *rest_hi > 0) {
      std::optional<std::size_t> h1;
      if (rest_hi) h1 = *rest_hi - 1;
      std::string tail = repeat(comma_item, rest_lo > 0 ? rest_lo - 1 : 0, h1);
      rest_first = "( " + item + " " + tail + " )" + (rest_lo == 0 ? "?" : "");
    }
    // The prefix from the end: item i is required when i < lo (and hi allows it).
    std::size_t limit = hi ? std::min(k, *hi) : k;
    std::string first = rest_first, after = rest_after;
    for (std::size_t i = limit; i-- > 0;) {
      bool need = i < lo;
      std::string f = prefix[i] + (after.empty() ? "" : " " + after);
      std::string a = "ws \",\" ws " + f;
      first = add_rule(need ? f : "( " + f + " )?");
      after = add_rule(need ? a : "( " + a + " )?");
    }
    if (limit < k) first = limit == 0 ? "" : first;
    return add_rule("\"[\" ws " + (first.empty() ? "" : first + " ") + "ws \"]\"");
  }

  const Json& root_;
  const JsonSchemaOptions& opt_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::string, std::string> by_body_;
  std::map<std::string, std::string> ref_names_;
};

}  // namespace

Result<std::string> json_schema_to_gbnf(std::string_view schema_json, const JsonSchemaOptions& options) {
  if (schema_json.size() > options.max_schema_bytes) {
    return out_of_range("schema of " + std::to_string(schema_json.size()) + " bytes exceeds max_schema_bytes (" +
                        std::to_string(options.max_schema_bytes) + ")");
  }
  Json root = Json::parse(schema_json, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return invalid_argument("the schema is not valid JSON");
  return Converter(root, options).run();
}

std::string json_object_gbnf() {
  return std::string("root ::= object\n") + kPrimitives + "ws ::= \"\"\n";
}

}  // namespace cera::runtime::grammar
