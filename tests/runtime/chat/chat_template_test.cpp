// Unit tests of the template engine beyond the golden renderings: errors name the construct and
// its line:column, unsupported syntax fails at parse time, JSON and Python spellings, and the
// incremental Conversation prompts.
#include <gtest/gtest.h>

#include "runtime/chat/chat_template.h"
#include "runtime/chat/conversation.h"

namespace cera::runtime::chat {
namespace {

std::string render_or_error(std::string_view source, const ChatContext& ctx = {}) {
  auto t = ChatTemplate::parse(source);
  if (!t.ok()) return "PARSE: " + t.status().message();
  auto r = t->render(ctx);
  if (!r.ok()) return "RENDER: " + r.status().message();
  return *r;
}

TEST(ChatTemplate, ParseErrorsNameTheConstructAndPosition) {
  EXPECT_EQ(render_or_error("ab\n  {% include 'x.jinja' %}"),
            "PARSE: chat template 2:6: unsupported statement '{% include %}'");
  EXPECT_EQ(render_or_error("{{ x | frobnicate }}"),
            "PARSE: chat template 1:6: unsupported filter 'frobnicate'");
  EXPECT_EQ(render_or_error("{% if x is prime %}{% endif %}"),
            "PARSE: chat template 1:9: unsupported test 'prime'");
  EXPECT_EQ(render_or_error("{% for x in y %}"), "PARSE: chat template 1:17: missing {% endfor %}");
  EXPECT_EQ(render_or_error("{{ 'abc }}"), "PARSE: chat template 1:4: unterminated string literal");
  EXPECT_EQ(render_or_error("{{ a + }}"),
            "PARSE: chat template 1:8: expected an expression, found '}}'");
  EXPECT_EQ(render_or_error("{# open"), "PARSE: chat template 1:1: unterminated comment");
  EXPECT_EQ(render_or_error("{{ f(*args) }}"),
            "PARSE: chat template 1:6: unsupported: *args / **kwargs in calls");
  EXPECT_EQ(render_or_error("{{ x @ y }}"), "PARSE: chat template 1:6: unexpected character '@'");
  // An unsupported filter in a branch that never runs still fails: no silent partial support.
  EXPECT_NE(render_or_error("{% if false %}{{ x | wordwrap }}{% endif %}")
                .find("unsupported filter 'wordwrap'"),
            std::string::npos);
}

TEST(ChatTemplate, RenderErrorsCarryPositions) {
  EXPECT_EQ(render_or_error("\n{{ missing.attr }}"),
            "RENDER: chat template 2:11: cannot read 'attr' of an undefined value");
  EXPECT_EQ(render_or_error("{{ 'a' + 1 }}"),
            "RENDER: chat template 1:8: unsupported operand types for +: 'str' and 'int'");
  EXPECT_EQ(render_or_error("{{ raise_exception('bad roles') }}"),
            "RENDER: chat template 1:19: raise_exception: bad roles");
  EXPECT_EQ(render_or_error("{{ nope() }}"),
            "RENDER: chat template 1:8: 'nope' is undefined and cannot be called");
  EXPECT_EQ(render_or_error("{% set x = 1 %}{% set x.y = 2 %}"),
            "RENDER: chat template 1:19: cannot assign attribute 'y' on 'x': only namespace() "
            "objects take attribute assignment");
  EXPECT_EQ(render_or_error("{% for x in none %}{% endfor %}"),
            "RENDER: chat template 1:13: 'NoneType' object is not iterable");
  EXPECT_EQ(render_or_error("{{ 1 // 0 }}"), "RENDER: chat template 1:6: division by zero");
  // Runaway recursion ends at the nesting limit: each call nests the macro's body once more.
  EXPECT_EQ(render_or_error("{% macro m(a) %}{{ m(a) }}{% endmacro %}{{ m(1) }}"),
            "RENDER: chat template 1:20: nesting deeper than the limit of 256 levels "
            "(TemplateLimits::max_depth)");
}

TEST(ChatTemplate, WhitespaceControlMatchesJinja2Defaults) {
  // trim_blocks eats the newline after a block tag; lstrip_blocks the indentation before it.
  EXPECT_EQ(render_or_error("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  EXPECT_EQ(render_or_error("a  {%- if true -%}  b  {%- endif %}"), "ab");
  EXPECT_EQ(render_or_error("x\n  {%+ if true %}y{% endif %}"), "x\n  y");
  EXPECT_EQ(render_or_error("{{ 'v' }}\n{# c #}\nw\n"), "v\nw");  // one final newline dropped
  EXPECT_EQ(render_or_error("a\r\nb"), "a\nb");
}

TEST(ChatTemplate, PythonSpellings) {
  EXPECT_EQ(render_or_error("{{ [1, 'a', none, true, 2.50, {'k': 1e16}] }}"),
            "[1, 'a', None, True, 2.5, {'k': 1e+16}]");
  EXPECT_EQ(render_or_error("{{ 0.0001 }} {{ 0.00001 }} {{ 1 / 3 }} {{ -0.0 }}"),
            "0.0001 1e-05 0.3333333333333333 -0.0");
  EXPECT_EQ(render_or_error("{{ {'b': [], 'a': {}} | tojson(indent=2) }}"),
            "{\n  \"b\": [],\n  \"a\": {}\n}");
  EXPECT_EQ(render_or_error("{{ '\\x01é' | tojson }}"), "\"\\u0001é\"");
}

TEST(ChatTemplate, JsonRoundTripKeepsOrderAndTypes) {
  auto v = parse_json(R"({"z": 1, "a": [1.0, -2, "\u00e9\ud83d\ude00"], "n": null, "t": true})");
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(*to_json(*v), R"({"z": 1, "a": [1.0, -2, "é😀"], "n": null, "t": true})");
  EXPECT_FALSE(parse_json(R"({"a": })").ok());
  EXPECT_FALSE(parse_json(R"([1, 2)").ok());
  EXPECT_FALSE(parse_json("\"open").ok());
  EXPECT_FALSE(parse_json(std::string(300, '[')).ok());  // nesting limit, not a stack overflow
}

ChatTemplate chatml() {
  return *ChatTemplate::parse(
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
}

TEST(ChatConversation, EachTurnSendsOnlyTheNewSuffix) {
  Conversation c(chatml(), {});
  c.set_system("Be brief.");
  c.add_user("Hi");
  auto t1 = c.next_prompt();
  ASSERT_TRUE(t1.ok());
  EXPECT_FALSE(t1->restart);
  EXPECT_EQ(t1->text,
            "<|im_start|>system\nBe "
            "brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t1->text.substr(0, t1->system_size), "<|im_start|>system\nBe brief.<|im_end|>\n");
  c.add_assistant("Hello!");
  c.add_user("Bye");
  auto t2 = c.next_prompt();
  ASSERT_TRUE(t2.ok());
  EXPECT_FALSE(t2->restart);
  EXPECT_EQ(t2->system_size, 0u);
  EXPECT_EQ(t2->text, "<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatConversation, RewrittenHistoryRestarts) {
  // A template that trims replies: a reply with trailing space is not a prefix any more.
  Conversation c(
      *ChatTemplate::parse("{% for m in messages %}[{{ m.content | trim }}]{% endfor %}"), {});
  c.add_user("q");
  ASSERT_EQ(c.next_prompt()->text, "[q]");
  c.add_assistant("a  ");
  c.add_user("r");
  auto t = c.next_prompt();
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->restart);
  EXPECT_EQ(t->text, "[q][a][r]");
}

}  // namespace
}  // namespace cera::runtime::chat
