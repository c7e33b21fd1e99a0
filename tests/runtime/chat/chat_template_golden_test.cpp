// Golden tests: every case in tests/fixtures/chat/cases was rendered by Python's jinja2 set up as
// transformers sets it up (tools/chat/make_fixtures.py); cera must produce the same bytes, or
// fail where jinja2 raised.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/chat/chat_template.h"
#include "test_paths.h"

namespace cera::runtime::chat {
namespace {

std::filesystem::path fixture_dir() {
  return test::source_dir() / "tests" / "fixtures" / "chat";
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(fixture_dir() / "cases"))
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

// "2025-03-14T09:26:53" -> broken-down time.
std::tm parse_now(const std::string& s) {
  std::tm tm{};
  std::istringstream in(s);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  tm.tm_isdst = -1;
  std::mktime(&tm);  // fills tm_wday / tm_yday for %a, %j
  return tm;
}

class ChatGolden : public testing::TestWithParam<std::string> {};

TEST_P(ChatGolden, RendersLikeJinja2) {
  auto doc = parse_json(read_file(fixture_dir() / "cases" / (GetParam() + ".json")));
  ASSERT_TRUE(doc.ok()) << doc.status().to_string();
  const Object& c = doc->as_object();
  const Object& cx = c.find("context")->as_object();
  const std::string source =
      read_file(fixture_dir() / "templates" / c.find("template")->as_string());
  auto tmpl = ChatTemplate::parse(source);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().to_string();

  ChatContext ctx;
  ctx.messages = *cx.find("messages");
  if (const Value* tools = cx.find("tools")) ctx.tools = *tools;
  ctx.add_generation_prompt = cx.find("add_generation_prompt")->as_bool();
  ctx.bos_token = cx.find("bos_token")->as_string();
  ctx.eos_token = cx.find("eos_token")->as_string();
  if (const Value* extra = cx.find("extra")) ctx.extra = extra->as_object();
  ctx.now = parse_now(cx.find("now")->as_string());

  auto out = tmpl->render(ctx);
  if (const Value* error = c.find("error")) {
    ASSERT_FALSE(out.ok()) << "jinja2 raised '" << error->as_string() << "' but cera rendered:\n"
                           << *out;
    EXPECT_NE(out.status().message().find(error->as_string()), std::string::npos)
        << out.status().to_string();
    return;
  }
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, c.find("expected")->as_string());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ChatGolden, testing::ValuesIn(case_names()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

TEST(ChatGolden, EveryFamilyHasCases) {
  // Guards against an empty or partial fixture folder silently passing.
  const auto names = case_names();
  for (const char* family : {"smollm2", "gemma2", "gemma3-style", "llama3.1", "llama3.2", "qwen2.5",
                             "qwen3", "granite3.3", "lfm2", "lfm2.5", "mistral-nemo", "features"}) {
    const auto n = std::count_if(names.begin(), names.end(), [&](const std::string& s) {
      return s.rfind(std::string(family) + "-", 0) == 0;
    });
    EXPECT_GE(n, 3) << family;
  }
}

}  // namespace
}  // namespace cera::runtime::chat
