// Tool-call output parsing against golden turns rendered by Python's jinja2 from the real
// templates (tools/chat/make_tool_call_fixtures.py): every case parsed at once, byte by byte
// and in random chunks must give the calls and content the template was rendered from. Then
// format detection, held-back markers, reasoning, malformed calls and ids.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/chat/tool_calls.h"
#include "test_paths.h"

namespace cera::runtime::chat {
namespace {

using Json = nlohmann::json;  // unordered: arguments compare as values

std::filesystem::path chat_dir() {
  return test::source_dir() / "tests" / "fixtures" / "chat";
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> tool_call_case_names() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(chat_dir() / "tool_calls"))
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Deltas joined, with the stream's invariants checked on the way.
ParsedOutput join(const std::vector<OutputDelta>& deltas, Status status) {
  ParsedOutput out;
  out.status = std::move(status);
  for (const OutputDelta& d : deltas) {
    switch (d.kind) {
      case OutputDelta::Kind::kContent:
        out.content += d.text;
        break;
      case OutputDelta::Kind::kReasoning:
        out.reasoning += d.text;
        break;
      case OutputDelta::Kind::kToolCall:
        EXPECT_EQ(d.tool_index, static_cast<int32_t>(out.tool_calls.size()));
        out.tool_calls.push_back({.id = d.id, .name = d.name, .arguments = d.text});
        break;
    }
  }
  return out;
}

// Pushes `text` in chunks of the given sizes (cycled).
ParsedOutput parse_chunked(const OutputParserOptions& o, std::string_view text,
                           const std::vector<size_t>& sizes) {
  OutputParser p(o);
  std::vector<OutputDelta> deltas;
  for (size_t pos = 0, i = 0; pos < text.size(); ++i) {
    const size_t n = std::min(sizes[i % sizes.size()], text.size() - pos);
    p.push(text.substr(pos, n), deltas);
    pos += n;
  }
  Status st = p.finish(deltas);
  return join(deltas, std::move(st));
}

std::vector<size_t> random_sizes(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> d(1, 9);
  std::vector<size_t> s(64);
  for (size_t& x : s) x = d(rng);
  return s;
}

class ToolCallGolden : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    c_ = Json::parse(read_text(chat_dir() / "tool_calls" / (GetParam() + ".json")));
    source_ = read_text(chat_dir() / "templates" / c_["template"].get<std::string>());
    opt_ = {.format = tool_call_format_of(source_),
            .tools = true,
            .reasoning = source_.find("</think>") != std::string::npos,
            .id_seed = 7};
  }

  void check(const ParsedOutput& got, const std::string& how) {
    SCOPED_TRACE(how);
    EXPECT_TRUE(got.status.ok()) << got.status.to_string();
    EXPECT_EQ(got.content, c_["content"].get<std::string>());
    EXPECT_EQ(got.reasoning, c_["reasoning"].get<std::string>());
    const Json& calls = c_["calls"];
    ASSERT_EQ(got.tool_calls.size(), calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(got.tool_calls[i].name, calls[i]["name"].get<std::string>());
      EXPECT_EQ(Json::parse(got.tool_calls[i].arguments), calls[i]["arguments"])
          << got.tool_calls[i].arguments;
      if (calls[i].contains("id"))
        EXPECT_EQ(got.tool_calls[i].id, calls[i]["id"].get<std::string>());
      else
        EXPECT_TRUE(got.tool_calls[i].id.starts_with("call_")) << got.tool_calls[i].id;
    }
  }

  Json c_;
  std::string source_;
  OutputParserOptions opt_;
};

TEST_P(ToolCallGolden, DetectsTheFormat) {
  EXPECT_STREQ(tool_call_format_name(opt_.format), c_["format"].get<std::string>().c_str());
}

TEST_P(ToolCallGolden, ParsesAtOnceBytewiseAndInRandomChunks) {
  const std::string text = c_["text"].get<std::string>();
  const ParsedOutput whole = parse_output(opt_, text);
  check(whole, "at once");
  const ParsedOutput bytes = parse_chunked(opt_, text, {1});
  check(bytes, "byte by byte");
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    const ParsedOutput chunks = parse_chunked(opt_, text, random_sizes(seed));
    check(chunks, "random chunks, seed " + std::to_string(seed));
    for (size_t i = 0; i < chunks.tool_calls.size(); ++i)
      EXPECT_EQ(chunks.tool_calls[i].id, whole.tool_calls[i].id);
  }
}

TEST_P(ToolCallGolden, WithoutToolsEverythingIsContent) {
  OutputParserOptions o = opt_;
  o.tools = false;
  o.reasoning = false;
  const std::string text = c_["text"].get<std::string>();
  const ParsedOutput got = parse_chunked(o, text, random_sizes(3));
  EXPECT_EQ(got.content, text);
  EXPECT_TRUE(got.tool_calls.empty());
}

INSTANTIATE_TEST_SUITE_P(ToolCallFixtures, ToolCallGolden, testing::ValuesIn(tool_call_case_names()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

TEST(ToolCallFormat, DetectsEveryFixtureTemplate) {
  const std::vector<std::pair<std::string, ToolCallFormat>> expected = {
      {"qwen2.5", ToolCallFormat::kHermes},
      {"qwen3", ToolCallFormat::kHermes},
      {"llama3.1", ToolCallFormat::kLlama3},
      {"llama3.2", ToolCallFormat::kLlama3},
      {"lfm2", ToolCallFormat::kLfm2},
      {"lfm2.5", ToolCallFormat::kLfm2},
      {"mistral-nemo", ToolCallFormat::kMistral},
      {"granite3.3", ToolCallFormat::kGranite},
      {"smollm2", ToolCallFormat::kNone},
      {"gemma2", ToolCallFormat::kNone},
      {"gemma3-style", ToolCallFormat::kNone},
      {"features", ToolCallFormat::kNone}};
  for (const auto& [name, format] : expected) {
    EXPECT_EQ(tool_call_format_of(read_text(chat_dir() / "templates" / (name + ".jinja"))), format)
        << name;
  }
  EXPECT_STREQ(tool_call_format_name(ToolCallFormat::kNone), "none");
}

OutputParserOptions hermes() {
  return {.format = ToolCallFormat::kHermes, .tools = true};
}

TEST(OutputParser, HoldsAMarkerPrefixOnlyUntilItIsDecided) {
  OutputParser p(hermes());
  std::vector<OutputDelta> d;
  p.push("Use <tool", d);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, "Use");  // " <tool" may begin a call: held
  p.push("box> now <", d);
  EXPECT_EQ(join(d, {}).content, "Use <toolbox> now");
  p.push("tool_cal", d);
  EXPECT_TRUE(p.finish(d).ok());
  EXPECT_EQ(join(d, {}).content, "Use <toolbox> now <tool_cal");  // the end decides: content
}

TEST(OutputParser, EveryFormatsCutMarkersAreContent) {
  for (auto f : {ToolCallFormat::kHermes, ToolCallFormat::kLfm2, ToolCallFormat::kMistral,
                 ToolCallFormat::kGranite}) {
    const std::string marker(tool_call_trigger(f));
    for (size_t n = 1; n < marker.size(); ++n) {
      const std::string cut = marker.substr(0, n);
      for (const std::string& text :
           {"a " + cut + "b " + cut + "c", "a " + cut, cut + " " + cut + "\n"}) {
        SCOPED_TRACE(text);
        const OutputParserOptions o{.format = f, .tools = true};
        for (const std::vector<size_t>& sizes :
             {std::vector<size_t>{1000}, {1}, random_sizes(static_cast<uint32_t>(n))}) {
          const ParsedOutput r = parse_chunked(o, text, sizes);
          EXPECT_EQ(r.content, text);
          EXPECT_TRUE(r.tool_calls.empty());
          EXPECT_TRUE(r.status.ok());
        }
      }
    }
  }
}

TEST(OutputParser, ContentBeforeACallIsEmittedBeforeTheCallEnds) {
  OutputParser p(hermes());
  std::vector<OutputDelta> d;
  p.push("Checking.\n<tool_call>\n{\"name\": \"f\", \"argu", d);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, "Checking.");
  p.push("ments\": {\"x\": [1, 2]}}\n</tool_call>\n", d);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[1].kind, OutputDelta::Kind::kToolCall);
  EXPECT_EQ(d[1].name, "f");
  EXPECT_EQ(Json::parse(d[1].text), Json::parse(R"({"x": [1, 2]})"));
  EXPECT_TRUE(p.finish(d).ok());
  EXPECT_EQ(d.size(), 2u);  // trailing whitespace after the call is dropped
}

TEST(OutputParser, QwenReasoningSplitsLikeTheTemplate) {
  OutputParserOptions o = hermes();
  o.reasoning = true;
  const std::string text = "<think>\nFirst line.\n\nSecond.\n</think>\n\nParis.\n";
  for (const std::vector<size_t>& sizes : {std::vector<size_t>{1000}, {1}, random_sizes(9)}) {
    ParsedOutput r = parse_chunked(o, text, sizes);
    EXPECT_EQ(r.reasoning, "First line.\n\nSecond.");
    EXPECT_EQ(r.content, "Paris.\n");
    // The prompt already opened <think>: the output starts inside it.
    OutputParserOptions opened = o;
    opened.prompt_opened_think = true;
    r = parse_chunked(opened, text.substr(7), sizes);
    EXPECT_EQ(r.reasoning, "First line.\n\nSecond.");
    EXPECT_EQ(r.content, "Paris.\n");
  }
  EXPECT_EQ(parse_output(o, "<think>\nunfinished\n").reasoning, "unfinished\n");
  EXPECT_EQ(parse_output(o, "No thinking <think>x</think>").content,
            "No thinking <think>x</think>");
  EXPECT_EQ(parse_output(o, "<thin").content, "<thin");
  o.reasoning = false;
  EXPECT_EQ(parse_output(o, text).content, text);
}

TEST(OutputParser, ReasoningThenACall) {
  OutputParserOptions o = hermes();
  o.reasoning = true;
  const ParsedOutput r =
      parse_output(o,
                   "<think>\nneed weather\n</think>\n\n<tool_call>\n{\"name\": \"w\", "
                   "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  EXPECT_EQ(r.reasoning, "need weather");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].name, "w");
}

// A malformed block stays content byte for byte; finish() names the first.
TEST(OutputParser, MalformedCallsStayContent) {
  struct Case {
    ToolCallFormat format;
    std::string text;
    std::string why;
  };
  const std::vector<Case> cases = {
      {ToolCallFormat::kHermes,
       "Hi\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call> bye",
       "not valid JSON"},
      {ToolCallFormat::kHermes, "<tool_call>{\"arguments\": {}}</tool_call>", "no \"name\""},
      {ToolCallFormat::kHermes, "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
       "not a JSON object"},
      {ToolCallFormat::kHermes, "<tool_call>{\"name\": \"f\", \"arguments\": {", "unterminated"},
      {ToolCallFormat::kLfm2, "<|tool_call_start|>[f(1, b=2)]<|tool_call_end|>", "positional"},
      {ToolCallFormat::kLfm2, "<|tool_call_start|>[f(a=open('x'))]<|tool_call_end|>",
       "Python literal"},
      {ToolCallFormat::kMistral, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}",
       "unterminated"},
      {ToolCallFormat::kMistral, "[TOOL_CALLS] sorry", "not valid JSON"},
      {ToolCallFormat::kGranite, "<|tool_call|>[]", "non-empty"},
      {ToolCallFormat::kLlama3, "{\"answer\": 42}", "no \"name\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const OutputParserOptions o{.format = c.format, .tools = true};
    for (const std::vector<size_t>& sizes : {std::vector<size_t>{1000}, {1}, random_sizes(4)}) {
      const ParsedOutput r = parse_chunked(o, c.text, sizes);
      EXPECT_EQ(r.content, c.text);
      EXPECT_TRUE(r.tool_calls.empty());
      EXPECT_EQ(r.status.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(r.status.message().find(c.why), std::string::npos) << r.status.message();
    }
  }
  // A good call after a bad one is still a call.
  const ParsedOutput r = parse_output(
      hermes(), "<tool_call>{oops}</tool_call>\n<tool_call>{\"name\": \"g\"}</tool_call>");
  EXPECT_EQ(r.content, "<tool_call>{oops}</tool_call>");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{}");
  EXPECT_FALSE(r.status.ok());
}

TEST(OutputParser, UnterminatedHermesBlockWithCompleteJsonIsACall) {
  const ParsedOutput r =
      parse_output(hermes(), "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n");
  EXPECT_TRUE(r.status.ok()) << r.status.to_string();
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"a\":1}");
}

TEST(OutputParser, Llama3CallsAreJsonAtTheStartOnly) {
  const OutputParserOptions o{.format = ToolCallFormat::kLlama3, .tools = true};
  ParsedOutput r = parse_output(o, "The object {\"name\": \"f\", \"parameters\": {}} is JSON.");
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(r.content, "The object {\"name\": \"f\", \"parameters\": {}} is JSON.");
  r = parse_chunked(o,
                    "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"q\": \"a;b\"}}; {\"name\": "
                    "\"g\", \"parameters\": {}}",
                    {3});
  EXPECT_TRUE(r.status.ok()) << r.status.to_string();
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].name, "f");
  EXPECT_EQ(Json::parse(r.tool_calls[0].arguments), Json::parse(R"({"q": "a;b"})"));
  EXPECT_EQ(r.tool_calls[1].name, "g");
  EXPECT_EQ(r.content, "");
  r = parse_chunked(o, "<|python", {1});
  EXPECT_EQ(r.content, "<|python");
}

TEST(OutputParser, PythonLiteralsBecomeJson) {
  const OutputParserOptions o{.format = ToolCallFormat::kLfm2, .tools = true};
  const ParsedOutput r = parse_output(
      o,
      "<|tool_call_start|>[f(a=1, b=-2.5e3, c='it\\'s', d=\"q\\\"\\n\\u00e9\\x41\", e=[1, (2, 3)], "
      "g={'k': None, \"n\": {'t': True}}, h=False, i=.5, j=1., k=12345678901234567890, "
      "l='\\d')]<|tool_call_end|>");
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  ASSERT_EQ(r.tool_calls.size(), 1u);
  const Json args = Json::parse(r.tool_calls[0].arguments);
  EXPECT_EQ(args, Json::parse(
                      R"({"a": 1, "b": -2500.0, "c": "it's", "d": "q\"\n\u00e9A", "e": [1, [2, 3]],
      "g": {"k": null, "n": {"t": true}}, "h": false, "i": 0.5, "j": 1.0, "k": 12345678901234567890, "l": "\\d"})"));
}

TEST(OutputParser, IdsAreOpenAiShapedAndDeterministic) {
  ToolCallIds a(42), b(42), c(43);
  const std::string first = a.next();
  EXPECT_EQ(first.size(), 5u + 24u);
  EXPECT_TRUE(first.starts_with("call_"));
  for (char ch : first.substr(5)) EXPECT_TRUE(isalnum(static_cast<unsigned char>(ch))) << first;
  EXPECT_EQ(first, b.next());
  EXPECT_NE(first, c.next());
  EXPECT_NE(first, a.next());
}

}  // namespace
}  // namespace cera::runtime::chat
