// EngineLoop::run_exclusive: a job runs on the loop's thread between steps, while requests are
// generating (with the overlap forced on, so a job must also wait out a step queued ahead), and
// the requests' tokens still equal their reference decode over a Session.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "runtime/engine/engine_loop.h"
#include "runtime/engine/engine_test_helpers.h"

namespace cera::runtime {
namespace {

class EngineLoopExclusiveTest : public test::StoriesEngineTest {};

TEST_F(EngineLoopExclusiveTest, JobsRunBetweenStepsWithoutChangingTokens) {
  std::mt19937 rng(21);
  std::vector<test::RequestSpec> specs = test::random_specs(rng, 6, 40, 60, tok());
  for (test::RequestSpec& s : specs) s.stop_at_end_of_generation = false;
  // The references first: nothing else may run the model while a loop lives.
  std::vector<test::ReferenceRun> reference;
  for (const test::RequestSpec& s : specs) reference.push_back(test::through_session(*engine_, s));
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = test::kEngineCtx, .max_running = 8, .pipeline = DecodePipeline::kOn});
  ASSERT_TRUE(loop.ok()) << loop.status().to_string();
  std::vector<RequestHandle> handles;
  for (const test::RequestSpec& s : specs) handles.push_back(*(*loop)->submit(test::params_of(s)));
  // Jobs from another thread while they run; each must see the loop's thread and no step in flight.
  std::atomic<int> ran{0};
  std::thread::id loop_thread;
  std::thread other([&] {
    for (int i = 0; i < 20; ++i) {
      const Status st = (*loop)->run_exclusive([&] {
        ++ran;
        loop_thread = std::this_thread::get_id();
      });
      EXPECT_TRUE(st.ok()) << st.to_string();
    }
  });
  other.join();
  EXPECT_EQ(ran.load(), 20);
  EXPECT_NE(loop_thread, std::this_thread::get_id());
  for (size_t i = 0; i < specs.size(); ++i) test::expect_matches_session(handles[i].wait(), reference[i], i);
  (*loop)->shutdown(ShutdownMode::kDrain);
  // After shutdown a job is refused with a message, never left waiting.
  const Status late = (*loop)->run_exclusive([] {});
  EXPECT_EQ(late.code(), ErrorCode::kUnavailable);
  EXPECT_NE(late.message().find("shutting down"), std::string::npos) << late.message();
  EXPECT_TRUE((*loop)->check_pool_after_shutdown().ok());
}

// With nothing to generate, a job runs at once (the idle loop wakes for it).
TEST_F(EngineLoopExclusiveTest, IdleLoopRunsAJob) {
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = test::kEngineCtx});
  ASSERT_TRUE(loop.ok());
  bool ran = false;
  ASSERT_TRUE((*loop)->run_exclusive([&] { ran = true; }).ok());
  EXPECT_TRUE(ran);
}

}  // namespace
}  // namespace cera::runtime
