// The engine loop's prefix cache on stories260K (CPU, F32 K/V): a preempted request resumes from
// the blocks it published (worked out block by block below), the cache salt keeps requests
// apart, the cache off takes nothing, and a randomized batch of requests on three shared prefixes
// with preemption equals each request alone in a loop without the cache.
#include <gtest/gtest.h>

#include <cstdio>

#include "runtime/engine/engine_loop.h"
#include "runtime/engine/engine_test_helpers.h"

namespace cera::runtime {
namespace {

using test::RequestSpec;

class EnginePrefixCache : public test::StoriesEngineTest {
 protected:
  static EngineLoopOptions without_cache(EngineLoopOptions o) {
    o.prefix_cache = false;
    return o;
  }
};

// A pool of 6 blocks of 16 and two requests of 40 prompt + 40 generated tokens. A's first token
// is held until B is queued, so B runs one step behind A. Both hold 3 blocks; when A needs its
// 4th (entry 48), B is preempted and publishes its 2 full blocks B0, B1 (released last first:
// B2 to the free list, then B1, B0 onto the LRU). A's 4th block is B2, its 5th evicts B1 (the
// LRU's head). When A ends, B is readmitted on B0: 16 tokens from the cache.
TEST_F(EnginePrefixCache, APreemptedRequestResumesFromTheBlocksItPublished) {
  std::mt19937 rng(8);
  std::vector<RequestSpec> specs;
  for (int i = 0; i < 2; ++i) {
    specs.push_back({.prompt = test::random_prompt(rng, 40, tok()), .max_tokens = 40, .stop_at_end_of_generation = false});
  }
  const EngineLoopOptions o{.n_ctx = 96, .max_running = 2, .kv_tokens = 96};
  const std::vector<RequestResult> solo = test::solo_through_loop(model(), tok(), specs, without_cache(o));
  auto loop = EngineLoop::create(model(), tok(), o);
  ASSERT_TRUE(loop.ok()) << loop.status().to_string();
  test::Gate gate;
  RequestParams a = test::params_of(specs[0]);
  a.on_token = gate.sink();
  const RequestHandle ha = *(*loop)->submit(std::move(a));
  gate.wait_reached();
  const RequestHandle hb = *(*loop)->submit(test::params_of(specs[1]));
  gate.open();
  test::expect_same(ha.wait(), solo[0], 0);
  test::expect_same(hb.wait(), solo[1], 1);
  EXPECT_EQ(ha.wait().n_preemptions, 0);
  EXPECT_EQ(hb.wait().n_preemptions, 1);
  EXPECT_EQ(hb.wait().n_cached_tokens, 0);  // its first admission found nothing
  (*loop)->shutdown(ShutdownMode::kDrain);
  const EngineLoopStats st = (*loop)->stats();
  EXPECT_EQ(st.n_prefix_queries, 3);  // A, B, B again
  EXPECT_EQ(st.n_prefix_hits, 1);
  EXPECT_EQ(st.n_prompt_tokens_cached, 16);
  EXPECT_TRUE((*loop)->check_pool_after_shutdown().ok()) << (*loop)->check_pool_after_shutdown().to_string();
}

TEST_F(EnginePrefixCache, OnlyRequestsWithTheSameSaltShareBlocks) {
  std::mt19937 rng(9);
  const RequestSpec spec{.prompt = test::random_prompt(rng, 50, tok()), .max_tokens = 4, .stop_at_end_of_generation = false};
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = test::kEngineCtx});
  ASSERT_TRUE(loop.ok()) << loop.status().to_string();
  auto run = [&](uint64_t salt) {
    RequestParams p = test::params_of(spec);
    p.cache_salt = salt;
    return (*loop)->submit(std::move(p))->wait();
  };
  const RequestResult first = run(1);
  EXPECT_EQ(first.n_cached_tokens, 0);
  const RequestResult other = run(2);
  EXPECT_EQ(other.n_cached_tokens, 0);
  const RequestResult same = run(1);
  EXPECT_EQ(same.n_cached_tokens, 48);  // (50 - 1) / 16 whole blocks
  EXPECT_EQ(same.tokens, first.tokens);
  EXPECT_EQ(other.tokens, first.tokens);
}

TEST_F(EnginePrefixCache, WithTheCacheOffNothingIsTaken) {
  std::mt19937 rng(10);
  const RequestSpec spec{.prompt = test::random_prompt(rng, 50, tok()), .max_tokens = 4};
  auto loop = EngineLoop::create(model(), tok(), without_cache({.n_ctx = test::kEngineCtx}));
  ASSERT_TRUE(loop.ok());
  for (int i = 0; i < 2; ++i) EXPECT_EQ((*loop)->submit(test::params_of(spec))->wait().n_cached_tokens, 0);
  (*loop)->shutdown(ShutdownMode::kDrain);
  EXPECT_EQ((*loop)->stats().n_prefix_queries, 0);
  EXPECT_EQ((*loop)->stats().n_prompt_tokens_cached, 0);
  EXPECT_EQ((*loop)->stats().n_forward_tokens, 2 * (50 + 3));
}

// Requests on three shared prefixes (64-200 tokens) with random suffixes and lengths, submitted at
// random times into a pool of one context (a fraction of the demand): every output equals the request alone without
// the cache; prefixes are taken from the cache, and requests are preempted.
TEST_F(EnginePrefixCache, SharedPrefixesWithPreemptionEqualAlone) {
  std::mt19937 rng(31);
  std::vector<std::vector<int32_t>> prefixes;
  for (int i = 0; i < 3; ++i) prefixes.push_back(test::random_prompt(rng, 64 + static_cast<int32_t>(rng() % 137), tok()));
  const int n = test::requests_for(36, 12);
  std::vector<RequestSpec> specs;
  for (int i = 0; i < n; ++i) {
    RequestSpec s{.prompt = prefixes[static_cast<size_t>(i) % 3], .max_tokens = 1 + static_cast<int32_t>(rng() % 60),
                  .stop_at_end_of_generation = false};
    const std::vector<int32_t> suffix = test::random_prompt(rng, 2 + static_cast<int32_t>(rng() % 60), tok());
    s.prompt.insert(s.prompt.end(), suffix.begin() + 1, suffix.end());
    specs.push_back(std::move(s));
  }
  // The pool holds one context: with the prefixes shared, a quarter of the demand would not preempt.
  const EngineLoopOptions o{.n_ctx = test::kEngineCtx, .max_running = 16, .kv_tokens = test::kEngineCtx};
  const std::vector<RequestResult> solo = test::solo_through_loop(model(), tok(), specs, without_cache(o));
  auto loop = EngineLoop::create(model(), tok(), o);
  ASSERT_TRUE(loop.ok()) << loop.status().to_string();
  std::vector<RequestHandle> handles;
  for (const RequestSpec& s : specs) {
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 1500));
    handles.push_back(*(*loop)->submit(test::params_of(s)));
  }
  int64_t first_admissions_cached = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const RequestResult& r = handles[i].wait();
    test::expect_same(r, solo[i], i);
    first_admissions_cached += r.n_cached_tokens;
  }
  (*loop)->shutdown(ShutdownMode::kDrain);
  const EngineLoopStats st = (*loop)->stats();
  EXPECT_GT(st.n_prefix_hits, 0);
  EXPECT_GT(st.n_preemptions, 0);
  EXPECT_GT(st.n_prompt_tokens_cached, first_admissions_cached);  // re-admissions after preemption took some too
  EXPECT_TRUE((*loop)->check_pool_after_shutdown().ok()) << (*loop)->check_pool_after_shutdown().to_string();
  std::printf("shared prefixes: %d requests, %lld of %lld admissions hit, %lld tokens from the cache (%lld at first "
              "admissions), %lld preemptions, %lld tokens computed\n",
              n, static_cast<long long>(st.n_prefix_hits), static_cast<long long>(st.n_prefix_queries),
              static_cast<long long>(st.n_prompt_tokens_cached), static_cast<long long>(first_admissions_cached),
              static_cast<long long>(st.n_preemptions), static_cast<long long>(st.n_forward_tokens));
}

}  // namespace
}  // namespace cera::runtime
