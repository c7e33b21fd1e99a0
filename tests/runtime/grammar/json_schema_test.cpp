// JsonSchema: refusals with their exact messages, grammar size bounds, and the integer range
// rules checked exhaustively over a window against the bounds arithmetic (the digit rules are
// translated to std::regex, which is the independent matcher here until the GBNF engine lands).
#include "runtime/grammar/json_schema.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <string>

#include "runtime/grammar/grammar.h"
#include "runtime/grammar/json_schema_parts.h"

namespace cera::runtime::grammar {
namespace {

std::string refusal(const std::string& schema) {
  auto r = json_schema_to_gbnf(schema);
  EXPECT_FALSE(r.ok()) << schema;
  return r.ok() ? std::string() : r.status().message();
}

TEST(JsonSchemaRefusal, NamesKeywordAndPointer) {
  EXPECT_EQ(refusal(R"({"type":"object","properties":{"tags":{"type":"array","uniqueItems":true}}})"),
            "\"/properties/tags/uniqueItems\": uniqueItems is not supported");
  EXPECT_EQ(refusal(R"({"not":{"type":"string"}})"), "\"/not\": not is not supported");
  EXPECT_EQ(refusal(R"({"if":{},"then":{}})"), "\"/if\": if is not supported");
  EXPECT_EQ(refusal(R"({"type":"object","patternProperties":{"a":{}}})"),
            "\"/patternProperties\": patternProperties is not supported");
  EXPECT_EQ(refusal(R"({"type":"number","multipleOf":2})"), "\"/multipleOf\": multipleOf is not supported");
  EXPECT_EQ(refusal(R"({"$ref":"http://x/y.json"})"),
            "\"/$ref\": remote $ref \"http://x/y.json\" is not supported");
  EXPECT_EQ(refusal(R"j({"items":{"type":"string","pattern":"(?=a)"},"type":"array"})j"),
            "\"/items/pattern\": lookaround and named groups are not supported in pattern");
  EXPECT_EQ(refusal(R"({"type":"string","pattern":"a\\bc"})"),
            "\"/pattern\": \\b is not supported in pattern");
  EXPECT_EQ(refusal(R"({"allOf":[{"type":"string"}]})"),
            "\"/allOf/0\": allOf of schemas other than objects is not supported");
  EXPECT_EQ(refusal(R"({"type":"integer","minimum":1e30})"),
            "\"/minimum\": minimum beyond max_integer_digits (18)");
  EXPECT_EQ(refusal(R"({"allOf":[{"type":"object","properties":{"a":{}},"additionalProperties":false},{"properties":{"b":{}}}]})"),
            "\"/allOf\": additionalProperties false in one branch excludes property \"b\" of another");
  EXPECT_EQ(refusal(R"({"type":"string","format":"hostname"})"), "\"/format\": format \"hostname\" is not supported");
  EXPECT_EQ(refusal(R"({"type":"number","minimum":0.5})"), "\"/minimum\": minimum on a number (not an integer) is not supported");
  EXPECT_EQ(refusal("{"), "the schema is not valid JSON");
}

TEST(JsonSchemaRefusal, Limits) {
  JsonSchemaOptions o;
  o.max_depth = 2;
  auto r = json_schema_to_gbnf(R"({"items":{"items":{"items":{"items":{}}}}})", o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "\"/items/items/items\": nesting deeper than max_depth (2)");
  o = {};
  o.max_enum = 2;
  r = json_schema_to_gbnf(R"({"enum":[1,2,3]})", o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "\"/enum\": more values than max_enum (2)");
  o = {};
  o.max_schema_bytes = 4;
  r = json_schema_to_gbnf(R"({"type":"string"})", o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "schema of 17 bytes exceeds max_schema_bytes (4)");
}

TEST(JsonSchemaSize, LinearInProperties) {
  // 200 optional properties: the chain is 2 rules a property, so the text stays linear.
  std::string schema = R"({"type":"object","properties":{)";
  for (int i = 0; i < 200; ++i) schema += (i ? "," : "") + ("\"p" + std::to_string(i) + "\":{\"type\":\"integer\"}");
  schema += "}}";
  auto r = json_schema_to_gbnf(schema);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_LT(r->size(), 200u * 200u) << "grammar text must be O(properties), limit 200 bytes a property";
}

TEST(JsonSchemaSize, RecursiveRef) {
  auto r = json_schema_to_gbnf(
      R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}},"$ref":"#/$defs/node"})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_LT(r->size(), 4000u);
}

// The digit rules use only "x", [a-b], {n}, {n,}, ( | ) and spaces: dropping the spaces and
// quotes gives an ECMAScript regex with the same language.
std::regex to_regex(const std::string& gbnf) {
  std::string re;
  for (char c : gbnf) if (c != ' ' && c != '"') re += c;
  return std::regex(re);
}

void check_window(std::optional<int64_t> lo, std::optional<int64_t> hi, int64_t from, int64_t to) {
  std::string g = integer_range_gbnf(lo, hi);
  std::regex re = to_regex(g);
  for (int64_t v = from; v <= to; ++v) {
    bool want = (!lo || v >= *lo) && (!hi || v <= *hi);
    EXPECT_EQ(std::regex_match(std::to_string(v), re), want) << v << " in " << g;
  }
  EXPECT_FALSE(std::regex_match("-0", re)) << g;
  EXPECT_FALSE(std::regex_match("007", re)) << g;
}

TEST(JsonSchemaIntegerRange, ExhaustiveWindows) {
  const int64_t bounds[] = {-1234, -1000, -999, -100, -37, -10, -9, -1, 0, 1, 5, 9, 10, 19, 99, 100, 101, 250, 999, 1000, 1203};
  for (int64_t a : bounds) {
    for (int64_t b : bounds) {
      if (a > b) continue;
      check_window(a, b, -1500, 1500);
    }
    check_window(a, std::nullopt, -1500, 12000);
    check_window(std::nullopt, a, -12000, 1500);
  }
}

TEST(JsonSchemaIntegerRange, LargeBounds) {
  std::string g = integer_range_gbnf(int64_t(123456789012), int64_t(987654321098));
  std::regex re = to_regex(g);
  for (const char* s : {"123456789012", "987654321098", "500000000000"}) EXPECT_TRUE(std::regex_match(s, re)) << s;
  for (const char* s : {"123456789011", "987654321099", "99999999999", "1000000000000"}) EXPECT_FALSE(std::regex_match(s, re)) << s;
}

}  // namespace
}  // namespace cera::runtime::grammar

namespace cera::runtime::grammar {
namespace {

// format date / time / date-time against the calendar (C++20 chrono's year_month_day::ok(),
// years 1-9999) and RFC 3339's time as jsonschema's checker (rfc3339-validator, after
// upper-casing) reads it: seconds 00-59.
std::string fmt_date(int y, unsigned m, unsigned d) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02u", y, m, d);
  return buf;
}

bool accepts_format(const std::string& format, const std::string& text) {
  static std::map<std::string, std::shared_ptr<const Grammar>> grammars;
  auto& g = grammars[format];
  if (g == nullptr) {
    auto gbnf = json_schema_to_gbnf(R"({"type": "string", "format": ")" + format + "\"}");
    EXPECT_TRUE(gbnf.ok()) << gbnf.status().to_string();
    auto compiled = compile_gbnf(*gbnf);
    EXPECT_TRUE(compiled.ok()) << compiled.status().to_string();
    g = *compiled;
  }
  ByteMatcher m(g);
  return m.accept("\"" + text + "\"") && m.can_end();
}

TEST(JsonSchemaFormat, DatesAreExactlyTheCalendarsDays) {
  std::vector<int> years = {0, 1, 2, 3, 4, 96, 100, 104, 200, 300, 400, 1600, 1700, 1800, 1900, 1996,
                            1999, 2000, 2023, 2024, 2100, 2400, 9600, 9996, 9999};
  std::mt19937 rng(5);
  for (int i = 0; i < 40; ++i) years.push_back(static_cast<int>(rng() % 10000));
  int checked = 0;
  for (const int y : years) {
    for (unsigned m = 0; m <= 13; ++m) {
      for (unsigned d = 0; d <= 32; ++d) {
        if (m > 12 && d > 1) continue;
        const std::chrono::year_month_day ymd{std::chrono::year(y), std::chrono::month(m), std::chrono::day(d)};
        const bool want = y >= 1 && ymd.ok();
        const std::string text = fmt_date(y, m, d);
        EXPECT_EQ(accepts_format("date", text), want) << text;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 20000);
  EXPECT_TRUE(accepts_format("date-time", "2024-02-29T23:59:59.5+05:30"));
  EXPECT_FALSE(accepts_format("date-time", "2023-02-29T23:59:59Z"));
  EXPECT_TRUE(accepts_format("date-time", "2024-02-29t23:59:59z"));  // jsonschema upper-cases first
}

TEST(JsonSchemaFormat, TimesAreRfc3339AsTheCheckerReadsThem) {
  EXPECT_TRUE(accepts_format("time", "00:00:00Z"));
  EXPECT_TRUE(accepts_format("time", "23:59:59.123456-12:00"));
  EXPECT_FALSE(accepts_format("time", "23:59:60Z"));  // a leap second: jsonschema's checker refuses it
  EXPECT_FALSE(accepts_format("time", "24:00:00Z"));
  EXPECT_TRUE(accepts_format("time", "12:00:00z"));
  EXPECT_FALSE(accepts_format("time", "12:00:00"));
}

}  // namespace
}  // namespace cera::runtime::grammar
