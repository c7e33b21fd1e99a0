// The step planner without a model: budgets, chunking, FCFS admission, the bounded queue,
// preemption of the youngest and its recompute, and a randomized run that checks the pool model
// after every step and that every request finishes.
#include "runtime/engine/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace cera::runtime {
namespace {

SchedulerConfig config(int32_t budget, int32_t block_size, int32_t n_blocks) {
  return {.max_batch_tokens = budget, .max_running = 8, .max_waiting = 16, .block_size = block_size,
          .n_blocks = n_blocks, .n_ctx = block_size * n_blocks};
}

void expect_chunk(const ScheduledChunk& c, RequestId id, int32_t first, int32_t n, bool output) {
  EXPECT_EQ(c.id, id);
  EXPECT_EQ(c.first, first) << "request " << id;
  EXPECT_EQ(c.n, n) << "request " << id;
  EXPECT_EQ(c.output, output) << "request " << id;
}

TEST(Scheduler, LongPromptsGoInChunksAndDecodesOneTokenEach) {
  Scheduler s(config(8, 4, 100));
  ASSERT_TRUE(s.add(1, 20).ok());
  ASSERT_TRUE(s.add(2, 3).ok());
  StepPlan p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 1u);  // the whole budget went to the first prompt
  expect_chunk(p.chunks[0], 1, 0, 8, false);
  EXPECT_TRUE(p.chunks[0].admitted);
  p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  expect_chunk(p.chunks[0], 1, 8, 8, false);
  p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 2u);  // the prompt's last 4 tokens, then 3 of the budget's 4 for the next
  expect_chunk(p.chunks[0], 1, 16, 4, true);
  expect_chunk(p.chunks[1], 2, 0, 3, true);
  EXPECT_EQ(p.n_tokens(), 7);
  s.append_token(1);
  s.append_token(2);
  p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  expect_chunk(p.chunks[0], 1, 20, 1, true);
  expect_chunk(p.chunks[1], 2, 3, 1, true);
  EXPECT_EQ(s.counts(1).n_blocks, 6);  // 21 computed tokens in blocks of 4
  EXPECT_TRUE(s.check_integrity().ok());
}

TEST(Scheduler, AdmissionIsFirstComeFirstServedByKvBudget) {
  Scheduler s(config(512, 4, 10));
  ASSERT_TRUE(s.add(1, 36).ok());  // 9 of the 10 blocks
  ASSERT_TRUE(s.add(2, 8).ok());   // 2 blocks: does not fit next to 1
  ASSERT_TRUE(s.add(3, 4).ok());   // 1 block would fit, but must not overtake 2
  StepPlan p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(s.state(2), RequestState::kWaiting);
  EXPECT_EQ(s.state(3), RequestState::kWaiting);
  EXPECT_TRUE(s.remove(1));
  p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].id, 2u);
  EXPECT_EQ(p.chunks[1].id, 3u);
  EXPECT_EQ(s.n_free_blocks(), 7);
  EXPECT_FALSE(s.remove(1));
}

TEST(Scheduler, MaxRunningBoundsAdmission) {
  SchedulerConfig c = config(512, 4, 100);
  c.max_running = 2;
  Scheduler s(c);
  for (RequestId id = 1; id <= 3; ++id) ASSERT_TRUE(s.add(id, 5).ok());
  EXPECT_EQ(s.schedule().chunks.size(), 2u);
  EXPECT_EQ(s.n_running(), 2);
  EXPECT_EQ(s.n_waiting(), 1);
}

TEST(Scheduler, TheQueueIsBoundedAndImpossiblePromptsAreRefused) {
  SchedulerConfig c = config(512, 4, 10);
  c.max_waiting = 2;
  c.n_ctx = 30;
  Scheduler s(c);
  ASSERT_TRUE(s.add(1, 5).ok());
  ASSERT_TRUE(s.add(2, 5).ok());
  const Status full = s.add(3, 5);
  EXPECT_EQ(full.code(), ErrorCode::kUnavailable);
  EXPECT_NE(full.message().find("2 requests"), std::string::npos) << full.message();
  EXPECT_NE(full.message().find("max_waiting"), std::string::npos) << full.message();
  s.schedule();  // both admitted: the queue has room again
  EXPECT_TRUE(s.add(3, 5).ok());
  const Status long_prompt = s.add(4, 31);
  EXPECT_EQ(long_prompt.code(), ErrorCode::kOutOfRange);
  EXPECT_NE(long_prompt.message().find("context of 30"), std::string::npos) << long_prompt.message();
}

TEST(Scheduler, PreemptionFreesTheYoungestWhichIsRecomputedLater) {
  Scheduler s(config(64, 4, 4));  // 16 tokens of KV
  for (RequestId id = 1; id <= 3; ++id) ASSERT_TRUE(s.add(id, 4).ok());
  StepPlan p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 3u);
  EXPECT_EQ(s.n_free_blocks(), 1);
  for (RequestId id = 1; id <= 3; ++id) s.append_token(id);
  // Each needs a fifth slot, a new block: 1 takes the last free one, 2 forces out 3 (the youngest).
  p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  expect_chunk(p.chunks[0], 1, 4, 1, true);
  expect_chunk(p.chunks[1], 2, 4, 1, true);
  ASSERT_EQ(p.preempted, std::vector<RequestId>{3});
  EXPECT_EQ(s.state(3), RequestState::kPreempted);
  EXPECT_EQ(s.counts(3).n_computed, 0);
  EXPECT_EQ(s.counts(3).n_tokens, 5);  // its prompt and the token it had sampled
  EXPECT_EQ(s.n_preemptions(), 1);
  EXPECT_TRUE(s.check_integrity().ok());
  s.append_token(1);
  s.append_token(2);
  p = s.schedule();
  EXPECT_EQ(p.chunks.size(), 2u);  // 3 needs 2 blocks, none is free
  EXPECT_EQ(s.state(3), RequestState::kPreempted);
  s.append_token(1);
  s.append_token(2);
  ASSERT_TRUE(s.remove(1));
  p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  expect_chunk(p.chunks[0], 2, 6, 1, true);
  expect_chunk(p.chunks[1], 3, 0, 5, true);  // the whole of prompt + output, recomputed
  EXPECT_TRUE(p.chunks[1].admitted);
  EXPECT_EQ(s.state(3), RequestState::kRunning);
  EXPECT_TRUE(s.check_integrity().ok());
}

TEST(Scheduler, PreemptedRequestsKeepTheirOrderAtTheFrontOfTheQueue) {
  Scheduler s(config(64, 2, 6));  // 12 tokens
  for (RequestId id = 1; id <= 3; ++id) ASSERT_TRUE(s.add(id, 4).ok());
  ASSERT_TRUE(s.add(4, 2).ok());
  s.schedule();  // 1, 2, 3 take every block; 4 waits
  EXPECT_EQ(s.n_free_blocks(), 0);
  for (RequestId id = 1; id <= 3; ++id) s.append_token(id);
  // 1 needs a block: 3 goes; 2 needs one: 3's two blocks were enough for 1 and 2.
  StepPlan p = s.schedule();
  ASSERT_EQ(p.preempted, std::vector<RequestId>{3});
  s.append_token(1);
  s.append_token(2);
  p = s.schedule();  // 1 and 2 fit their sixth token in their third blocks
  EXPECT_TRUE(p.preempted.empty());
  s.append_token(1);
  s.append_token(2);
  p = s.schedule();  // seventh tokens: 1 takes a block by preempting 2, and there is none for 2's turn
  ASSERT_EQ(p.preempted, std::vector<RequestId>{2});
  ASSERT_EQ(p.chunks.size(), 1u);
  ASSERT_TRUE(s.remove(1));
  p = s.schedule();  // the older preempted request comes back first (with its 7 tokens), 3 still waits
  ASSERT_EQ(p.chunks.size(), 1u);
  expect_chunk(p.chunks[0], 2, 0, 7, true);
  EXPECT_EQ(s.state(3), RequestState::kPreempted);
  EXPECT_EQ(s.state(4), RequestState::kWaiting);
  ASSERT_TRUE(s.remove(2));
  p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  expect_chunk(p.chunks[0], 3, 0, 5, true);
  expect_chunk(p.chunks[1], 4, 0, 2, true);
}

// Random lengths, budgets and pools: after every step the pool model holds, every chunk starts
// at the request's computed tokens, and every request reaches its length.
TEST(Scheduler, RandomizedRunsFinishEveryRequest) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 50; ++trial) {
    const int32_t bs = 1 + static_cast<int32_t>(rng() % 16), n_blocks = 4 + static_cast<int32_t>(rng() % 40);
    SchedulerConfig c = config(1 + static_cast<int32_t>(rng() % 64), bs, n_blocks);
    c.max_running = 1 + static_cast<int32_t>(rng() % 8);
    c.max_waiting = 1000;
    Scheduler s(c);
    struct Want {
      int32_t total;
      int32_t n_tokens;
      int32_t computed = 0;
    };
    std::map<RequestId, Want> live;
    for (RequestId id = 1; id <= 30; ++id) {
      const int32_t prompt = 1 + static_cast<int32_t>(rng() % (c.n_ctx / 2));
      const int32_t total = std::min(c.n_ctx, prompt + static_cast<int32_t>(rng() % 20));
      ASSERT_TRUE(s.add(id, prompt).ok());
      live[id] = {total, prompt};
    }
    for (int step = 0; !live.empty(); ++step) {
      ASSERT_LT(step, 100000) << "no progress";
      const StepPlan p = s.schedule();
      ASSERT_TRUE(s.check_integrity().ok()) << s.check_integrity().to_string();
      for (RequestId id : p.preempted) live[id].computed = 0;
      ASSERT_TRUE(!p.chunks.empty() || !p.preempted.empty());
      ASSERT_LE(p.n_tokens(), c.max_batch_tokens);
      for (const ScheduledChunk& ch : p.chunks) {
        Want& w = live.at(ch.id);
        ASSERT_EQ(ch.first, w.computed);
        w.computed += ch.n;
        ASSERT_EQ(ch.output, w.computed == w.n_tokens);
        if (!ch.output) continue;
        if (w.n_tokens == w.total) {
          ASSERT_TRUE(s.remove(ch.id));
          live.erase(ch.id);
        } else {
          s.append_token(ch.id);
          ++w.n_tokens;
        }
      }
    }
    EXPECT_TRUE(s.idle());
    EXPECT_EQ(s.n_free_blocks(), n_blocks);
  }
}

}  // namespace
}  // namespace cera::runtime
