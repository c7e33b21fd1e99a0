// The engine loop on stories260K (CPU, F32 K/V): batched equals alone against each request's solo
// run through the loop and through the reference decode over a Session (generate_helpers.h),
// preemption with a pool a quarter of the demand, a randomized soak with cancellation, seeded
// sampling in a batch, context shifts (also pipelined), submit's errors and submit_all's batches.
#include "runtime/engine/engine_loop.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "runtime/engine/engine_test_helpers.h"

namespace cera::runtime {
namespace {

using test::RequestSpec;

class EngineLoopTest : public test::StoriesEngineTest {
 protected:
  // Demand of a set of requests in KV tokens: every prompt plus every token it may generate.
  static int32_t demand(const std::vector<RequestSpec>& specs) {
    int32_t d = 0;
    for (const RequestSpec& s : specs) d += static_cast<int32_t>(s.prompt.size()) + s.max_tokens;
    return d;
  }
  void batched_equals_alone(DecodePipeline pipeline);
  void soak(DecodePipeline pipeline);
  void context_shift_matches_reference(DecodePipeline pipeline);
};

// 64 greedy requests (24 in sanitizer / Debug builds), prompts of 1-300 tokens, random
// max_tokens, submitted at random times while others run: each one's tokens equal its solo run,
// which equals the reference decode's.
void EngineLoopTest::batched_equals_alone(DecodePipeline pipeline) {
  std::mt19937 rng(64);
  const int n = test::requests_for(64, 24);
  std::vector<RequestSpec> specs = test::random_specs(rng, n, 300, 120, tok());
  specs[0].stop_at_end_of_generation = false;  // the gated request must produce tokens
  specs[0].max_tokens = std::max(specs[0].max_tokens, 8);
  const std::vector<RequestResult> solo = test::solo_through_loop(model(), tok(), specs);
  for (size_t i = 0; i < specs.size(); ++i) test::expect_matches_session(solo[i], test::through_session(*engine_, specs[i]), i);

  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = test::kEngineCtx, .max_running = 64, .pipeline = pipeline});
  ASSERT_TRUE(loop.ok()) << loop.status().to_string();
  test::Gate gate;
  std::vector<RequestHandle> handles;
  RequestParams first = test::params_of(specs[0]);
  first.on_token = gate.sink();
  handles.push_back(*(*loop)->submit(std::move(first)));
  gate.wait_reached();  // the loop is inside request 0's first token: the next 7 join its next step
  for (size_t i = 1; i < 8; ++i) handles.push_back(*(*loop)->submit(test::params_of(specs[i])));
  gate.open();
  for (size_t i = 8; i < specs.size(); ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
    auto h = (*loop)->submit(test::params_of(specs[i]));
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    handles.push_back(*h);
  }
  for (size_t i = 0; i < specs.size(); ++i) test::expect_same(handles[i].wait(), solo[i], i);
  (*loop)->shutdown(ShutdownMode::kDrain);
  const EngineLoopStats st = (*loop)->stats();
  EXPECT_GE(st.max_rows_in_step, 8);
  EXPECT_EQ(st.n_finished, n);
  EXPECT_TRUE((*loop)->check_pool_after_shutdown().ok()) << (*loop)->check_pool_after_shutdown().to_string();
  if (pipeline == DecodePipeline::kOn) {
    EXPECT_GT(st.n_steps_ahead, 0);
  }
  std::printf("batched: %lld steps (%lld queued ahead, %lld rows discarded), %lld tokens computed, at most %d "
              "requests in a step\n",
              static_cast<long long>(st.n_steps), static_cast<long long>(st.n_steps_ahead),
              static_cast<long long>(st.n_rows_discarded), static_cast<long long>(st.n_forward_tokens),
              st.max_rows_in_step);
}

TEST_F(EngineLoopTest, BatchedEqualsAlone) { batched_equals_alone(DecodePipeline::kOff); }

// The same with the overlap forced on (the CPU runs each step at once; the bookkeeping is the
// one CUDA uses): steps queued ahead on the argmax ids, rows discarded when a token ended them.
TEST_F(EngineLoopTest, BatchedEqualsAlonePipelined) { batched_equals_alone(DecodePipeline::kOn); }

// A pool a quarter of the demand: requests are preempted and recomputed, and still every output
// equals its solo run; afterwards every block is free and the pool's bookkeeping is intact.
TEST_F(EngineLoopTest, PreemptionDoesNotChangeOutputs) {
  std::mt19937 rng(4);
  const std::vector<RequestSpec> specs =
      test::random_specs(rng, test::requests_for(32, 16), 200, 100, tok(), /*stop_at_eog=*/false);
  const std::vector<RequestResult> solo = test::solo_through_loop(model(), tok(), specs);
  for (size_t i = 0; i < specs.size(); i += 4) test::expect_matches_session(solo[i], test::through_session(*engine_, specs[i]), i);

  const int32_t pool = std::max(test::kEngineCtx, demand(specs) / 4);
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = test::kEngineCtx, .max_running = 32, .kv_tokens = pool});
  ASSERT_TRUE(loop.ok()) << loop.status().to_string();
  std::vector<RequestHandle> handles;
  for (const RequestSpec& s : specs) handles.push_back(*(*loop)->submit(test::params_of(s)));
  int32_t preempted = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const RequestResult& r = handles[i].wait();
    test::expect_same(r, solo[i], i);
    EXPECT_EQ(r.reason, FinishReason::kMaxTokens);
    preempted += r.n_preemptions > 0;
  }
  (*loop)->shutdown(ShutdownMode::kDrain);
  EXPECT_GT((*loop)->stats().n_preemptions, 0);
  EXPECT_GT(preempted, 0);  // requests that were recomputed, and whose outputs are checked above
  EXPECT_TRUE((*loop)->check_pool_after_shutdown().ok()) << (*loop)->check_pool_after_shutdown().to_string();
  std::printf("preemption: pool %d of %d tokens demanded, %lld preemptions over %d requests\n", pool, demand(specs),
              static_cast<long long>((*loop)->stats().n_preemptions), preempted);
}

// Random lengths, random arrival, random cancellation (before admission, from a sink, from the
// test thread) and a pool a quarter of the demand. 300 requests here, 100 in sanitizer / Debug
// builds (the 2,000 is the soak's size for a longer run; the suite keeps to CI's time:
// CERA_ENGINE_SOAK_REQUESTS sets the count).
void EngineLoopTest::soak(DecodePipeline pipeline) {
  // CERA_ENGINE_SOAK_REQUESTS=2000 runs the full soak.
  const char* env = std::getenv("CERA_ENGINE_SOAK_REQUESTS");
  const int kRequests = env != nullptr && std::atoi(env) > 0 ? std::atoi(env) : test::requests_for(300, 100);
  std::mt19937 rng(2000);
  const std::vector<RequestSpec> specs = test::random_specs(rng, kRequests, 120, 48, tok());
  const std::vector<RequestResult> solo = test::solo_through_loop(model(), tok(), specs);
  const int32_t pool = std::max(test::kEngineCtx, demand(specs) / kRequests * 16 / 4);  // a quarter of 16 in flight
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = test::kEngineCtx, .max_running = 16,
                                                  .max_waiting = kRequests, .kv_tokens = pool,
                                                  .pipeline = pipeline});
  ASSERT_TRUE(loop.ok()) << loop.status().to_string();
  enum class Cancel { kNone, kAtOnce, kInSink, kLater };
  std::vector<Cancel> how(kRequests);
  std::vector<RequestHandle> handles(kRequests);
  std::vector<std::atomic<bool>> cancel_sent(kRequests), submitted(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    const uint32_t r = rng() % 10;
    how[i] = r < 6 ? Cancel::kNone : r == 6 ? Cancel::kAtOnce : r < 9 ? Cancel::kInSink : Cancel::kLater;
    RequestParams p = test::params_of(specs[i]);
    if (how[i] == Cancel::kInSink) {
      const int32_t after = static_cast<int32_t>(rng() % 8);
      auto count = std::make_shared<int32_t>(0);
      p.on_token = [&, i, after, count](int32_t) {
        if ((*count)++ != after) return;
        cancel_sent[i] = true;
        while (!submitted[i].load()) std::this_thread::yield();  // handles[i] is set once submit returned
        handles[i].cancel();
      };
    }
    if (i % 10 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
    auto h = (*loop)->submit(std::move(p));
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    handles[i] = *h;
    submitted[i] = true;
    if (how[i] == Cancel::kAtOnce) {
      cancel_sent[i] = true;
      handles[i].cancel();
    }
    if (how[i] == Cancel::kLater && i >= 5 && how[i - 5] == Cancel::kNone) {
      cancel_sent[i - 5] = true;
      handles[i - 5].cancel();  // some other request, wherever it is now
    }
  }
  int n_cancelled = 0;
  for (int i = 0; i < kRequests; ++i) {
    const RequestResult& r = handles[i].wait();
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    if (r.reason == FinishReason::kCancelled) {
      ++n_cancelled;
      EXPECT_TRUE(cancel_sent[i]) << "request " << i << " cancelled unasked";
      ASSERT_LE(r.tokens.size(), solo[i].tokens.size()) << i;
      EXPECT_TRUE(std::equal(r.tokens.begin(), r.tokens.end(), solo[i].tokens.begin())) << "request " << i;
    } else {
      test::expect_same(r, solo[i], i);  // finished (or cancelled too late): exactly the solo run
    }
  }
  (*loop)->shutdown(ShutdownMode::kDrain);
  EXPECT_GT(n_cancelled, 0);
  EXPECT_TRUE((*loop)->check_pool_after_shutdown().ok()) << (*loop)->check_pool_after_shutdown().to_string();
  std::printf("soak: %d requests, %d cancelled, %lld preemptions, %lld steps\n", kRequests, n_cancelled,
              static_cast<long long>((*loop)->stats().n_preemptions), static_cast<long long>((*loop)->stats().n_steps));
  std::printf("soak: %lld steps queued ahead, %lld rows discarded\n",
              static_cast<long long>((*loop)->stats().n_steps_ahead),
              static_cast<long long>((*loop)->stats().n_rows_discarded));
}

TEST_F(EngineLoopTest, RandomizedSoakWithCancellation) { soak(DecodePipeline::kOff); }
TEST_F(EngineLoopTest, RandomizedSoakWithCancellationPipelined) { soak(DecodePipeline::kOn); }

// A sampled request draws from its own RNG stream: the same tokens alone, in a batch beside other
// sampled and greedy requests, and through the reference decode on a Session.
TEST_F(EngineLoopTest, SeededSamplingIsTheSameInABatch) {
  std::mt19937 rng(5);
  std::vector<RequestSpec> specs = test::random_specs(rng, 12, 60, 60, tok());
  for (size_t i = 0; i < specs.size(); i += 2) {
    specs[i].sampling = {.temperature = 0.9f, .seed = 1000 + i};
    specs[i].stop_at_end_of_generation = false;
    specs[i].max_tokens = 40;
  }
  const std::vector<RequestResult> solo = test::solo_through_loop(model(), tok(), specs);
  for (size_t i = 0; i < specs.size(); i += 2) test::expect_matches_session(solo[i], test::through_session(*engine_, specs[i]), i);
  EXPECT_NE(solo[0].tokens, solo[2].tokens);  // different seeds, different streams
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = test::kEngineCtx, .max_batch_tokens = 64});
  ASSERT_TRUE(loop.ok());
  std::vector<RequestHandle> handles;
  for (const RequestSpec& s : specs) handles.push_back(*(*loop)->submit(test::params_of(s)));
  for (size_t i = 0; i < specs.size(); ++i) test::expect_same(handles[i].wait(), solo[i], i);
}

// Batches of one with the overlap forced on: every decode step is queued ahead, so the step after
// an end-of-generation token or a stop string is queued and then discarded; outputs, reasons and
// streamed text equal the plain loop's.
TEST_F(EngineLoopTest, PipelinedSoloRunsEqualPlainOnes) {
  std::mt19937 rng(17);
  std::vector<RequestSpec> specs = test::random_specs(rng, test::requests_for(16, 6), 40, 200, tok());
  const std::vector<RequestResult> plain = test::solo_through_loop(model(), tok(), specs);
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = test::kEngineCtx, .max_running = 1,
                                                  .pipeline = DecodePipeline::kOn});
  ASSERT_TRUE(loop.ok()) << loop.status().to_string();
  for (size_t i = 0; i < specs.size(); ++i) {
    RequestParams p = test::params_of(specs[i]);
    std::string streamed;
    p.on_text = [&](std::string_view t) { streamed.append(t); };
    const RequestHandle h = *(*loop)->submit(std::move(p));
    const RequestResult& got = h.wait();
    test::expect_same(got, plain[i], i);
    EXPECT_EQ(streamed, got.text) << i;
    // A stop string taken from the middle of the plain output ends it there.
    if (plain[i].text.size() < 24) continue;
    RequestParams q = test::params_of(specs[i]);
    const std::string stop = plain[i].text.substr(plain[i].text.size() / 2, 3);
    q.stop = {stop};
    const RequestHandle hq = *(*loop)->submit(std::move(q));
    const RequestResult& cut = hq.wait();
    EXPECT_EQ(cut.reason, FinishReason::kStopString) << i;
    EXPECT_EQ(cut.text, plain[i].text.substr(0, plain[i].text.find(stop))) << i;
  }
  (*loop)->shutdown(ShutdownMode::kDrain);
  const EngineLoopStats st = (*loop)->stats();
  EXPECT_GT(st.n_steps_ahead, 0);
  EXPECT_GT(st.n_rows_discarded, 0);  // the rows queued after a token that ended their request
  EXPECT_TRUE((*loop)->check_pool_after_shutdown().ok()) << (*loop)->check_pool_after_shutdown().to_string();
  std::printf("pipelined solo: %lld of %lld steps queued ahead, %lld rows discarded\n",
              static_cast<long long>(st.n_steps_ahead), static_cast<long long>(st.n_steps),
              static_cast<long long>(st.n_rows_discarded));
}

TEST_F(EngineLoopTest, StreamedTextAndStopStringsMatchSession) {
  RequestSpec spec{.prompt = tok().encode("Once upon a time", {.add_special = true}), .max_tokens = 200};
  const test::ReferenceRun full = test::through_session(*engine_, spec);
  const size_t at = full.result.text.find("Lily");
  ASSERT_NE(at, std::string::npos) << full.result.text;
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = test::kEngineCtx});
  ASSERT_TRUE(loop.ok());
  std::string streamed;
  RequestParams p = test::params_of(spec);
  p.stop = {"Lily"};
  p.on_text = [&](std::string_view s) { streamed += s; };
  const RequestResult r = (*loop)->submit(std::move(p))->wait();
  EXPECT_EQ(r.reason, FinishReason::kStopString);
  EXPECT_EQ(streamed, full.result.text.substr(0, at));
  EXPECT_EQ(r.text, streamed);
}

// A request longer than its context shifts as Session's append shifts (the same KvCache::shift,
// the same rule): the same tokens and text as the reference decode with n_keep, several shifts
// deep, alone and beside other requests; its final context is the shifted history. With the
// overlap forced on, steps are queued ahead between the shifts (never across one) and the
// outcome is the same; without context_shift the request ends when the context is full.
void EngineLoopTest::context_shift_matches_reference(DecodePipeline pipeline) {
  const int32_t n_ctx = 64, n_keep = 5;
  const std::vector<int32_t> prompt = tok().encode("Once upon a time", {.add_special = true});
  auto session = engine_->new_session({.n_ctx = n_ctx, .n_keep = n_keep, .context_shift = true});
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->append_tokens(prompt).ok());
  auto want = test::reference_generate(
      **session, {.max_tokens = 200, .sampling = {.temperature = 0.0f}, .stop_at_end_of_generation = false});
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  ASSERT_GE((*session)->stats().n_context_shifts, 3);
  // The same without context shifts (the Sessions run before the loop owns the model).
  auto strict = engine_->new_session({.n_ctx = n_ctx, .context_shift = false});
  ASSERT_TRUE(strict.ok());
  ASSERT_TRUE((*strict)->append_tokens(prompt).ok());
  auto want_full = test::reference_generate(
      **strict, {.max_tokens = 200, .sampling = {.temperature = 0.0f}, .stop_at_end_of_generation = false});
  ASSERT_TRUE(want_full.ok());
  ASSERT_EQ(want_full->result.reason, StopReason::kContextFull);
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = n_ctx, .max_batch_tokens = 16, .max_running = 4,
                                                  .pipeline = pipeline});
  ASSERT_TRUE(loop.ok());
  std::mt19937 rng(9);
  std::vector<RequestHandle> others;
  for (const RequestSpec& s : test::random_specs(rng, 3, 40, 60, tok())) others.push_back(*(*loop)->submit(test::params_of(s)));
  RequestParams p{.prompt = prompt, .sampling = {.temperature = 0.0f}, .max_tokens = 200, .stop_at_end_of_generation = false};
  p.context_shift = {.enabled = true, .n_keep = n_keep};
  const RequestHandle h = *(*loop)->submit(std::move(p));
  const RequestResult& got = h.wait();
  ASSERT_TRUE(got.status.ok()) << got.status.to_string();
  EXPECT_EQ(got.reason, FinishReason::kMaxTokens);
  EXPECT_EQ(got.text, want->result.text);
  EXPECT_EQ(got.tokens, want->tokens);
  EXPECT_EQ(got.n_context_shifts, (*session)->stats().n_context_shifts);
  // The reference evaluates its last token only if the talk goes on; the loop's context holds it.
  std::vector<int32_t> history = (*session)->tokens();
  ASSERT_TRUE(want->pending.has_value());
  history.push_back(*want->pending);
  EXPECT_EQ(got.context, history);
  for (const RequestHandle& o : others) EXPECT_TRUE(o.wait().status.ok());
  // Without context_shift the same request ends when the context is full, as the reference does.
  const RequestHandle full = *(*loop)->submit({.prompt = prompt, .sampling = {.temperature = 0.0f}, .max_tokens = 200,
                                               .stop_at_end_of_generation = false});
  EXPECT_EQ(full.wait().reason, FinishReason::kContextFull);
  EXPECT_EQ(full.wait().tokens, want_full->tokens);
  EXPECT_EQ(full.wait().text, want_full->result.text);
  EXPECT_EQ(static_cast<int32_t>(full.wait().context.size()), n_ctx + 1);  // the last token, not computed, too
  (*loop)->shutdown(ShutdownMode::kDrain);
  if (pipeline == DecodePipeline::kOn) {
    EXPECT_GT((*loop)->stats().n_steps_ahead, 0);
  }
  EXPECT_TRUE((*loop)->check_pool_after_shutdown().ok()) << (*loop)->check_pool_after_shutdown().to_string();
}

TEST_F(EngineLoopTest, ContextShiftMatchesSession) { context_shift_matches_reference(DecodePipeline::kOff); }
TEST_F(EngineLoopTest, ContextShiftMatchesSessionPipelined) { context_shift_matches_reference(DecodePipeline::kOn); }

// on_finish runs once, after the last text, with the result the handle then reports; the gauges
// show a running and a waiting request, and a pool whose blocks are all free once both ended.
TEST_F(EngineLoopTest, OnFinishAndPoolGauges) {
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = 64, .max_running = 1, .max_waiting = 2, .kv_tokens = 128});
  ASSERT_TRUE(loop.ok());
  EXPECT_EQ((*loop)->stats().n_kv_blocks, 128 / 16);
  test::Gate gate;
  std::mutex mu;
  std::string streamed;
  std::vector<RequestResult> finished;
  RequestParams p{.prompt = {1, 100, 200}, .max_tokens = 12, .stop_at_end_of_generation = false, .on_token = gate.sink()};
  p.sampling.temperature = 0;
  p.on_text = [&](std::string_view t) {
    std::lock_guard lock(mu);
    streamed += t;
  };
  p.on_finish = [&](const RequestResult& r) {
    std::lock_guard lock(mu);
    finished.push_back(r);
    EXPECT_EQ(streamed, r.text);  // nothing streams after on_finish
  };
  auto running = (*loop)->submit(p);
  ASSERT_TRUE(running.ok());
  gate.wait_reached();
  auto waiting = (*loop)->submit({.prompt = {1}, .max_tokens = 1});
  ASSERT_TRUE(waiting.ok());
  const EngineLoopStats busy = (*loop)->stats();
  EXPECT_EQ(busy.n_running, 1);
  EXPECT_EQ(busy.n_waiting, 1);
  gate.open();
  const RequestResult& r = running->wait();
  waiting->wait();
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(finished.size(), 1u);
    EXPECT_EQ(finished[0].tokens, r.tokens);
    EXPECT_EQ(finished[0].text, r.text);
    EXPECT_EQ(r.tokens.size(), 12u);
  }
  (*loop)->shutdown(ShutdownMode::kDrain);
  const EngineLoopStats idle = (*loop)->stats();
  EXPECT_EQ(idle.n_running + idle.n_waiting, 0);
  EXPECT_EQ(idle.n_kv_blocks_free, idle.n_kv_blocks);
}

TEST_F(EngineLoopTest, SubmitErrorsNameTheProblem) {
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = 64, .max_running = 1, .max_waiting = 2});
  ASSERT_TRUE(loop.ok());
  EXPECT_EQ((*loop)->submit({}).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ((*loop)->submit({.prompt = {1, 9999}}).status().code(), ErrorCode::kInvalidArgument);
  const Status too_long = (*loop)->submit({.prompt = std::vector<int32_t>(65, 1)}).status();
  EXPECT_EQ(too_long.code(), ErrorCode::kOutOfRange);
  EXPECT_NE(too_long.message().find("context of 64"), std::string::npos) << too_long.message();
  test::Gate gate;
  auto running = (*loop)->submit({.prompt = {1}, .max_tokens = 10, .stop_at_end_of_generation = false, .on_token = gate.sink()});
  ASSERT_TRUE(running.ok());
  gate.wait_reached();  // running; the queue is empty
  ASSERT_TRUE((*loop)->submit({.prompt = {1}, .max_tokens = 1}).ok());
  ASSERT_TRUE((*loop)->submit({.prompt = {1}, .max_tokens = 1}).ok());
  const Status full = (*loop)->submit({.prompt = {1}, .max_tokens = 1}).status();
  EXPECT_EQ(full.code(), ErrorCode::kUnavailable);
  EXPECT_NE(full.message().find("max_waiting"), std::string::npos) << full.message();
  gate.open();
  EXPECT_EQ(running->wait().reason, FinishReason::kMaxTokens);
  (*loop)->shutdown(ShutdownMode::kDrain);
  EXPECT_EQ((*loop)->submit({.prompt = {1}}).status().code(), ErrorCode::kCancelled);
  EXPECT_TRUE((*loop)->check_pool_after_shutdown().ok());
}

// submit_all queues a batch whole or not at all: a bad request names its place and queues none, a
// queue without room for all of them queues none; a batch queued while the loop is held in a step
// is all waiting at once, and each request's tokens equal its run alone (greedy).
TEST_F(EngineLoopTest, SubmitAllQueuesTheWholeBatchOrNone) {
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = 64, .max_running = 4, .max_waiting = 3});
  ASSERT_TRUE(loop.ok());
  auto batch_of = [](std::vector<std::vector<int32_t>> prompts) {
    std::vector<RequestParams> b;
    for (auto& pr : prompts) {
      b.push_back({.prompt = std::move(pr), .max_tokens = 6, .stop_at_end_of_generation = false});
      b.back().sampling.temperature = 0;
    }
    return b;
  };
  const std::vector<std::vector<int32_t>> prompts = {{1, 100, 200}, {1, 7, 8, 9}, {1, 300}};
  std::vector<std::vector<int32_t>> alone;
  for (RequestParams& p : batch_of(prompts)) alone.push_back((*loop)->submit(std::move(p))->wait().tokens);
  test::Gate gate;
  auto held = (*loop)->submit({.prompt = {1}, .max_tokens = 4, .stop_at_end_of_generation = false, .on_token = gate.sink()});
  ASSERT_TRUE(held.ok());
  gate.wait_reached();  // the loop is inside a step; the queue is empty
  const Status bad = (*loop)->submit_all(batch_of({{1, 2}, {1, 9999}, {1, 3}})).status();
  EXPECT_EQ(bad.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("request 2 of 3"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("9999"), std::string::npos) << bad.message();
  EXPECT_EQ((*loop)->stats().n_waiting, 0);
  const Status no_room = (*loop)->submit_all(batch_of({{1}, {1}, {1}, {1}})).status();
  EXPECT_EQ(no_room.code(), ErrorCode::kUnavailable);
  EXPECT_NE(no_room.message().find("no room for 4 more"), std::string::npos) << no_room.message();
  EXPECT_NE(no_room.message().find("max_waiting"), std::string::npos) << no_room.message();
  EXPECT_EQ((*loop)->stats().n_waiting, 0);
  auto handles = (*loop)->submit_all(batch_of(prompts));
  ASSERT_TRUE(handles.ok()) << handles.status().to_string();
  ASSERT_EQ(handles->size(), prompts.size());
  EXPECT_EQ((*loop)->stats().n_waiting, 3);
  gate.open();
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ((*handles)[i].wait().tokens, alone[i]) << "request " << i;
  EXPECT_EQ(held->wait().reason, FinishReason::kMaxTokens);
  EXPECT_TRUE((*loop)->submit_all({})->empty());  // an empty batch queues nothing
  (*loop)->shutdown(ShutdownMode::kDrain);
  EXPECT_EQ((*loop)->submit_all(batch_of(prompts)).status().code(), ErrorCode::kCancelled);
  EXPECT_TRUE((*loop)->check_pool_after_shutdown().ok());
}

TEST_F(EngineLoopTest, ShutdownCancelsWhatIsLeft) {
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = test::kEngineCtx, .max_running = 2});
  ASSERT_TRUE(loop.ok());
  test::Gate gate;
  std::vector<RequestHandle> handles;
  const RequestParams endless{.prompt = {1}, .max_tokens = 100000, .stop_at_end_of_generation = false};
  RequestParams first = endless;
  first.on_token = gate.sink();
  handles.push_back(*(*loop)->submit(first));
  gate.wait_reached();  // the loop is held inside a step
  for (int i = 0; i < 5; ++i) handles.push_back(*(*loop)->submit(endless));
  std::thread stopper([&] { (*loop)->shutdown(ShutdownMode::kCancel); });
  // Once submit is refused, shutdown has marked everything cancelled; then let the step end.
  while ((*loop)->submit({.prompt = {1}, .max_tokens = 1}).status().code() != ErrorCode::kCancelled) {
    std::this_thread::yield();  // (a request queued here is cancelled too)
  }
  gate.open();
  stopper.join();
  for (const RequestHandle& h : handles) EXPECT_EQ(h.wait().reason, FinishReason::kCancelled);
  EXPECT_TRUE((*loop)->check_pool_after_shutdown().ok()) << (*loop)->check_pool_after_shutdown().to_string();
}

}  // namespace
}  // namespace cera::runtime
