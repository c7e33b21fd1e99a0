// Sessions (evaluation) on the stories260K model: context shift against a fresh run over the
// kept tokens, an append that does not fit without shifts, reset. Generation's behaviours (stop
// strings, shifts while generating, a full context, cancellation, seeded sampling) are the engine
// loop's: tests/runtime/engine/loop_session_test.cpp checks them through LoopSession.
#include <gtest/gtest.h>

#include <cmath>

#include "api/engine.h"
#include "stories_engine_test.h"
#include "stories_model.h"
#include "generate_helpers.h"

namespace cera::runtime {
namespace {

class SessionTest : public test::StoriesEngineTest {};

float max_abs_diff(std::span<const float> a, std::span<const float> b, float* max_ref) {
  float d = 0, m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::fabs(a[i] - b[i]));
    m = std::max(m, std::fabs(b[i]));
  }
  *max_ref = m;
  return d;
}

// After a shift the cache holds the kept tokens' K re-rotated to new positions. In a one-layer
// model K/V depend on the token alone, so the logits must equal a fresh run over the kept
// tokens (with more layers, kept tokens remember the dropped ones through their hidden states,
// by design of context shift, and only this exact one-layer comparison is a fair oracle).
TEST(ContextShift, LogitsMatchAFreshRunOverTheKeptTokens) {
  auto engine = api::Engine::load({.model_path = test::stories_one_layer_gguf(), .device = api::DeviceChoice::kCpu});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  for (int n_keep : {0, 1, 10}) {
    auto s = (*engine)->new_session({.n_ctx = 48, .n_keep = n_keep});
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->append_text("Once upon a time, there was a little bird who wanted to fly.", true).ok());
    auto r = test::generate_through_shifts(**s);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_GE((*s)->stats().n_context_shifts, 2);
    ASSERT_TRUE((*s)->append_text(" The end", false).ok());
    auto fresh = (*engine)->new_session({.n_ctx = 48});
    ASSERT_TRUE(fresh.ok());
    ASSERT_TRUE((*fresh)->append_tokens((*s)->tokens()).ok());
    float max_ref = 0;
    const float diff = max_abs_diff((*s)->last_logits(), (*fresh)->last_logits(), &max_ref);
    EXPECT_LT(diff / max_ref, 1e-4f) << "n_keep " << n_keep << ": max |delta| " << diff << ", max |logit| " << max_ref;
    std::printf("context shift, n_keep %d: %lld shifts, max |delta logit| / max |logit| = %.2e\n", n_keep,
                static_cast<long long>((*s)->stats().n_context_shifts), diff / max_ref);
  }
}

TEST_F(SessionTest, WithoutContextShiftAnAppendThatDoesNotFitIsAnError) {
  auto s = session({.n_ctx = 32, .context_shift = false});
  ASSERT_TRUE(s->append_text("Once upon a time", true).ok());
  const size_t n = s->tokens().size();
  std::vector<int32_t> more(32 - n, 20);
  ASSERT_TRUE(s->append_tokens(more).ok());  // exactly full
  const int32_t one = 21;
  const Status full = s->append_tokens(std::span(&one, 1));
  EXPECT_EQ(full.code(), ErrorCode::kOutOfRange);
  EXPECT_NE(full.message().find("context is full"), std::string::npos) << full.message();
  EXPECT_EQ(s->tokens().size(), 32u);  // nothing was shifted or evaluated
  // A prompt longer than the context is an error, not a crash.
  auto t = session({.n_ctx = 8, .context_shift = false});
  const Status st = t->append_text("Once upon a time there was a very long prompt indeed", true);
  EXPECT_EQ(st.code(), ErrorCode::kOutOfRange);
}

TEST_F(SessionTest, ResetForgetsHistory) {
  auto s = session({.n_ctx = 128});
  ASSERT_TRUE(s->append_text("Once upon a time", true).ok());
  const std::vector<float> first(s->last_logits().begin(), s->last_logits().end());
  ASSERT_TRUE(s->append_text(" there was", false).ok());
  s->reset();
  ASSERT_TRUE(s->append_text("Once upon a time", true).ok());
  const auto again = s->last_logits();
  for (size_t i = 0; i < first.size(); ++i) ASSERT_EQ(first[i], again[i]) << i;
}

}  // namespace
}  // namespace cera::runtime
