// Engine::embed on a decoder (stories260K): the last token's hidden state, times the file's
// output matrix, picks the token greedy generation picks next (the reference: the model's own
// logits through generate()); embeddings made while a generation streams equal those made alone,
// and that generation still equals llama2.c's greedy text; pooling none / normalisation shapes;
// refusals name the text.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "cera/engine.h"
#include "format/gguf.h"
#include "stories_model.h"

namespace cera {
namespace {

class FacadeEmbedTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto e = Engine::load({.model_path = test::stories_gguf().string(), .device = DeviceChoice::kCpu});
    ASSERT_TRUE(e) << e.error().message;
    engine_ = std::move(e).value().release();
  }
  static void TearDownTestSuite() { delete engine_; }
  inline static Engine* engine_ = nullptr;
};

// argmax over the vocabulary of W h, W the file's output matrix (F32 in the imported stories).
int32_t greedy_token_of(std::span<const float> h) {
  auto file = format::GgufFile::open(test::stories_gguf());
  EXPECT_TRUE(file.ok());
  const format::GgufTensorInfo* t = file->find_tensor("output.weight");
  if (t == nullptr) t = file->find_tensor("token_embd.weight");
  EXPECT_TRUE(t != nullptr && t->dtype == DType::kF32);
  const auto bytes = file->tensor_data(*t);
  std::vector<float> w(bytes.size() / sizeof(float));
  std::memcpy(w.data(), bytes.data(), w.size() * sizeof(float));
  const size_t e = h.size();
  int32_t best = -1;
  double best_logit = -1e300;
  for (size_t v = 0; v * e < w.size(); ++v) {
    double s = 0;
    for (size_t i = 0; i < e; ++i) s += double(w[v * e + i]) * h[i];
    if (s > best_logit) best_logit = s, best = static_cast<int32_t>(v);
  }
  return best;
}

TEST_F(FacadeEmbedTest, LastHiddenStatePicksTheGreedyNextToken) {
  EXPECT_EQ(engine_->info().default_pooling, Pooling::kLast);
  for (const std::string text : {"Once upon a time", "The little dog ran to the", "Lily and Tom"}) {
    auto e = engine_->embed({text}, {.pooling = Pooling::kLast, .normalize = false});
    ASSERT_TRUE(e) << e.error().message;
    ASSERT_EQ(e->size(), 1u);
    ASSERT_EQ((*e)[0].values.size(), static_cast<size_t>(engine_->info().n_embd));
    GenerateOptions o;
    o.max_tokens = 1;
    o.sampling.temperature = 0;
    auto c = engine_->generate(text, o);
    ASSERT_TRUE(c) << c.error().message;
    ASSERT_EQ(c->tokens.size(), 1u);
    EXPECT_EQ(greedy_token_of((*e)[0].values), c->tokens[0]) << text;
  }
}

TEST_F(FacadeEmbedTest, EmbeddingsBesideAGenerationEqualThoseAlone) {
  const std::vector<std::string> texts = {"Once upon a time", "a big red ball", "Tom was sad."};
  auto alone = engine_->embed(texts);
  ASSERT_TRUE(alone) << alone.error().message;
  GenerateOptions o;
  o.max_tokens = 256;
  o.sampling.temperature = 0;
  auto s = engine_->start("", o);
  ASSERT_TRUE(s) << s.error().message;
  for (int round = 0; round < 5; ++round) {
    auto beside = engine_->embed(texts);
    ASSERT_TRUE(beside) << beside.error().message;
    for (size_t j = 0; j < texts.size(); ++j) EXPECT_EQ((*beside)[j].values, (*alone)[j].values) << texts[j];
  }
  auto r = (*s)->result();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->text, test::stories_reference_text().substr(0, r->text.size()));
  EXPECT_EQ(r->tokens.size(), 256u);
}

TEST_F(FacadeEmbedTest, PoolingNoneGivesEveryTokenAndNormalisationUnitVectors) {
  const std::string text = "Once upon a time";
  auto tokens = engine_->tokenize(text);
  ASSERT_TRUE(tokens);
  auto none = engine_->embed({text}, {.pooling = Pooling::kNone, .normalize = true});
  ASSERT_TRUE(none) << none.error().message;
  const auto e = static_cast<size_t>(engine_->info().n_embd);
  ASSERT_EQ((*none)[0].n_tokens, static_cast<int32_t>(tokens->size()));
  ASSERT_EQ((*none)[0].values.size(), tokens->size() * e);
  for (size_t t = 0; t < tokens->size(); ++t) {
    double sq = 0;
    for (size_t i = 0; i < e; ++i) sq += double((*none)[0].values[t * e + i]) * (*none)[0].values[t * e + i];
    EXPECT_NEAR(std::sqrt(sq), 1.0, 1e-5) << "token " << t;
  }
}

TEST_F(FacadeEmbedTest, RefusalsNameTheInput) {
  auto empty = engine_->embed({"fine", ""});
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(empty.error().message, "input 1 is empty: there is nothing to embed");
  std::string long_text;
  for (int i = 0; i < 600; ++i) long_text += "dog ";
  auto too_long = engine_->embed({"fine", "also fine", long_text});
  ASSERT_FALSE(too_long);
  EXPECT_EQ(too_long.error().kind, ErrorKind::kOutOfRange);
  EXPECT_NE(too_long.error().message.find("input 2 is "), std::string::npos) << too_long.error().message;
  EXPECT_NE(too_long.error().message.find("max_batch_tokens"), std::string::npos) << too_long.error().message;
}

}  // namespace
}  // namespace cera
