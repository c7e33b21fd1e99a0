// Prefix cache acceptance (issue 17, deliverable 4) on a dense model (the llama fixture), gemma3
// (sliding-window layers: paged with a prefix cache, so they resume exactly at any block
// boundary), lfm2 and lfm2moe (convolution state: checkpoints at block ends). Two requests share
// a 1,000-token prefix and differ after it; the second, run after the first and while the first
// runs, must take all 1,000 prefix tokens from the cache, compute only its suffix (counted by the
// loop's forward tokens), and give exactly the greedy tokens it gives alone in a loop without a
// prefix cache (CPU, F32 K/V: bit-exact), with the same log-probabilities to the last bit (the
// tokens alone are a weak oracle on these tiny random models: a wrong convolution state at the
// resume point once left every greedy token unchanged). CERA_TEST_DEVICE=cuda runs it on CUDA:
// equal tokens, log-probabilities within 1e-3 (a 23-token suffix chunk may take other kernels
// than the 255-token chunk that computes it alone), the largest difference printed. The *_tp2
// variants split the model over 2 tensor-parallel ranks: the same must hold for the ranks' caches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "api/engine.h"
#include "fixture_models.h"
#include "runtime/engine/engine_test_helpers.h"
#include "test_device.h"

namespace cera::runtime {
namespace {

constexpr int32_t kPrefix = 1000;  // a multiple of the block size: the whole prefix is cacheable
constexpr int32_t kBlock = 8;
constexpr int32_t kSuffixA = 37, kSuffixB = 23, kGen = 12;


class PrefixCacheModels : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const test::TestDevice device = test::test_device();
    ASSERT_TRUE(device.error.empty()) << device.error;
    tolerance_ = device.choice == api::DeviceChoice::kCpu ? 0.0f : 1e-3f;
    // "<fixture>_tp<N>": the model split over N tensor-parallel ranks (all on GPU 0 on CUDA),
    // whose KV cache keeps each rank's K/V, convolution state and block checkpoints.
    const std::string& param = GetParam();
    const size_t tp = param.find("_tp");
    const int ranks = tp == std::string::npos ? 1 : std::stoi(param.substr(tp + 3));
    auto e = api::Engine::load({.model_path = test::fixture_gguf(param.substr(0, tp)), .device = device.choice,
                                .kv_type = api::KvTypeChoice::kF32, .tensor_parallel = ranks,
                                .devices = std::vector<int32_t>(device.choice == api::DeviceChoice::kCuda ? ranks : 0, 0)});
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    engine_ = std::move(e).value();
    ASSERT_EQ(std::max<size_t>(1, engine_->model().ranks().size()), size_t(ranks));
    std::mt19937 rng(1000);
    const tokenizer::Tokenizer& tok = engine_->tokenizer();
    const std::vector<int32_t> prefix = test::random_prompt(rng, kPrefix, tok);
    for (int32_t n : {kSuffixA, kSuffixB}) {
      test::RequestSpec s{.prompt = prefix, .max_tokens = kGen, .stop_at_end_of_generation = false};
      const std::vector<int32_t> suffix = test::random_prompt(rng, n + 1, tok);  // [0] is BOS: skipped
      s.prompt.insert(s.prompt.end(), suffix.begin() + 1, suffix.end());
      specs_.push_back(std::move(s));
    }
    if (specs_[1].prompt[kPrefix] == specs_[0].prompt[kPrefix]) ++specs_[1].prompt[kPrefix];  // differ right after the prefix
    // The reference: each request alone, without a prefix cache.
    EngineLoopOptions plain = options_;
    plain.prefix_cache = false;
    plain.max_running = 1;
    auto loop = EngineLoop::create(engine_->model(), tok, plain);
    ASSERT_TRUE(loop.ok()) << loop.status().to_string();
    for (const test::RequestSpec& s : specs_) reference_.push_back((*loop)->submit(params(s))->wait());
  }
  static RequestParams params(const test::RequestSpec& s) {
    RequestParams p = test::params_of(s);
    p.logprobs = true;
    p.top_logprobs = 4;
    return p;
  }
  // Equal tokens, text and reason, and logprobs within tolerance_ (0 on the CPU: to the bit).
  void expect_same(const RequestResult& got, const RequestResult& want, size_t i) {
    test::expect_same(got, want, i);
    ASSERT_EQ(got.logprobs.size(), want.logprobs.size()) << "request " << i;
    float worst = 0.0f;
    for (size_t t = 0; t < got.logprobs.size(); ++t) {
      EXPECT_NEAR(got.logprobs[t].chosen.logprob, want.logprobs[t].chosen.logprob, tolerance_)
          << "request " << i << " token " << t;
      worst = std::max(worst, std::fabs(got.logprobs[t].chosen.logprob - want.logprobs[t].chosen.logprob));
      ASSERT_EQ(got.logprobs[t].top.size(), want.logprobs[t].top.size());
      for (size_t k = 0; k < got.logprobs[t].top.size(); ++k) {
        if (tolerance_ == 0.0f) {
          EXPECT_EQ(got.logprobs[t].top[k].token, want.logprobs[t].top[k].token) << i << " " << t;
        }
        EXPECT_NEAR(got.logprobs[t].top[k].logprob, want.logprobs[t].top[k].logprob, tolerance_) << i << " " << t;
      }
    }
    if (tolerance_ > 0.0f) std::printf("%s request %zu: largest logprob difference %.3g\n", GetParam().c_str(), i, worst);
  }
  void expect_b_took_the_prefix(const RequestResult& b, const EngineLoopStats& before, const EngineLoopStats& after,
                                const char* when) {
    expect_same(b, reference_[1], 1);
    EXPECT_EQ(b.n_prompt, kPrefix + kSuffixB);
    EXPECT_EQ(b.n_cached_tokens, kPrefix) << when;
    // Forward tokens spent on B: its suffix, then one per generated token but the last.
    EXPECT_EQ(after.n_forward_tokens - before.n_forward_tokens, kSuffixB + kGen - 1) << when;
    EXPECT_EQ(after.n_prefix_hits - before.n_prefix_hits, 1) << when;
    EXPECT_EQ(after.n_prompt_tokens_cached - before.n_prompt_tokens_cached, kPrefix) << when;
    std::printf("%s, B %s: %d prompt tokens, %d from the cache, %d computed (+%d decode tokens)\n", GetParam().c_str(),
                when, b.n_prompt, b.n_cached_tokens, b.n_prompt - b.n_cached_tokens, kGen - 1);
  }
  const EngineLoopOptions options_{.n_ctx = 1200, .max_batch_tokens = 256, .max_running = 4, .kv_block_size = kBlock};
  float tolerance_ = 0.0f;
  std::unique_ptr<api::Engine> engine_;
  std::vector<test::RequestSpec> specs_;  // A, B
  std::vector<RequestResult> reference_;
};

TEST_P(PrefixCacheModels, ASecondRequestComputesOnlyItsSuffixAfterTheFirst) {
  auto loop = EngineLoop::create(engine_->model(), engine_->tokenizer(), options_);
  ASSERT_TRUE(loop.ok()) << loop.status().to_string();
  const RequestResult a = (*loop)->submit(params(specs_[0]))->wait();
  expect_same(a, reference_[0], 0);
  EXPECT_EQ(a.n_cached_tokens, 0);
  const EngineLoopStats before = (*loop)->stats();
  const RequestResult b = (*loop)->submit(params(specs_[1]))->wait();
  expect_b_took_the_prefix(b, before, (*loop)->stats(), "after A");
  (*loop)->shutdown(ShutdownMode::kDrain);
  EXPECT_TRUE((*loop)->check_pool_after_shutdown().ok()) << (*loop)->check_pool_after_shutdown().to_string();
}

TEST_P(PrefixCacheModels, ASecondRequestComputesOnlyItsSuffixWhileTheFirstRuns) {
  auto loop = EngineLoop::create(engine_->model(), engine_->tokenizer(), options_);
  ASSERT_TRUE(loop.ok()) << loop.status().to_string();
  test::Gate gate;
  RequestParams pa = params(specs_[0]);
  pa.on_token = gate.sink();
  const RequestHandle a = *(*loop)->submit(std::move(pa));
  gate.wait_reached();  // A's prompt is computed and published; A decodes on beside B
  const EngineLoopStats before = (*loop)->stats();
  const RequestHandle b = *(*loop)->submit(params(specs_[1]));
  gate.open();
  const RequestResult& rb = b.wait();
  expect_same(a.wait(), reference_[0], 0);
  expect_same(rb, reference_[1], 1);
  EXPECT_EQ(rb.n_cached_tokens, kPrefix);
  (*loop)->shutdown(ShutdownMode::kDrain);
  const EngineLoopStats after = (*loop)->stats();
  // Both decode after the gate: A's remaining kGen - 1 tokens and B's suffix and decodes.
  EXPECT_EQ(after.n_forward_tokens - before.n_forward_tokens, (kGen - 1) + kSuffixB + (kGen - 1));
  EXPECT_GE(after.max_rows_in_step, 2);
  std::printf("%s, B while A runs: %d prompt tokens, %d from the cache, %d computed\n", GetParam().c_str(), rb.n_prompt,
              rb.n_cached_tokens, rb.n_prompt - rb.n_cached_tokens);
  EXPECT_TRUE((*loop)->check_pool_after_shutdown().ok()) << (*loop)->check_pool_after_shutdown().to_string();
}

// A pool that holds one request: B preempts nothing but finds A's blocks unreferenced after A
// ended, and a third request with the same prompt as B takes B's published suffix blocks too.
TEST_P(PrefixCacheModels, UnreferencedBlocksServeLaterRequestsInASmallPool) {
  EngineLoopOptions small = options_;
  small.kv_tokens = 1200;
  auto loop = EngineLoop::create(engine_->model(), engine_->tokenizer(), small);
  ASSERT_TRUE(loop.ok()) << loop.status().to_string();
  expect_same((*loop)->submit(params(specs_[0]))->wait(), reference_[0], 0);
  const RequestResult b = (*loop)->submit(params(specs_[1]))->wait();
  expect_same(b, reference_[1], 1);
  EXPECT_EQ(b.n_cached_tokens, kPrefix);
  const RequestResult again = (*loop)->submit(params(specs_[1]))->wait();
  expect_same(again, reference_[1], 1);
  // B's prompt and all but its last generated token were computed: whole blocks of them, but
  // never the prompt's last token.
  EXPECT_EQ(again.n_cached_tokens, (kPrefix + kSuffixB - 1) / kBlock * kBlock);
  (*loop)->shutdown(ShutdownMode::kDrain);
  EXPECT_TRUE((*loop)->check_pool_after_shutdown().ok()) << (*loop)->check_pool_after_shutdown().to_string();
}

INSTANTIATE_TEST_SUITE_P(Architectures, PrefixCacheModels,
                         ::testing::Values("llama", "gemma3", "lfm2", "lfm2moe", "llama_tp2", "gemma3_tp2", "lfm2_tp2",
                                           "lfm2moe_tp2"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace cera::runtime
