// Per-request sampling options through the engine loop on stories260K (CPU, F32 K/V): logprobs
// against a float64 log-softmax of the full logits row that Session computes for the same
// tokens, logit_bias against a greedy reference drawn in the test from those rows, batched
// equals alone with mixed options, and submit's errors for bad options.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/engine/engine_loop.h"
#include "runtime/engine/engine_test_helpers.h"

namespace cera::runtime {
namespace {

class EngineSamplingTest : public test::StoriesEngineTest {
 protected:

  // The logits row before each of `tokens` (the first after the prompt), one token per forward
  // through Session: what the model gives, independent of the loop.
  std::vector<std::vector<float>> reference_rows(const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens) {
    auto s = session({.n_ctx = test::kEngineCtx, .context_shift = false});
    EXPECT_TRUE(s->append_tokens(prompt).ok());
    std::vector<std::vector<float>> rows;
    for (size_t i = 0; i < tokens.size(); ++i) {
      const auto row = s->last_logits();
      rows.emplace_back(row.begin(), row.end());
      EXPECT_TRUE(s->append_tokens(std::span(&tokens[i], 1)).ok());
    }
    return rows;
  }

  // Greedy with `bias` added in float, as the test reads the definition: argmax, lowest id on ties.
  std::vector<int32_t> biased_greedy(const std::vector<int32_t>& prompt, const std::map<int32_t, float>& bias, int32_t n) {
    auto s = session({.n_ctx = test::kEngineCtx, .context_shift = false});
    EXPECT_TRUE(s->append_tokens(prompt).ok());
    std::vector<int32_t> out;
    for (int32_t i = 0; i < n; ++i) {
      std::vector<float> row(s->last_logits().begin(), s->last_logits().end());
      for (const auto& [id, b] : bias) row[id] += b;
      out.push_back(static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
      EXPECT_TRUE(s->append_tokens(std::span(&out.back(), 1)).ok());
    }
    return out;
  }
};

double log_sum_exp(const std::vector<float>& row) {
  const double m = *std::max_element(row.begin(), row.end());
  double sum = 0;
  for (float x : row) sum += std::exp(x - m);
  return m + std::log(sum);
}

// Every token's logprob and alternatives against the float64 log-softmax of its raw row.
void expect_logprobs_match(const RequestResult& r, const std::vector<std::vector<float>>& rows, int32_t top_n,
                           const std::string& what) {
  ASSERT_EQ(r.logprobs.size(), r.tokens.size()) << what;
  ASSERT_EQ(rows.size(), r.tokens.size()) << what;
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    const std::vector<float>& row = rows[i];
    const double lse = log_sum_exp(row);
    const TokenLogprobs& lp = r.logprobs[i];
    EXPECT_EQ(lp.chosen.token, r.tokens[i]) << what << " token " << i;
    EXPECT_NEAR(lp.chosen.logprob, row[r.tokens[i]] - lse, 1e-4) << what << " token " << i;
    std::vector<int32_t> order(row.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    ASSERT_EQ(lp.top.size(), static_cast<size_t>(top_n)) << what;
    for (int32_t j = 0; j < top_n; ++j) {
      EXPECT_EQ(lp.top[j].token, order[j]) << what << " token " << i << " alternative " << j;
      EXPECT_NEAR(lp.top[j].logprob, row[order[j]] - lse, 1e-4) << what << " token " << i << " alternative " << j;
    }
  }
}

RequestParams sampling_request(std::vector<int32_t> prompt, SamplingParams sampling, int32_t max_tokens) {
  RequestParams p;
  p.prompt = std::move(prompt);
  p.sampling = sampling;
  p.max_tokens = max_tokens;
  p.stop_at_end_of_generation = false;
  return p;
}

// Logprobs are the raw distribution's whatever the chain: greedy, seeded top-k, penalties (a
// whole-row chain), top-p without top-k (candidates plus the log-sum-exp), and a token forced by
// a bias (its unbiased logprob, gathered from outside the candidates). All in one batch.
TEST_F(EngineSamplingTest, LogprobsAreTheRawLogSoftmax) {
  std::mt19937 rng(11);
  const std::vector<int32_t> prompt = test::random_prompt(rng, 20, tok());
  std::vector<RequestParams> ps;
  ps.push_back(sampling_request(prompt, {.temperature = 0.0f}, 24));
  ps.push_back(sampling_request(prompt, {.temperature = 0.9f, .top_k = 40, .seed = 9}, 24));
  ps.push_back(sampling_request(prompt, {.temperature = 0.0f, .repeat_penalty = 1.3f}, 24));
  ps.push_back(sampling_request(prompt, {.temperature = 1.0f, .top_k = 0, .top_p = 0.9f, .min_p = 0.0f, .seed = 4}, 24));
  ps.push_back(sampling_request(prompt, {.temperature = 0.0f}, 12));
  const int32_t forced = 300;
  ps.back().logit_bias = {{forced, 1e9f}};
  const int32_t top_n[] = {5, 20, 3, 2, 2};
  std::vector<std::vector<TokenLogprobs>> streamed(ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    ps[i].logprobs = true;
    ps[i].top_logprobs = top_n[i];
    ps[i].on_logprobs = [&, i](const TokenLogprobs& lp) { streamed[i].push_back(lp); };
  }
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = test::kEngineCtx});
  ASSERT_TRUE(loop.ok());
  std::vector<RequestHandle> handles;
  for (const RequestParams& p : ps) handles.push_back(*(*loop)->submit(p));
  // The references run the model through a Session, which must not overlap the loop's steps
  // (EngineLoop::create: nothing else runs the model while the loop lives): every request ends
  // and the loop stops first.
  for (const RequestHandle& h : handles) h.wait();
  (*loop)->shutdown(ShutdownMode::kDrain);
  for (size_t i = 0; i < ps.size(); ++i) {
    const RequestResult& r = handles[i].wait();
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    const std::string what = "request " + std::to_string(i);
    expect_logprobs_match(r, reference_rows(prompt, r.tokens), top_n[i], what);
    ASSERT_EQ(streamed[i].size(), r.logprobs.size()) << what;
    for (size_t j = 0; j < r.logprobs.size(); ++j) {
      EXPECT_EQ(streamed[i][j].chosen.token, r.logprobs[j].chosen.token) << what;
      EXPECT_EQ(streamed[i][j].chosen.logprob, r.logprobs[j].chosen.logprob) << what;
    }
  }
  const RequestResult& greedy = handles[0].wait();
  for (const TokenLogprobs& lp : greedy.logprobs) EXPECT_EQ(lp.chosen.token, lp.top[0].token);
  const RequestResult& force = handles[4].wait();
  EXPECT_EQ(force.tokens, std::vector<int32_t>(12, forced));
  const EngineLoopStats st = (*loop)->stats();
  EXPECT_LE(st.n_top_k_calls, st.n_steps);
  // The penalties' request reads its rows; top-p may when the nucleus reaches past 256 candidates.
  EXPECT_GE(st.n_rows_read_back, 24);
  EXPECT_LE(st.n_rows_read_back, 48);
}

// Greedy with biases equals the test's own argmax over the biased reference rows: -1e9 forbids
// the unbiased run's favourite tokens, moderate biases reorder, +1e9 forces. Greedy chains with
// biases read no whole row.
TEST_F(EngineSamplingTest, LogitBiasForcesAndForbids) {
  std::mt19937 rng(12);
  const std::vector<int32_t> prompt = test::random_prompt(rng, 30, tok());
  constexpr int32_t kTokens = 40;
  const std::vector<int32_t> plain = biased_greedy(prompt, {}, kTokens);
  std::vector<std::map<int32_t, float>> biases;
  biases.push_back({{plain[0], -1e9f}, {plain[1], -1e9f}, {plain[5], -1e9f}});
  biases.push_back({{plain[0], -2.5f}, {plain[3], 1.5f}, {17, 3.0f}, {250, 4.0f}, {499, -0.5f}});
  biases.push_back({{123, 1e9f}});
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = test::kEngineCtx});
  ASSERT_TRUE(loop.ok());
  std::vector<RequestHandle> handles;
  for (const auto& b : biases) {
    RequestParams p = sampling_request(prompt, {.temperature = 0.0f}, kTokens);
    p.logit_bias = b;
    handles.push_back(*(*loop)->submit(std::move(p)));
  }
  for (const RequestHandle& h : handles) h.wait();  // the references must not overlap the loop
  (*loop)->shutdown(ShutdownMode::kDrain);
  for (size_t i = 0; i < biases.size(); ++i) {
    const RequestResult& r = handles[i].wait();
    ASSERT_TRUE(r.status.ok());
    EXPECT_EQ(r.tokens, biased_greedy(prompt, biases[i], kTokens)) << "bias set " << i;
  }
  const std::vector<int32_t>& forbidden = handles[0].wait().tokens;
  for (int32_t t : {plain[0], plain[1], plain[5]}) EXPECT_EQ(std::count(forbidden.begin(), forbidden.end(), t), 0);
  EXPECT_NE(forbidden, plain);
  EXPECT_EQ(handles[2].wait().tokens, std::vector<int32_t>(kTokens, 123));
  EXPECT_EQ((*loop)->stats().n_rows_read_back, 0);
  EXPECT_GT((*loop)->stats().n_top_k_calls, 0);
}

// Batched equals alone with mixed options: each request's tokens and logprobs (bit-exact on the
// CPU) equal its solo run, whatever its neighbours ask.
TEST_F(EngineSamplingTest, MixedOptionsBatchedEqualsAlone) {
  std::mt19937 rng(13);
  const auto n_vocab = static_cast<uint32_t>(model().hparams().n_vocab);
  const int n = test::requests_for(24, 10);
  std::vector<RequestParams> ps;
  for (int i = 0; i < n; ++i) {
    const std::vector<int32_t> prompt = test::random_prompt(rng, 1 + static_cast<int32_t>(rng() % 80), tok());
    const int32_t max_tokens = 1 + static_cast<int32_t>(rng() % 40);
    RequestParams p;
    switch (i % 6) {
      case 0: p = sampling_request(prompt, {.temperature = 0.0f}, max_tokens); break;
      case 1: p = sampling_request(prompt, {.temperature = 0.8f, .seed = 100u + i}, max_tokens); break;
      case 2: p = sampling_request(prompt, {.temperature = 0.0f, .frequency_penalty = 0.5f}, max_tokens); break;
      case 3: p = sampling_request(prompt, {.temperature = 1.0f, .top_k = 0, .top_p = 0.8f, .seed = 7u + i}, max_tokens); break;
      case 4: p = sampling_request(prompt, {.temperature = 0.7f, .top_k = 20, .seed = 3u * i}, max_tokens); break;
      default: p = sampling_request(prompt, {.temperature = 0.0f}, max_tokens); break;
    }
    if (rng() % 2 == 0) {
      for (int j = 0; j < 3; ++j) p.logit_bias[static_cast<int32_t>(rng() % n_vocab)] = j == 0 ? -1e9f : 2.0f;
    }
    if (rng() % 2 == 0) {
      p.logprobs = true;
      p.top_logprobs = static_cast<int32_t>(rng() % (kMaxTopLogprobs + 1));
    }
    ps.push_back(std::move(p));
  }
  std::vector<RequestResult> solo;
  {
    auto loop = EngineLoop::create(model(), tok(), {.n_ctx = test::kEngineCtx, .max_running = 1});
    ASSERT_TRUE(loop.ok());
    for (const RequestParams& p : ps) solo.push_back((*loop)->submit(p)->wait());
  }
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = test::kEngineCtx, .max_running = 16, .kv_tokens = 1024});
  ASSERT_TRUE(loop.ok());
  std::vector<RequestHandle> handles;
  for (const RequestParams& p : ps) handles.push_back(*(*loop)->submit(p));
  for (size_t i = 0; i < ps.size(); ++i) {
    const RequestResult& r = handles[i].wait();
    test::expect_same(r, solo[i], i);
    ASSERT_EQ(r.logprobs.size(), solo[i].logprobs.size()) << "request " << i;
    for (size_t j = 0; j < r.logprobs.size(); ++j) {
      EXPECT_EQ(r.logprobs[j].chosen.token, solo[i].logprobs[j].chosen.token) << "request " << i;
      EXPECT_EQ(r.logprobs[j].chosen.logprob, solo[i].logprobs[j].chosen.logprob) << "request " << i;
      ASSERT_EQ(r.logprobs[j].top.size(), solo[i].logprobs[j].top.size()) << "request " << i;
      for (size_t a = 0; a < r.logprobs[j].top.size(); ++a) {
        EXPECT_EQ(r.logprobs[j].top[a].token, solo[i].logprobs[j].top[a].token) << "request " << i;
        EXPECT_EQ(r.logprobs[j].top[a].logprob, solo[i].logprobs[j].top[a].logprob) << "request " << i;
      }
    }
  }
  (*loop)->shutdown(ShutdownMode::kDrain);
  const EngineLoopStats st = (*loop)->stats();
  EXPECT_GT(st.max_rows_in_step, 1);
  EXPECT_LE(st.n_top_k_calls, st.n_steps);
  EXPECT_TRUE((*loop)->check_pool_after_shutdown().ok());
}

TEST_F(EngineSamplingTest, BadOptionsAreErrorsNamingTheId) {
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = 64});
  ASSERT_TRUE(loop.ok());
  const int32_t n_vocab = model().hparams().n_vocab;
  auto error_of = [&](const RequestParams& p) { return (*loop)->submit(p).status(); };
  RequestParams p{.prompt = {1}, .max_tokens = 4};
  for (const int32_t bad : {-1, n_vocab, 1 << 30}) {
    p.logit_bias = {{bad, 1.0f}};
    const Status st = error_of(p);
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(st.message().find("logit_bias token " + std::to_string(bad)), std::string::npos) << st.message();
  }
  for (const float bad : {std::nanf(""), INFINITY, -INFINITY, 1e31f}) {
    p.logit_bias = {{5, 0.0f}, {42, bad}};
    const Status st = error_of(p);
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(st.message().find("token 42"), std::string::npos) << st.message();
  }
  p.logit_bias = {};
  p.logprobs = true;
  for (const int32_t bad : {-1, kMaxTopLogprobs + 1}) {
    p.top_logprobs = bad;
    EXPECT_NE(error_of(p).message().find("top_logprobs"), std::string::npos);
  }
  p.logprobs = false;
  p.top_logprobs = 3;
  EXPECT_NE(error_of(p).message().find("needs logprobs"), std::string::npos);
  p.logprobs = true;
  p.logit_bias = {{0, -1e9f}, {7, 1e30f}};
  EXPECT_TRUE((*loop)->submit(p).ok());
}

}  // namespace
}  // namespace cera::runtime
