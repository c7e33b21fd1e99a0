// The JSON parser against hand-checked documents: values, escapes, UTF-8, and errors that must
// name the position of the fault.
#include <gtest/gtest.h>

#include "format/json.h"

namespace cera::format {
namespace {

TEST(Json, ParsesNestedDocument) {
  auto v = parse_json(R"( {"a": [1, -2.5e3, true, null, "x"], "b": {"c": 0}, "a2": 123456789012} )");
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  const JsonValue* a = v->find("a");
  ASSERT_TRUE(a && a->is_array());
  ASSERT_EQ(a->size(), 5u);
  EXPECT_EQ((*a->as_array())[0].as_int(), 1);
  EXPECT_DOUBLE_EQ(*(*a->as_array())[1].as_double(), -2500.0);
  EXPECT_FALSE((*a->as_array())[1].as_int().has_value());  // not written as an integer
  EXPECT_EQ((*a->as_array())[2].as_bool(), true);
  EXPECT_TRUE((*a->as_array())[3].is_null());
  EXPECT_EQ(*(*a->as_array())[4].as_string(), "x");
  EXPECT_EQ(v->find("b")->find("c")->as_int(), 0);
  EXPECT_EQ(v->find("a2")->as_int(), 123456789012);
  EXPECT_EQ(v->find("missing"), nullptr);
  // Members keep file order.
  EXPECT_EQ((*v->as_object())[1].first, "b");
}

TEST(Json, DecodesEscapesAndUtf8) {
  auto v = parse_json(R"(["\"\\\/\b\f\n\r\t", "\u0041\u00e9\u4e2d", "\ud83d\ude00", "Ġé中"])");
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  const auto& a = *v->as_array();
  EXPECT_EQ(*a[0].as_string(), "\"\\/\b\f\n\r\t");
  EXPECT_EQ(*a[1].as_string(), "A\xC3\xA9\xE4\xB8\xAD");
  EXPECT_EQ(*a[2].as_string(), "\xF0\x9F\x98\x80");
  EXPECT_EQ(*a[3].as_string(), "\xC4\xA0\xC3\xA9\xE4\xB8\xAD");
}

TEST(Json, HugeIntegerKeepsItsDoubleValue) {
  auto v = parse_json("1000000000000000019884624838656");  // tokenizer_config's model_max_length
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->as_int().has_value());
  EXPECT_DOUBLE_EQ(*v->as_double(), 1e30);
}

struct BadCase {
  const char* text;
  const char* message_part;
};

TEST(Json, RejectsInvalidInputWithPosition) {
  // The wording is nlohmann-json's (the project's JSON library); each names what is wrong and where.
  const BadCase cases[] = {
      {"", "line 1, column 1"},
      {"{\"a\": 1,}", "expected string literal"},
      {"[1, 2", "expected ']'"},
      {"{\"a\" 1}", "expected ':'"},
      {"01", "unexpected number literal"},
      {"1.", "expected digit after '.'"},
      {"-", "expected digit after '-'"},
      {"1e", "exponent"},
      {"+1", "invalid literal; last read: '+'"},
      {"tru", "invalid literal; last read: 'tru'"},
      {"\"abc", "missing closing quote"},
      {"\"a\tb\"", "control character"},
      {"\"\\x\"", "forbidden character after backslash"},
      {"\"\\ud800\"", "surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF"},
      {"\"\\udc00\"", "surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF"},
      {"\"\\u12G4\"", "must be followed by 4 hex digits"},
      {"\"\xC0\x80\"", "ill-formed UTF-8"},
      {"\"\xED\xA0\x80\"", "ill-formed UTF-8"},
      {"\"\xE4\xB8\"", "UTF-8"},
      {"[1] [2]", "expected end of input"},
      {"{\"a\": 1}\n\n  x", "line 3, column 3"},
  };
  for (const BadCase& c : cases) {
    auto v = parse_json(c.text);
    ASSERT_FALSE(v.ok()) << c.text;
    EXPECT_EQ(v.status().code(), ErrorCode::kCorrupt);
    EXPECT_NE(v.status().message().find(c.message_part), std::string::npos) << c.text << " -> " << v.status().message();
    EXPECT_NE(v.status().message().find("byte "), std::string::npos);
  }
}

TEST(Json, RefusesExcessiveNesting) {
  std::string deep(600, '[');
  deep += std::string(600, ']');
  auto v = parse_json(deep);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("nesting"), std::string::npos);
  std::string ok(100, '[');
  ok += std::string(100, ']');
  EXPECT_TRUE(parse_json(ok).ok());
}

TEST(Json, ReadFileNamesThePath) {
  auto v = read_json_file("/nonexistent/config.json");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("/nonexistent/config.json"), std::string::npos);
}

}  // namespace
}  // namespace cera::format

namespace cera::format {
namespace {

TEST(Json, KeepsDuplicateMembersInOrderAndIntegersExactToInt64) {
  auto v = parse_json(R"({"a": 1, "b": [], "a": 2, "max": 9223372036854775807, "over": 9223372036854775808,
                          "min": -9223372036854775808})");
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  ASSERT_EQ(v->size(), 6u);
  EXPECT_EQ(v->find("a")->as_int(), 1);  // the first of two
  EXPECT_EQ((*v->as_object())[2].first, "a");
  EXPECT_EQ(v->find("max")->as_int(), INT64_MAX);
  EXPECT_FALSE(v->find("over")->as_int().has_value());
  EXPECT_DOUBLE_EQ(*v->find("over")->as_double(), 9223372036854775808.0);
  EXPECT_EQ(v->find("min")->as_int(), INT64_MIN);
  auto deep = parse_json("[[" + std::string(600, '{'));
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("line 1, column"), std::string::npos) << deep.status().message();
}

}  // namespace
}  // namespace cera::format
