// GrammarSchemaReference: cera's masks for JSON Schemas (json_schema_to_gbnf, compact) equal
// llguidance's for the same schemas (tests/fixtures/grammar/llguidance_schema_masks.txt, written
// by tools/grammar/schema_masks.py: llguidance compiling the JSON Schema itself, compact
// separators, no whitespace), on SmolLM2's vocabulary, at every token boundary of valid instances.
// Explained differences are counted by kind; anything else fails with the tokens that differ:
//  - forced bytes: where the grammar forces the next bytes, llguidance allows only the token its
//    tokenizer picks for them, cera every token that is a prefix of them (as in GrammarReference);
//  - DEL: llguidance's JSON strings refuse U+007F unescaped; JSON (RFC 8259) and cera allow it,
//    so the extra tokens are exactly those holding byte 0x7F (SchemaDifferences checks both);
//  - format regexes: llguidance's date (and date-time) allows February 29 in every year and year
//    0000, where cera's follows the calendar (years 0001-9999, as jsonschema's checker); its time
//    allows a leap second (60), which jsonschema's checker refuses; its email is RFC 5321's dot-string (no leading, trailing or double dot, '/' allowed;
//    domain labels not ending in '-'; an [IPv4] literal). Counted as explained only when the
//    schema with those formats written as patterns of llguidance's regexes (kLlguidanceFormats)
//    gives exactly llguidance's mask through cera.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "mask_compare.h"
#include "mask_fixture.h"
#include "runtime/grammar/grammar.h"
#include "runtime/grammar/json_schema.h"
#include "runtime/grammar/token_matcher.h"
#include "smollm2_vocab.h"

namespace cera::runtime::grammar {
namespace {

using Json = nlohmann::ordered_json;
using test::allowed_ids;
using test::printable;

// llguidance 1.9.1's format regexes (its json/formats.rs), restated in cera's pattern subset.
const char* const kOctet = "([0-9]|[1-9][0-9]|25[0-5]|2[0-4][0-9]|1[0-9][0-9])";
const std::string kDate =
    "([0-9]{4}-(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|[0-9]{4}-(0[469]|11)-(0[1-9]|[12][0-9]|30)"
    "|"
    "[0-9]{4}-02-(0[1-9]|1[0-9]|2[0-9]))";
const std::string kTime =
    "([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?([zZ]|[+-]([01][0-9]|2[0-3]):[0-5][0-"
    "9])";
const std::string kAtext = "[a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]";
const std::string kLabel = "[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?";

std::string llguidance_format(const std::string& f) {
  if (f == "date") return "^" + kDate + "$";
  if (f == "date-time") return "^" + kDate + "[tT]" + kTime + "$";
  if (f == "time") return "^" + kTime + "$";
  if (f == "email") {
    return "^" + kAtext + "+(\\." + kAtext + "+)*@(" + kLabel + "(\\." + kLabel + ")*|\\[(" +
           kOctet + "\\.){3}" + kOctet + "\\])$";
  }
  return "";
}

// `schema` with every date, date-time, time and email format written as llguidance's regex; false
// when it has none.
bool with_llguidance_formats(Json& schema) {
  bool changed = false;
  if (schema.is_object() && schema.contains("format") && schema["format"].is_string()) {
    const std::string p = llguidance_format(schema["format"].get<std::string>());
    if (!p.empty()) {
      schema.erase("format");
      schema["pattern"] = p;
      changed = true;
    }
  }
  if (schema.is_object() || schema.is_array()) {
    for (auto& [key, value] : schema.items()) changed = with_llguidance_formats(value) || changed;
  }
  return changed;
}

// The JSON-encoded names (no quotes) of the properties listed in objects whose
// additionalProperties is not false: cera lets an additional property reuse such a name.
std::set<std::string> reusable_keys(const Json& schema) {
  std::set<std::string> out;
  if (schema.is_object() && schema.contains("properties") &&
      schema.contains("additionalProperties") && schema["additionalProperties"] != Json(false)) {
    for (const auto& [key, value] : schema["properties"].items()) {
      const std::string quoted = Json(key).dump();
      out.insert(quoted.substr(1, quoted.size() - 2));
    }
  }
  if (schema.is_object() || schema.is_array()) {
    for (const auto& [key, value] : schema.items()) out.merge(reusable_keys(value));
  }
  return out;
}

// Some enclosing object of the end of `prefix` (compact JSON) is writing, or holds the value of,
// a key that is a prefix of (while written) or equal to one of `keys`.
bool writes_reusable_key(std::string_view prefix, const std::set<std::string>& keys) {
  struct Frame {
    bool object = false;
    bool in_key = false;
    std::string key;
  };
  std::vector<Frame> stack;
  bool in_string = false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    const char c = prefix[i];
    Frame* top = stack.empty() ? nullptr : &stack.back();
    if (in_string) {
      const bool key = top && top->in_key;
      if (c == '\\' && i + 1 < prefix.size()) {
        if (key) top->key += prefix.substr(i, 2);
        ++i;
      } else if (c == '"') {
        in_string = false;
        if (key) top->in_key = false;
      } else if (key) {
        top->key += c;
      }
    } else if (c == '{' || c == '[') {
      stack.push_back({c == '{', false, ""});
    } else if (c == '}' || c == ']') {
      if (!stack.empty()) stack.pop_back();
    } else if (c == ',' && top && top->object) {
      top->key.clear();
    } else if (c == '"') {
      in_string = true;
      if (top && top->object && (i == 0 || prefix[i - 1] == '{' || prefix[i - 1] == ',')) {
        top->in_key = true;
        top->key.clear();
      }
    }
  }
  for (const Frame& f : stack) {
    if (!f.object || (f.key.empty() && !f.in_key)) continue;
    for (const std::string& k : keys) {
      if (f.in_key ? k.starts_with(f.key) : k == f.key) return true;
    }
  }
  return false;
}

std::map<std::string, Json> load_schemas() {
  std::ifstream in(cera::test::source_dir() / "tests/fixtures/grammar/schema_corpus.jsonl");
  std::map<std::string, Json> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    Json j = Json::parse(line);
    out[j["name"].get<std::string>()] = j["schema"];
  }
  return out;
}

enum class Explanation { kFormats };

// A compiled schema with its two matchers, advanced together.
struct SchemaMatch {
  std::shared_ptr<const Grammar> g;
  std::unique_ptr<TokenMatcher> tokens;
  std::unique_ptr<ByteMatcher> bytes;
};

std::optional<SchemaMatch> match_schema(const Json& schema, std::shared_ptr<const VocabIndex> vocab,
                                        const std::string& name) {
  auto gbnf = json_schema_to_gbnf(schema.dump());
  if (!gbnf.ok()) {
    ADD_FAILURE() << name << ": " << gbnf.status().message();
    return std::nullopt;
  }
  auto g = compile_gbnf(*gbnf);
  if (!g.ok()) {
    ADD_FAILURE() << name << ": " << g.status().message();
    return std::nullopt;
  }
  return SchemaMatch{*g, std::make_unique<TokenMatcher>(token_tables_for(*g, vocab)),
                     std::make_unique<ByteMatcher>(*g)};
}

enum class Difference {
  kNone,
  kForcedBytes,
  kDel,
  kEscapes,
  kEnumEscape,
  kNegativeZero,
  kListedKey,
  kOther
};

// How cera's mask `got` differs from llguidance's `want` at a state whose ByteMatcher is `bytes`.
Difference classify(const std::vector<int32_t>& got, const std::vector<int32_t>& want,
                    const ByteMatcher& bytes, const VocabIndex& vocab, std::string_view prefix,
                    std::vector<int32_t>* extra_out = nullptr,
                    std::vector<int32_t>* missing_out = nullptr) {
  if (got == want) return Difference::kNone;
  std::vector<int32_t> extra, missing;
  std::set_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(extra));
  std::set_difference(want.begin(), want.end(), got.begin(), got.end(),
                      std::back_inserter(missing));
  if (extra_out) *extra_out = extra;
  if (missing_out) *missing_out = missing;
  if (extra.empty() && prefix.ends_with('-') &&
      std::all_of(missing.begin(), missing.end(),
                  [&](int32_t id) { return vocab.bytes(id).starts_with('0'); })) {
    return Difference::kNegativeZero;
  }
  if (extra.empty() && prefix.ends_with('\\') &&
      std::all_of(missing.begin(), missing.end(),
                  [&](int32_t id) { return vocab.bytes(id).starts_with('u'); })) {
    return Difference::kEnumEscape;
  }
  if (!missing.empty()) return Difference::kOther;
  if (prefix.ends_with('\\') && std::all_of(extra.begin(), extra.end(), [&](int32_t id) {
        const std::string_view b = vocab.bytes(id);
        return b.starts_with('/') ||
               (b.size() >= 3 && (b[0] == 'u') && (b[1] == 'd' || b[1] == 'D') &&
                std::string_view("cdefCDEF").find(b[2]) != std::string_view::npos);
      })) {
    return Difference::kEscapes;
  }
  if (std::all_of(extra.begin(), extra.end(), [&](int32_t id) {
        return vocab.bytes(id).find('\x7F') != std::string_view::npos;
      })) {
    return Difference::kDel;
  }
  const std::string forced = test::forced_continuation(bytes);
  if (!forced.empty() && std::all_of(extra.begin(), extra.end(), [&](int32_t id) {
        return forced.starts_with(vocab.bytes(id));
      })) {
    return Difference::kForcedBytes;
  }
  return Difference::kOther;
}

TEST(GrammarSchemaReference, MasksEqualLlguidance) {
  auto vocab = test::smollm2_vocab();
  if (!vocab) GTEST_SKIP() << test::kSmollm2Missing;
  const std::map<std::string, Json> schemas = load_schemas();
  ASSERT_EQ(schemas.size(), 100u);
  const test::MaskFixture f =
      test::load_mask_file("tests/fixtures/grammar/llguidance_schema_masks.txt");
  ASSERT_TRUE(f.loaded) << "tests/fixtures/grammar/llguidance_schema_masks.txt is missing or empty";
  ASSERT_EQ(f.n_vocab, vocab->n_vocab());
  EXPECT_EQ(f.eog, vocab->end_tokens());

  std::vector<uint32_t> mask(vocab->mask_words());
  size_t steps = 0, differing = 0, reported = 0;
  std::map<Difference, size_t> explained;
  std::map<Explanation, size_t> by_variant;
  std::set<std::string> names;
  for (const test::MaskWalk& w : f.walks) {
    auto schema = schemas.find(w.grammar);
    ASSERT_NE(schema, schemas.end()) << w.grammar;
    std::optional<SchemaMatch> m = match_schema(schema->second, vocab, w.grammar);
    if (!m) continue;
    // The schema restated with llguidance's formats, followed while it accepts the walk's tokens.
    std::vector<std::pair<Explanation, std::optional<SchemaMatch>>> variants;
    if (Json v = schema->second; with_llguidance_formats(v)) {
      variants.emplace_back(Explanation::kFormats,
                            match_schema(v, vocab, w.grammar + " (llguidance's formats)"));
    }
    const std::set<std::string> reusable = reusable_keys(schema->second);
    names.insert(w.grammar);
    std::string prefix;
    ASSERT_EQ(w.masks.size(), w.tokens.size());
    for (size_t i = 0; i < w.masks.size(); ++i) {
      m->tokens->fill_mask(mask);
      const std::vector<int32_t> got = allowed_ids(mask, vocab->n_vocab());
      const std::vector<int32_t>& want = f.masks.at(w.masks[i]);
      ++steps;
      std::vector<int32_t> extra, missing;
      Difference d = classify(got, want, *m->bytes, *vocab, prefix, &extra, &missing);
      if (d == Difference::kOther && missing.empty() && writes_reusable_key(prefix, reusable))
        d = Difference::kListedKey;
      if (d == Difference::kOther) {
        for (auto& [why, v] : variants) {
          if (!v) continue;
          v->tokens->fill_mask(mask);
          if (classify(allowed_ids(mask, vocab->n_vocab()), want, *v->bytes, *vocab, prefix) !=
              Difference::kOther) {
            ++by_variant[why];
            d = Difference::kNone;
            break;
          }
        }
      }
      if (d == Difference::kOther) {
        ++differing;
        if (reported++ < 40) {
          std::string e, mi;
          for (size_t k = 0; k < extra.size() && k < 8; ++k)
            e += " '" + printable(vocab->bytes(extra[k])) + "'";
          for (size_t k = 0; k < missing.size() && k < 8; ++k)
            mi += " '" + printable(vocab->bytes(missing[k])) + "'";
          ADD_FAILURE() << w.grammar << " after '" << printable(prefix) << "': cera allows "
                        << extra.size() << " more:" << e << "; " << missing.size()
                        << " fewer:" << mi;
        }
      } else if (d != Difference::kNone) {
        ++explained[d];
      }
      const int32_t t = w.tokens[i];
      ASSERT_TRUE(m->tokens->accept_token(t))
          << w.grammar << " after '" << printable(prefix) << "': token " << t << " '"
          << printable(vocab->bytes(t)) << "'";
      for (auto& [why, v] : variants) {
        if (v && !(v->tokens->accept_token(t) &&
                   (vocab->role(t) != TokenRole::kText || v->bytes->accept(vocab->bytes(t))))) {
          v.reset();  // the variant refuses the walk from here on
        }
      }
      if (vocab->role(t) == TokenRole::kText) {
        ASSERT_TRUE(m->bytes->accept(vocab->bytes(t)));
        prefix += vocab->bytes(t);
      }
    }
    EXPECT_TRUE(m->tokens->ended()) << w.grammar;
  }
  size_t n_explained = 0;
  for (const auto& [k, n] : explained) n_explained += n;
  for (const auto& [k, n] : by_variant) n_explained += n;
  std::printf(
      "GrammarSchemaReference: %zu schemas, %zu walks, %zu masks compared: %zu equal; explained: "
      "%zu by "
      "forced-bytes prefix tokens, %zu by U+007F in strings, %zu by \\/ or a lone low surrogate "
      "after a "
      "backslash, %zu by \\u in an enum's string, %zu by -0, %zu by llguidance's format regexes, "
      "%zu by a listed key written as an additional "
      "one; %zu differ otherwise\n",
      names.size(), f.walks.size(), steps, steps - n_explained - differing,
      explained[Difference::kForcedBytes], explained[Difference::kDel],
      explained[Difference::kEscapes], explained[Difference::kEnumEscape],
      explained[Difference::kNegativeZero], by_variant[Explanation::kFormats],
      explained[Difference::kListedKey], differing);
  EXPECT_EQ(differing, 0u);
  EXPECT_EQ(names.size(), 100u);
}

bool accepts(const Json& schema, std::string_view doc) {
  auto gbnf = json_schema_to_gbnf(schema.dump());
  EXPECT_TRUE(gbnf.ok()) << gbnf.status().message();
  if (!gbnf.ok()) return false;
  auto g = compile_gbnf(*gbnf);
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok()) return false;
  ByteMatcher m(*g);
  return m.accept(doc) && m.can_end();
}

// The explained differences, one by one, are what they claim. Each document below is valid
// JSON (nlohmann's parser, RFC 8259) with the value the schema asks for, and cera decides it
// the way the masks show (llguidance the other way: its fixture masks).
TEST(GrammarSchemaReference, ExplainedDifferences) {
  const Json str = {{"type", "string"}};
  const std::string del =
      "\"a\x7F"
      "b\"";
  EXPECT_TRUE(Json::accept(del)) << "RFC 8259 does not ask to escape U+007F";
  EXPECT_TRUE(accepts(str, del));
  // \/ and a lone low surrogate escape: valid JSON strings, allowed by cera.
  EXPECT_EQ(Json::parse("\"a\\/b\"").get<std::string>(), "a/b");
  EXPECT_TRUE(accepts(str, "\"a\\/b\""));
  EXPECT_TRUE(accepts(str, "\"\\udc00\""));
  // -0: the integer 0, in [-5, 5]; cera's digit-range rules do not write it.
  const Json small = {{"type", "integer"}, {"minimum", -5}, {"maximum", 5}};
  EXPECT_EQ(Json::parse("-0").get<int>(), 0);
  EXPECT_FALSE(accepts(small, "-0"));
  EXPECT_TRUE(accepts(small, "0"));
  // An enum string matches only its canonical encoding: \n, not \u000a (same value).
  const Json nl = {{"enum", {"new\nline"}}};
  EXPECT_EQ(Json::parse("\"new\\u000aline\"").get<std::string>(), "new\nline");
  EXPECT_TRUE(accepts(nl, "\"new\\nline\""));
  EXPECT_FALSE(accepts(nl, "\"new\\u000aline\""));
  // A listed key written again as an additional property takes any value (json_schema.h):
  // "x" must be a number, yet {"x":[1]} passes as an additional "x".
  const Json reuse = Json::parse(
      R"({"type":"object","properties":{"x":{"type":"number"}},"additionalProperties":true})");
  EXPECT_TRUE(accepts(reuse, R"({"x":[1]})"));
  EXPECT_TRUE(accepts(reuse, R"({"x":1,"y":[1]})"));
  EXPECT_TRUE(writes_reusable_key(R"({"x":[)", reusable_keys(reuse)));
  EXPECT_FALSE(writes_reusable_key(R"({"x":1,"y":[)", reusable_keys(reuse)));

  const Json date = {{"type", "string"}, {"format", "date"}};
  Json date_llg = date;
  ASSERT_TRUE(with_llguidance_formats(date_llg));
  for (const char* d : {"\"2023-02-29\"", "\"1900-02-29\"", "\"0000-01-01\""}) {
    EXPECT_FALSE(accepts(date, d)) << d;
    EXPECT_TRUE(accepts(date_llg, d)) << d;
  }
  for (const char* d : {"\"2024-02-30\"", "\"2023-04-31\"", "\"2023-11-31\""}) {
    EXPECT_FALSE(accepts(date, d)) << d;
    EXPECT_FALSE(accepts(date_llg, d)) << d;
  }
  for (const char* d : {"\"2024-02-29\"", "\"2023-12-31\"", "\"2023-04-30\""}) {
    EXPECT_TRUE(accepts(date, d)) << d;
    EXPECT_TRUE(accepts(date_llg, d)) << d;
  }
  const Json dt = {{"type", "string"}, {"format", "date-time"}};
  Json dt_llg = dt;
  ASSERT_TRUE(with_llguidance_formats(dt_llg));
  EXPECT_FALSE(accepts(dt, "\"2023-06-31T10:00:00Z\""));
  EXPECT_FALSE(accepts(dt_llg, "\"2023-06-31T10:00:00Z\""));
  EXPECT_TRUE(accepts(dt, "\"2023-06-30t10:00:00.5+01:00\""));
  EXPECT_TRUE(accepts(dt_llg, "\"2023-06-30t10:00:00.5+01:00\""));
  const Json time = {{"type", "string"}, {"format", "time"}};
  Json time_llg = time;
  ASSERT_TRUE(with_llguidance_formats(time_llg));
  EXPECT_FALSE(accepts(time, "\"23:59:60Z\""));
  EXPECT_TRUE(accepts(time_llg, "\"23:59:60Z\""));

  const Json email = {{"type", "string"}, {"format", "email"}};
  Json email_llg = email;
  ASSERT_TRUE(with_llguidance_formats(email_llg));
  for (const char* e : {"\".a@x.com\"", "\"a..b@x.com\"", "\"a.@x.com\"", "\"a@x-.com\""}) {
    EXPECT_TRUE(accepts(email, e)) << e;
    EXPECT_FALSE(accepts(email_llg, e)) << e;
  }
  for (const char* e : {"\"a/b@x.com\"", "\"a@[10.0.0.255]\""}) {
    EXPECT_FALSE(accepts(email, e)) << e;
    EXPECT_TRUE(accepts(email_llg, e)) << e;
  }
  EXPECT_TRUE(accepts(email, "\"bob.smith@mail.co.uk\""));
  EXPECT_TRUE(accepts(email_llg, "\"bob.smith@mail.co.uk\""));
}

}  // namespace
}  // namespace cera::runtime::grammar
