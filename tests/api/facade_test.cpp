// The public C++ facade (include/cera/engine.h) against the references: stories260K's exact
// greedy text (llama2.c's, shared/models), streamed and whole; SmolLM2's token ids from
// llama.cpp (tests/fixtures/real_models) and its chat template; and its errors, which name the
// input and the limit.
#include "cera/engine.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "model_cache.h"
#include "stories_model.h"

namespace cera {
namespace {

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The reference: greedy from BOS, as `cera run -p "" -n 256 --temp 0` is checked; the file ends
// with a newline the decode does not print.
std::string stories_reference() {
  std::string text = read_all(test::shared_dir() / "models/stories260K.greedy-256.txt");
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

GenerateOptions greedy(int32_t max_tokens) {
  GenerateOptions o;
  o.max_tokens = max_tokens;
  o.sampling.temperature = 0;
  return o;
}

class FacadeStoriesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto e = Engine::load({.model_path = test::stories_gguf().string(), .device = DeviceChoice::kCpu});
    ASSERT_TRUE(e) << e.error().message;
    engine_ = std::move(e).value().release();
  }
  static void TearDownTestSuite() { delete engine_; }
  inline static Engine* engine_ = nullptr;
};

TEST_F(FacadeStoriesTest, GreedyEqualsTheReference) {
  auto c = engine_->generate("", greedy(256));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->text, stories_reference());
  EXPECT_EQ(c->n_prompt_tokens, 1);  // BOS
  EXPECT_EQ(engine_->info().architecture, "llama");
  EXPECT_TRUE(engine_->info().generates);
}

TEST_F(FacadeStoriesTest, StreamedChunksAndCallbackEqualTheWhole) {
  std::string via_callback;
  GenerateOptions o = greedy(256);
  o.on_text = [&](std::string_view t) { via_callback.append(t); };  // the loop's thread; read after the end
  auto s = engine_->start("", o);
  ASSERT_TRUE(s) << s.error().message;
  std::string pulled;
  int n_chunks = 0;
  for (;;) {
    Stream::Chunk c = (*s)->next(std::chrono::milliseconds(50));
    pulled += c.text;
    n_chunks += !c.text.empty();
    if (c.done) break;
  }
  auto r = (*s)->result();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(pulled, stories_reference());
  EXPECT_EQ(via_callback, stories_reference());
  EXPECT_EQ(r->text, stories_reference());
  EXPECT_GE(n_chunks, 1);
}

TEST_F(FacadeStoriesTest, StopStringEndsBeforeIt) {
  const std::string ref = stories_reference();
  const size_t at = ref.find(" the", 20);
  ASSERT_NE(at, std::string::npos);
  GenerateOptions o = greedy(256);
  o.stop = {" the"};
  auto c = engine_->generate("", o);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->finish_reason, FinishReason::kStopString);
  EXPECT_EQ(c->text, ref.substr(0, ref.find(" the")));
}

TEST_F(FacadeStoriesTest, SeedsReproduce) {
  GenerateOptions o;
  o.max_tokens = 64;
  o.sampling.temperature = 1.0f;
  o.sampling.seed = 7;
  auto a = engine_->generate("Once", o), b = engine_->generate("Once", o);
  o.sampling.seed = 8;
  auto c = engine_->generate("Once", o);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->text, b->text);
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_NE(a->tokens, c->tokens);
}

TEST_F(FacadeStoriesTest, CancelEndsTheGeneration) {
  auto s = engine_->start("", greedy(256));
  ASSERT_TRUE(s);
  (*s)->cancel();
  auto r = (*s)->result();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->finish_reason, FinishReason::kCancelled);
  EXPECT_LT(r->tokens.size(), 256u);
  EXPECT_EQ(r->text, stories_reference().substr(0, r->text.size()));  // what came before is the reference's
}

TEST_F(FacadeStoriesTest, GrammarConstrainsTheReply) {
  GenerateOptions o = greedy(32);
  o.constraint = {.kind = ConstraintKind::kGbnf, .source = "root ::= \"Lily\" | \"Tom\""};
  auto c = engine_->generate("Once upon a time, there was a girl named", o);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->text == "Lily" || c->text == "Tom") << c->text;
  EXPECT_EQ(c->finish_reason, FinishReason::kEndOfGeneration);
}

TEST_F(FacadeStoriesTest, TokenizeRoundTrips) {
  const std::string text = "Once upon a time, there was a little girl named Lily.";
  auto ids = engine_->tokenize(text, /*add_special=*/false);
  ASSERT_TRUE(ids);
  auto back = engine_->detokenize(*ids);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, text);  // the decoder drops the dummy prefix the encoder added
}

TEST_F(FacadeStoriesTest, BadOptionsNameTheField) {
  GenerateOptions o;
  o.max_tokens = -1;
  auto a = engine_->generate("x", o);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_NE(a.error().message.find("max_tokens -1"), std::string::npos) << a.error().message;
  o = {};
  o.sampling.top_p = 0;
  auto b = engine_->generate("x", o);
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find("top_p 0 is outside (0, 1] (1: off)"), std::string::npos) << b.error().message;
  o = {};
  o.constraint = {.kind = ConstraintKind::kGbnf, .source = "root ::= (("};
  auto g = engine_->generate("x", o);
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().kind, ErrorKind::kInvalidArgument);
  auto d = engine_->detokenize({1, 99999});
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().kind, ErrorKind::kOutOfRange);
  EXPECT_NE(d.error().message.find("token 1 is id 99999, outside the vocabulary 0..511"), std::string::npos)
      << d.error().message;
}

TEST(FacadeLoad, MissingFileNamesIt) {
  auto e = Engine::load({.model_path = "/nonexistent/model.gguf"});
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(e.error().message, "model file '/nonexistent/model.gguf' does not exist");
  auto p = Engine::load({.model_path = test::stories_gguf().string(), .max_parallel = 0});
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().message, "max_parallel 0 must be from 1 to 1024");
}

// SmolLM2 (make models): token ids equal llama.cpp's, and a chat reply streams in pieces that
// make up the whole reply.
TEST(FacadeSmolLM2, TokensAndChat) {
  const auto path = test::model_cache() / "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is missing: run `make models`";
  auto e = Engine::load({.model_path = path.string(), .device = DeviceChoice::kCpu, .max_parallel = 2});
  ASSERT_TRUE(e) << e.error().message;
  Engine& engine = **e;
  // The first string of the fixture and its ids (special tokens parsed, no BOS).
  const std::string inp = read_all(std::filesystem::path(CERA_SOURCE_DIR) / "tests/fixtures/real_models/smollm2.inp");
  const std::string out = read_all(std::filesystem::path(CERA_SOURCE_DIR) / "tests/fixtures/real_models/smollm2.out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  size_t n_checked = 0;
  for (size_t a = 0, line = 0; a < inp.size() && n_checked < 40; ++n_checked) {
    size_t b = inp.find(sep, a);
    if (b == std::string::npos) b = inp.size();
    const std::string text = inp.substr(a, b - a);
    const size_t eol = out.find('\n', line);
    std::istringstream ids_line(out.substr(line, eol - line));
    std::vector<int32_t> want;
    for (int32_t id; ids_line >> id;) want.push_back(id);
    auto got = engine.tokenize(text, /*add_special=*/false, /*parse_special=*/true);
    ASSERT_TRUE(got);
    EXPECT_EQ(*got, want) << "string " << n_checked << ": '" << text << "'";
    a = b + sep.size();
    line = eol + 1;
  }
  EXPECT_EQ(n_checked, 40u);

  const std::vector<ChatMessage> messages = {{"user", "What is the capital of France?"}};
  auto rendered = engine.render_chat(messages);
  ASSERT_TRUE(rendered) << rendered.error().message;
  EXPECT_NE(rendered->find("<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"),
            std::string::npos)
      << *rendered;
  ChatOptions o;
  o.max_tokens = 24;
  o.sampling.temperature = 0;
  auto s = engine.start_chat(messages, o);
  ASSERT_TRUE(s) << s.error().message;
  std::string pulled;
  for (Stream::Chunk c; !c.done;) {
    c = (*s)->next();
    pulled += c.text;
  }
  auto r = (*s)->result();
  ASSERT_TRUE(r);
  EXPECT_EQ(pulled, r->text);
  EXPECT_NE(r->text.find("Paris"), std::string::npos) << r->text;
  auto again = engine.chat(messages, o);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->text, r->text);  // greedy: the same reply
}

}  // namespace
}  // namespace cera
