// LoopSession on stories260K against Session (the independent single-sequence path): the same
// text, history and reasons for one prompt and for a three-turn conversation (whose later turns
// compute only their new tokens and at most a block more: the prefix cache), the same truncated
// first prompt, a history shift when the text appended does not fit, and cancel.
#include "runtime/engine/loop_session.h"

#include <gtest/gtest.h>

#include "runtime/engine/engine_test_helpers.h"

namespace cera::runtime {
namespace {

class LoopSessionTest : public test::StoriesEngineTest {
 protected:
  std::unique_ptr<EngineLoop> make_loop(int32_t n_ctx) {
    auto loop = EngineLoop::create(engine_->model(), engine_->tokenizer(),
                                   {.n_ctx = n_ctx, .max_running = 1, .kv_tokens = n_ctx});
    EXPECT_TRUE(loop.ok()) << loop.status().to_string();
    return std::move(loop).value();
  }
  std::unique_ptr<Session> make_session(int32_t n_ctx, int32_t n_keep = 0, bool truncate = false) {
    auto s = engine_->new_session({.n_ctx = n_ctx, .n_keep = n_keep, .truncate_long_prompt = truncate,
                                   .kv_type = DType::kF32});
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    return std::move(s).value();
  }
  const tokenizer::Tokenizer& tok() { return engine_->tokenizer(); }
};

const GenerateOptions kGreedy{.max_tokens = 60, .sampling = {.temperature = 0.0f}};

TEST_F(LoopSessionTest, ConversationEqualsSessionAndReusesEarlierTurns) {
  auto loop = make_loop(512);
  LoopSession ls(*loop, tok(), {.n_keep = -1});
  auto session = make_session(512, -1);
  const std::vector<std::string> turns = {"Once upon a time", " Lily went to the park.", " The sun was hot."};
  for (size_t i = 0; i < turns.size(); ++i) {
    const tokenizer::EncodeOptions enc{.add_special = true};
    ASSERT_TRUE(ls.append_text(turns[i], enc).ok());
    ASSERT_TRUE(session->append_text(turns[i], enc).ok());
    std::string streamed;
    const int64_t computed_before = ls.stats().n_prompt_tokens;
    const size_t history = ls.tokens().size();
    auto got = ls.generate(kGreedy, [&](std::string_view t) { streamed += t; });
    auto want = session->generate(kGreedy, nullptr);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(got->text, want->text) << "turn " << i;
    EXPECT_EQ(streamed, got->text);
    EXPECT_EQ(got->reason, want->reason);
    EXPECT_EQ(got->n_generated, want->n_generated);
    // Session keeps its last sampled token pending; its history then ends before it.
    std::vector<int32_t> h = ls.tokens();
    if (h.size() == session->tokens().size() + 1) h.pop_back();
    EXPECT_EQ(h, session->tokens()) << "turn " << i;
    const int64_t computed = ls.stats().n_prompt_tokens - computed_before;
    if (i > 0) {
      // The earlier turns' full blocks come from the prefix cache: the new text and at most
      // one block (16 tokens) more are computed.
      EXPECT_LE(computed, static_cast<int64_t>(tok().encode(turns[i], {}).size()) + 16 + 1) << "turn " << i;
      std::printf("turn %zu: %lld of %zu prompt tokens computed\n", i, static_cast<long long>(computed), history);
    }
  }
}

TEST_F(LoopSessionTest, LongFirstPromptIsRefusedOrTruncatedAsSessionDoes) {
  std::mt19937 rng(3);
  const std::vector<int32_t> prompt = test::random_prompt(rng, 200, tok());
  auto loop = make_loop(128);
  LoopSession strict(*loop, tok(), {});
  const Status st = strict.append_tokens(prompt);
  EXPECT_EQ(st.code(), ErrorCode::kOutOfRange);
  EXPECT_NE(st.message().find("200 tokens"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("128"), std::string::npos) << st.message();
  LoopSession cut(*loop, tok(), {.n_keep = 4, .truncate_long_prompt = true});
  ASSERT_TRUE(cut.append_tokens(prompt).ok());
  auto session = make_session(128, 4, /*truncate=*/true);
  ASSERT_TRUE(session->append_tokens(prompt).ok());
  EXPECT_EQ(cut.tokens(), session->tokens());
  EXPECT_EQ(cut.stats().n_prompt_tokens_dropped, session->stats().n_prompt_tokens_dropped);
  auto got = cut.generate(kGreedy, nullptr);
  auto want = session->generate(kGreedy, nullptr);
  ASSERT_TRUE(got.ok() && want.ok());
  EXPECT_EQ(got->text, want->text);
}

TEST_F(LoopSessionTest, TextThatDoesNotFitShiftsTheHistory) {
  auto loop = make_loop(64);
  LoopSession ls(*loop, tok(), {.n_keep = 3});
  std::mt19937 rng(5);
  ASSERT_TRUE(ls.append_tokens(test::random_prompt(rng, 50, tok())).ok());
  const std::vector<int32_t> before = ls.tokens();
  const std::vector<int32_t> more = test::random_prompt(rng, 30, tok());
  ASSERT_TRUE(ls.append_tokens(more).ok());
  // Session's rule: keep 3, drop max((50 - 3) / 2, 50 + 30 - 64) = 23.
  std::vector<int32_t> want(before.begin(), before.begin() + 3);
  want.insert(want.end(), before.begin() + 26, before.end());
  want.insert(want.end(), more.begin(), more.end());
  EXPECT_EQ(ls.tokens(), want);
  EXPECT_EQ(ls.stats().n_context_shifts, 1);
  auto r = ls.generate({.max_tokens = 200, .sampling = {.temperature = 0.0f}, .stop_at_end_of_generation = false}, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->n_generated, 200);  // the loop shifted it further in place
  EXPECT_GT(ls.stats().n_context_shifts, 1);
  EXPECT_LE(static_cast<int32_t>(ls.tokens().size()), 65);
}

TEST_F(LoopSessionTest, CancelStopsTheReplyAndAnEmptyHistoryIsAnError) {
  auto loop = make_loop(512);
  LoopSession ls(*loop, tok(), {});
  EXPECT_EQ(ls.generate(kGreedy, nullptr).status().code(), ErrorCode::kInvalidArgument);
  ASSERT_TRUE(ls.append_text("Once upon a time", {.add_special = true}).ok());
  int pieces = 0;
  auto r = ls.generate({.max_tokens = 400, .sampling = {.temperature = 0.0f}, .stop_at_end_of_generation = false},
                       [&](std::string_view) {
                         if (++pieces == 5) ls.cancel();  // on the loop's thread, as cera run's stdout check does
                       });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->reason, StopReason::kCancelled);
  EXPECT_LT(r->n_generated, 400);
  // The history holds what was generated; the next reply goes on from it.
  auto next = ls.generate(kGreedy, nullptr);
  ASSERT_TRUE(next.ok());
  EXPECT_NE(next->reason, StopReason::kCancelled);
}

}  // namespace
}  // namespace cera::runtime
