// tool_call_gbnf against the golden turns: the grammar compiles, its ByteMatcher accepts every
// call text the real template rendered for that family (from the trigger on) and refuses calls
// of tools not offered and arguments that break the tool's schema.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/chat/tool_calls.h"
#include "runtime/grammar/grammar.h"
#include "test_paths.h"

namespace cera::runtime::chat {
namespace {

using OrderedJson = nlohmann::ordered_json;

std::filesystem::path grammar_chat_dir() {
  return test::source_dir() / "tests" / "fixtures" / "chat";
}

OrderedJson read_case(const std::string& name) {
  std::ifstream in(grammar_chat_dir() / "tool_calls" / (name + ".json"), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return OrderedJson::parse(ss.str());
}

ToolCallFormat format_named(const std::string& name) {
  for (auto f : {ToolCallFormat::kHermes, ToolCallFormat::kLlama3, ToolCallFormat::kLfm2,
                 ToolCallFormat::kMistral, ToolCallFormat::kGranite})
    if (name == tool_call_format_name(f)) return f;
  return ToolCallFormat::kNone;
}

std::vector<ToolSpec> specs_of(const OrderedJson& tools) {
  std::vector<ToolSpec> out;
  for (const OrderedJson& t : tools)
    out.push_back({.name = t["function"]["name"].get<std::string>(),
                   .parameters = t["function"]["parameters"].dump()});
  return out;
}

// The call part of a turn: from the trigger on (Llama 3: the whole turn).
std::string calls_text(ToolCallFormat f, const std::string& text) {
  if (f == ToolCallFormat::kLlama3) return text;
  return text.substr(text.find(tool_call_trigger(f)));
}

bool accepts(const std::string& gbnf, const std::string& text) {
  auto g = grammar::compile_gbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.status().to_string() << "\n" << gbnf;
  if (!g.ok()) return false;
  grammar::ByteMatcher m(*g);
  return m.accept(text) && m.can_end();
}

const std::vector<std::string> kCases = {
    "qwen2.5-00",    "qwen2.5-01",   "qwen3-00",    "qwen3-01",        "qwen3-02",
    "llama3.1-00",   "llama3.1-01",  "llama3.2-00", "llama3.2-01",     "lfm2-00",
    "lfm2-01",       "lfm2.5-00",    "lfm2.5-01",   "mistral-nemo-00", "mistral-nemo-01",
    "granite3.3-00", "granite3.3-01"};

TEST(ToolCallGrammar, AcceptsEveryGoldenCallText) {
  for (const std::string& name : kCases) {
    SCOPED_TRACE(name);
    const OrderedJson c = read_case(name);
    const ToolCallFormat f = format_named(c["format"].get<std::string>());
    const std::vector<ToolSpec> tools = specs_of(c["tools"]);
    const std::string text = calls_text(f, c["text"].get<std::string>());
    const size_t n = c["calls"].size();

    auto parallel = tool_call_gbnf(f, tools, {.parallel = true});
    ASSERT_TRUE(parallel.ok()) << parallel.status().to_string();
    EXPECT_TRUE(accepts(*parallel, text)) << text;

    auto single = tool_call_gbnf(f, tools, {});
    ASSERT_TRUE(single.ok()) << single.status().to_string();
    EXPECT_EQ(accepts(*single, text), n == 1) << text;

    // Named choice: the one tool of a single call passes, the other tool's grammar refuses it.
    if (n == 1) {
      const std::string called = c["calls"][0]["name"].get<std::string>();
      auto named = tool_call_gbnf(f, tools, {.name = called});
      ASSERT_TRUE(named.ok());
      EXPECT_TRUE(accepts(*named, text));
      const std::string other = called == "get_weather" ? "create_event" : "get_weather";
      auto wrong = tool_call_gbnf(f, tools, {.name = other});
      ASSERT_TRUE(wrong.ok());
      EXPECT_FALSE(accepts(*wrong, text));
    }
  }
}

TEST(ToolCallGrammar, RefusesUnknownToolsAndSchemaViolations) {
  const OrderedJson c = read_case("qwen2.5-00");
  const std::vector<ToolSpec> tools = specs_of(c["tools"]);
  struct Case {
    ToolCallFormat format;
    std::string text;
    bool ok;
  };
  const std::vector<Case> cases = {
      {ToolCallFormat::kHermes,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
       "\"Oslo\"}}\n</tool_call>",
       true},
      {ToolCallFormat::kHermes,
       "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>",
       false},
      {ToolCallFormat::kHermes,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": "
       "\"kelvin\"}}\n</tool_call>",
       false},
      {ToolCallFormat::kHermes,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": "
       "\"celsius\"}}\n</tool_call>",
       false},
      {ToolCallFormat::kHermes,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": 3}}\n</tool_call>",
       false},
      {ToolCallFormat::kHermes,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"x\": "
       "1}}\n</tool_call>",
       false},
      {ToolCallFormat::kHermes,
       "<tool_call>\n{\"name\": \"create_event\", \"arguments\": {\"title\": \"t\", \"start\": "
       "{\"date\": \"d\", \"hour\": 1.5}}}\n</tool_call>",
       false},
      {ToolCallFormat::kMistral,
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}, \"id\": "
       "\"abc\"}]",
       false},
      {ToolCallFormat::kMistral,
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}, \"id\": "
       "\"abcDEF123\"}]",
       true},
      {ToolCallFormat::kGranite, "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {}}]",
       false},
      {ToolCallFormat::kLlama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
       true},
      {ToolCallFormat::kLlama3,
       "<|python_tag|>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}", false},
      {ToolCallFormat::kLfm2,
       "<|tool_call_start|>[get_weather(city='Oslo', unit=\"fahrenheit\")]<|tool_call_end|>", true},
      {ToolCallFormat::kLfm2, "<|tool_call_start|>[get_weather('Oslo')]<|tool_call_end|>", false},
      {ToolCallFormat::kLfm2, "<|tool_call_start|>[get_weather(unit='celsius')]<|tool_call_end|>",
       false},
      {ToolCallFormat::kLfm2,
       "<|tool_call_start|>[get_weather(city='Oslo', unit='kelvin')]<|tool_call_end|>", false},
      {ToolCallFormat::kLfm2,
       "<|tool_call_start|>[create_event(title='t', start={'date': 'd', 'hour': 9}, public=True, "
       "notes=None)]<|tool_call_end|>",
       true},
      {ToolCallFormat::kLfm2,
       "<|tool_call_start|>[create_event(title='t', start={}, public=1)]<|tool_call_end|>", false},
      {ToolCallFormat::kLfm2, "<|tool_call_start|>[get_time(tz='UTC')]<|tool_call_end|>", false},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.text);
    auto gbnf = tool_call_gbnf(k.format, tools, {.parallel = true});
    ASSERT_TRUE(gbnf.ok()) << gbnf.status().to_string();
    EXPECT_EQ(accepts(*gbnf, k.text), k.ok);
  }
}

TEST(ToolCallGrammar, ErrorsNameWhatIsWrong) {
  const std::vector<ToolSpec> tools = {
      {.name = "f",
       .parameters = R"({"type": "object", "properties": {"a": {"uniqueItems": true}}})"},
      {.name = "g", .parameters = ""}};
  EXPECT_FALSE(tool_call_gbnf(ToolCallFormat::kNone, tools, {}).ok());
  auto missing = tool_call_gbnf(ToolCallFormat::kHermes, tools, {.name = "h"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'h'"), std::string::npos);
  auto bad = tool_call_gbnf(ToolCallFormat::kHermes, tools, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("uniqueItems"), std::string::npos)
      << bad.status().to_string();
  // No schema: any arguments object.
  auto any = tool_call_gbnf(ToolCallFormat::kHermes, tools, {.name = "g"});
  ASSERT_TRUE(any.ok()) << any.status().to_string();
  EXPECT_TRUE(accepts(
      *any,
      "<tool_call>{\"name\": \"g\", \"arguments\": {\"x\": [1, {\"y\": null}]}}</tool_call>"));
}

TEST(ToolCallGrammar, TriggersAreWhereTheGrammarStarts) {
  EXPECT_EQ(tool_call_trigger(ToolCallFormat::kHermes), "<tool_call>");
  EXPECT_EQ(tool_call_trigger(ToolCallFormat::kNone), "");
  EXPECT_TRUE(tool_call_trigger_only_at_start(ToolCallFormat::kLlama3));
  EXPECT_FALSE(tool_call_trigger_only_at_start(ToolCallFormat::kMistral));
  const std::vector<ToolSpec> tools = {
      {.name = "f", .parameters = R"({"type": "object", "properties": {}})"}};
  for (auto f : {ToolCallFormat::kHermes, ToolCallFormat::kLlama3, ToolCallFormat::kLfm2,
                 ToolCallFormat::kMistral, ToolCallFormat::kGranite}) {
    auto gbnf = tool_call_gbnf(f, tools, {});
    ASSERT_TRUE(gbnf.ok());
    auto g = grammar::compile_gbnf(*gbnf);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    grammar::ByteMatcher m(*g);
    EXPECT_TRUE(m.accept(std::string(tool_call_trigger(f)))) << tool_call_format_name(f);
  }
}

}  // namespace
}  // namespace cera::runtime::chat
