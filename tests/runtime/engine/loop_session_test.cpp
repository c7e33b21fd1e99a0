// LoopSession on stories260K against the reference decode over a Session (generate_helpers.h,
// the independent single-sequence path): the same text, history and reasons for one prompt and
// for a three-turn conversation (whose later turns compute only their new tokens and at most a
// block more: the prefix cache), the same truncated first prompt, a history shift when the text
// appended does not fit, generation past the context, a full context without shifts, seeded
// sampling, stop strings, and cancel (from a sink and from another thread).
#include "runtime/engine/loop_session.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

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
    auto want = test::reference_generate(*session, kGreedy);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    EXPECT_EQ(got->text, want->result.text) << "turn " << i;
    EXPECT_EQ(streamed, got->text);
    EXPECT_EQ(got->reason, want->result.reason);
    EXPECT_EQ(got->n_generated, want->result.n_generated);
    // The conversation goes on: the reference evaluates its last sampled token now.
    if (want->pending) {
      ASSERT_TRUE(session->append_tokens(std::span(&*want->pending, 1)).ok());
    }
    EXPECT_EQ(ls.tokens(), session->tokens()) << "turn " << i;
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
  auto want = test::reference_generate(*session, kGreedy);
  ASSERT_TRUE(got.ok() && want.ok());
  EXPECT_EQ(got->text, want->result.text);
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

// A reply cut by its token limit exactly when the context fills leaves one token more than the
// context holds (its last, uncomputed): the next generate() shifts first (Session's rule) and goes
// on, or says the context is full when shifts are off.
TEST_F(LoopSessionTest, AReplyThatFilledTheContextGoesOnAfterAShift) {
  auto loop = make_loop(64);
  std::mt19937 rng(8);
  const std::vector<int32_t> prompt = test::random_prompt(rng, 40, tok());
  const GenerateOptions fill{.max_tokens = 25, .sampling = {.temperature = 0.0f}, .stop_at_end_of_generation = false};
  for (const bool shift : {true, false}) {
    LoopSession ls(*loop, tok(), {.n_keep = 4, .context_shift = shift});
    ASSERT_TRUE(ls.append_tokens(prompt).ok());
    auto first = ls.generate(fill, nullptr);
    ASSERT_TRUE(first.ok()) << first.status().to_string();
    ASSERT_EQ(ls.tokens().size(), 65u);  // 40 + 25: the last one was never computed
    auto next = ls.generate({.max_tokens = 5, .sampling = {.temperature = 0.0f}, .stop_at_end_of_generation = false},
                            nullptr);
    if (shift) {
      ASSERT_TRUE(next.ok()) << next.status().to_string();
      EXPECT_EQ(next->n_generated, 5);
      EXPECT_LE(static_cast<int32_t>(ls.tokens().size()), 65);
      EXPECT_GE(ls.stats().n_context_shifts, 1);
    } else {
      EXPECT_EQ(next.status().code(), ErrorCode::kOutOfRange);
      EXPECT_NE(next.status().message().find("context is full"), std::string::npos) << next.status().message();
    }
  }
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

// Greedy generation well past a 64-token context with n_keep 10: several shifts, the first
// n_keep tokens survive every one, and the text is the reference decode's (whose appends shift).
TEST_F(LoopSessionTest, GenerationContinuesPastTheContext) {
  const std::string prompt = "Once upon a time, there was a little bird who wanted to fly.";
  const GenerateOptions gen{.max_tokens = 150, .sampling = {.temperature = 0.0f}, .stop_at_end_of_generation = false};
  auto loop = make_loop(64);
  LoopSession ls(*loop, tok(), {.n_keep = 10});
  ASSERT_TRUE(ls.append_text(prompt, {.add_special = true}).ok());
  auto r = ls.generate(gen, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->n_generated, 150);
  EXPECT_GE(ls.stats().n_context_shifts, 2);
  EXPECT_LE(static_cast<int>(ls.tokens().size()), 64 + 1);  // the last token is not computed yet
  const std::vector<int32_t> ids = tok().encode(prompt, {.add_special = true});
  EXPECT_TRUE(std::equal(ids.begin(), ids.begin() + 10, ls.tokens().begin()));
  auto session = make_session(64, 10);
  ASSERT_TRUE(session->append_tokens(ids).ok());
  auto want = test::reference_generate(*session, gen);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  EXPECT_EQ(r->text, want->result.text);
  EXPECT_EQ(ls.stats().n_context_shifts, session->stats().n_context_shifts);
}

TEST_F(LoopSessionTest, WithoutContextShiftAFullContextStops) {
  const GenerateOptions gen{.max_tokens = 100, .sampling = {.temperature = 0.0f}, .stop_at_end_of_generation = false};
  auto loop = make_loop(32);
  LoopSession ls(*loop, tok(), {.context_shift = false});
  ASSERT_TRUE(ls.append_text("Once upon a time", {.add_special = true}).ok());
  auto r = ls.generate(gen, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->reason, StopReason::kContextFull);
  EXPECT_EQ(static_cast<int>(ls.tokens().size()), 32 + 1);  // the token that did not fit, not computed
  auto session = engine_->new_session({.n_ctx = 32, .context_shift = false, .kv_type = DType::kF32});
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->append_text("Once upon a time", true).ok());
  auto want = test::reference_generate(**session, gen);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  EXPECT_EQ(want->result.reason, StopReason::kContextFull);
  EXPECT_EQ(r->text, want->result.text);
  EXPECT_EQ(r->n_generated, want->result.n_generated);
}

TEST_F(LoopSessionTest, SameSeedSameTextAndTopKOneIsGreedy) {
  auto loop = make_loop(256);
  auto run = [&](SamplingParams p) {
    LoopSession ls(*loop, tok(), {});
    EXPECT_TRUE(ls.append_text("One day, a girl", {.add_special = true}).ok());
    auto r = ls.generate({.max_tokens = 60, .sampling = p}, nullptr);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? r->text : std::string();
  };
  const SamplingParams hot{.temperature = 1.2f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 42};
  const std::string a = run(hot), b = run(hot);
  EXPECT_EQ(a, b);
  SamplingParams other = hot;
  other.seed = 43;
  EXPECT_NE(run(other), a);
  const SamplingParams top1{.temperature = 1.0f, .top_k = 1, .seed = 7};
  EXPECT_EQ(run(top1), run({.temperature = 0.0f}));
  // The seeded text is the reference decode's with the same sampler.
  auto session = make_session(256);
  ASSERT_TRUE(session->append_text("One day, a girl", true).ok());
  auto want = test::reference_generate(*session, {.max_tokens = 60, .sampling = hot});
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(a, want->result.text);
}

TEST_F(LoopSessionTest, StopStringsEndGenerationBeforeTheString) {
  GenerateOptions gen{.max_tokens = 200, .sampling = {.temperature = 0.0f}};
  auto session = make_session(256);
  ASSERT_TRUE(session->append_text("Once upon a time", true).ok());
  auto full = test::reference_generate(*session, gen);
  ASSERT_TRUE(full.ok());
  const size_t at = full->result.text.find("Lily");
  ASSERT_NE(at, std::string::npos) << full->result.text;
  auto loop = make_loop(256);
  LoopSession ls(*loop, tok(), {});
  ASSERT_TRUE(ls.append_text("Once upon a time", {.add_special = true}).ok());
  gen.stop = {"Lily"};
  std::string got;
  auto r = ls.generate(gen, [&](std::string_view p) { got += p; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->reason, StopReason::kStopString);
  EXPECT_EQ(got, full->result.text.substr(0, at));
  EXPECT_EQ(r->text, got);
}

TEST_F(LoopSessionTest, CancelFromAnotherThreadStops) {
  auto loop = make_loop(512);
  LoopSession ls(*loop, tok(), {});
  ASSERT_TRUE(ls.append_text("Once", {.add_special = true}).ok());
  int pieces = 0;
  auto r = ls.generate({.max_tokens = 100000, .stop_at_end_of_generation = false}, [&](std::string_view) {
    if (++pieces != 5) return;
    std::thread([&ls] { ls.cancel(); }).join();
    // generate() polls the flag every 20 ms: hold the loop's thread until it has surely seen it,
    // so that the bound below does not depend on the machine's speed.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->reason, StopReason::kCancelled);
  EXPECT_LT(r->n_generated, 50);
}

}  // namespace
}  // namespace cera::runtime
