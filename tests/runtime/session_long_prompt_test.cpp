// Prompts longer than the context (issue 16, item 7): the outcome must not depend on n_batch.
// A long first prompt is refused with its length and the context named, whatever the batch;
// with truncation it keeps exactly its head and tail (the logits equal a fresh run over those
// tokens); an append that overflows a conversation shifts it once, before evaluation, and the
// logits equal a fresh run over the kept tokens on the one-layer model (whose K/V depend on the
// token alone, the oracle session_test.cpp uses for shifts).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "api/engine.h"
#include "stories_engine_test.h"
#include "stories_model.h"

namespace cera::runtime {
namespace {

class LongPromptTest : public test::StoriesEngineTest {};

// A prompt of about 3x a 64-token context.
constexpr std::string_view kLong =
    "Once upon a time, there was a little bird who wanted to fly. The bird had a friend, a big "
    "dog named Max. Max liked to run in the park and play with the ball. One day, the bird saw a "
    "tall tree and wanted to fly to the top. Max said, \"Be careful!\" The bird flew up and up. "
    "At the top, the bird saw the whole town. It was so happy. Then it flew down to Max and they "
    "played all day in the sun. The end.";

std::vector<float> logits_of(Session& s) {
  const auto l = s.last_logits();
  return {l.begin(), l.end()};
}

TEST_F(LongPromptTest, RefusedWithItsLengthWhateverTheBatch) {
  const std::vector<int32_t> ids = engine_->tokenizer().encode(kLong, {.add_special = true});
  ASSERT_GT(ids.size(), 150u);
  for (int32_t batch : {4, 32, 64, 512}) {
    auto s = session({.n_ctx = 64, .n_batch = batch});
    const Status st = s->append_tokens(ids);
    ASSERT_FALSE(st.ok()) << "batch " << batch;
    EXPECT_EQ(st.code(), ErrorCode::kOutOfRange);
    EXPECT_NE(st.message().find("the prompt is " + std::to_string(ids.size()) + " tokens"), std::string::npos)
        << st.message();
    EXPECT_NE(st.message().find("context of 64 tokens"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("trained with 512"), std::string::npos) << st.message();
    EXPECT_EQ(s->stats().n_context_shifts, 0) << "nothing was evaluated";
    EXPECT_TRUE(s->tokens().empty());
  }
}

TEST_F(LongPromptTest, TruncationKeepsHeadAndTailWhateverTheBatch) {
  const std::vector<int32_t> ids = engine_->tokenizer().encode(kLong, {.add_special = true});
  for (int32_t n_keep : {0, 5}) {
    // The documented result: first max(n_keep, BOS) tokens, then the last (64 - head) / 2.
    const size_t head = n_keep == 0 ? 1 : 5;
    const size_t tail = (64 - head) / 2;
    std::vector<int32_t> expected(ids.begin(), ids.begin() + static_cast<long>(head));
    expected.insert(expected.end(), ids.end() - static_cast<long>(tail), ids.end());
    auto fresh = session({.n_ctx = 64});
    ASSERT_TRUE(fresh->append_tokens(expected).ok());
    const std::vector<float> reference = logits_of(*fresh);
    for (int32_t batch : {4, 32, 512}) {
      auto s = session({.n_ctx = 64, .n_batch = batch, .n_keep = n_keep, .truncate_long_prompt = true});
      const Status st = s->append_tokens(ids);
      ASSERT_TRUE(st.ok()) << st.to_string();
      EXPECT_EQ(s->tokens(), expected) << "batch " << batch << " n_keep " << n_keep;
      EXPECT_EQ(s->stats().n_prompt_tokens_dropped, static_cast<int64_t>(ids.size() - head - tail));
      EXPECT_EQ(s->stats().n_context_shifts, 0);
      const std::vector<float> got = logits_of(*s);
      ASSERT_EQ(got.size(), reference.size());
      float worst = 0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - reference[i]));
      EXPECT_LT(worst, 1e-4f) << "batch " << batch;
    }
  }
}

TEST(LongPromptShift, AnOverflowingAppendShiftsOnceWhateverTheBatch) {
  auto engine = api::Engine::load({.model_path = test::stories_one_layer_gguf(), .device = api::DeviceChoice::kCpu});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  const tokenizer::Tokenizer& tok = (*engine)->tokenizer();
  const std::vector<int32_t> first = tok.encode("Once upon a time, there was a little bird.", {.add_special = true});
  const std::vector<int32_t> second = tok.encode(" The bird had a friend, a big dog named Max. Max liked to run.");
  const std::vector<int32_t> third = tok.encode(" One day, the bird saw a tall tree and wanted to fly to the top.");
  std::vector<int32_t> kept_reference;
  std::vector<float> reference;
  for (int32_t batch : {3, 16, 512}) {
    auto s = (*engine)->new_session({.n_ctx = 64, .n_batch = batch, .n_keep = -1});
    ASSERT_TRUE(s.ok());
    ASSERT_LE(first.size() + second.size(), 64u);
    ASSERT_TRUE((*s)->append_tokens(first).ok());
    ASSERT_TRUE((*s)->append_tokens(second).ok());
    ASSERT_GT(first.size() + second.size() + third.size(), 64u);
    ASSERT_TRUE((*s)->append_tokens(third).ok());
    EXPECT_EQ((*s)->stats().n_context_shifts, 1) << "batch " << batch;
    // The first append (n_keep -1) and the whole third one survive; the second lost its head.
    const std::vector<int32_t>& kept = (*s)->tokens();
    ASSERT_GE(kept.size(), first.size() + third.size());
    EXPECT_TRUE(std::equal(first.begin(), first.end(), kept.begin()));
    EXPECT_TRUE(std::equal(third.begin(), third.end(), kept.end() - static_cast<long>(third.size())));
    if (kept_reference.empty()) {
      kept_reference = kept;
      auto fresh = (*engine)->new_session({.n_ctx = 64});
      ASSERT_TRUE((*fresh)->append_tokens(kept).ok());
      reference = logits_of(**fresh);
    }
    EXPECT_EQ(kept, kept_reference) << "batch " << batch;
    const std::vector<float> got = logits_of(**s);
    float worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - reference[i]));
    EXPECT_LT(worst, 1e-4f) << "batch " << batch;
  }
}

}  // namespace
}  // namespace cera::runtime
