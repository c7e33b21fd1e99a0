// Helpers for the engine loop tests on stories260K: random requests, their solo runs through a
// loop of one (one request at a time) and through the reference decode over a Session
// (generate_helpers.h: the independent single-sequence path), and a gate that holds the loop's
// thread inside a sink until the test has submitted a batch.
#pragma once

#include <gtest/gtest.h>

#include <future>
#include <random>
#include <string>
#include <vector>

#include "generate_helpers.h"
#include "runtime/engine/engine_loop.h"
#include "runtime/session.h"
#include "runtime/stories_engine_test.h"
#include "slow_build.h"

namespace cera::test {

inline constexpr int32_t kEngineCtx = 512;

// Sanitizer and Debug builds (slow_build.h) run fewer requests, the same code paths.
inline constexpr int requests_for(int normal, int slow) { return kSlowBuild ? slow : normal; }

struct RequestSpec {
  std::vector<int32_t> prompt;
  int32_t max_tokens = 0;
  runtime::SamplingParams sampling{.temperature = 0.0f};
  bool stop_at_end_of_generation = true;
};

// A prompt of n tokens: BOS (when the vocabulary has one), then ids drawn from the vocabulary past the control tokens.
inline std::vector<int32_t> random_prompt(std::mt19937& rng, int32_t n, const tokenizer::Tokenizer& tok) {
  std::vector<int32_t> p;
  if (tok.bos() >= 0) p.push_back(tok.bos());
  std::uniform_int_distribution<int32_t> id(3, tok.n_vocab() - 1);
  while (static_cast<int32_t>(p.size()) < n) p.push_back(id(rng));
  return p;
}

inline std::vector<RequestSpec> random_specs(std::mt19937& rng, int n, int32_t max_prompt, int32_t max_gen,
                                             const tokenizer::Tokenizer& tok, bool stop_at_eog = true) {
  std::vector<RequestSpec> specs;
  for (int i = 0; i < n; ++i) {
    RequestSpec s;
    s.prompt = random_prompt(rng, 1 + static_cast<int32_t>(rng() % max_prompt), tok);
    s.max_tokens = 1 + static_cast<int32_t>(rng() % max_gen);
    s.stop_at_end_of_generation = stop_at_eog;
    specs.push_back(std::move(s));
  }
  return specs;
}

inline runtime::RequestParams params_of(const RequestSpec& s) {
  runtime::RequestParams p;
  p.prompt = s.prompt;
  p.max_tokens = s.max_tokens;
  p.sampling = s.sampling;
  p.stop_at_end_of_generation = s.stop_at_end_of_generation;
  return p;
}

// Each request alone through a loop (submitted only after the previous one finished).
// `options` as the batched run has them (max_running is set to 1).
inline std::vector<runtime::RequestResult> solo_through_loop(model::Model& model, const tokenizer::Tokenizer& tok,
                                                             const std::vector<RequestSpec>& specs,
                                                             runtime::EngineLoopOptions options = {.n_ctx = kEngineCtx}) {
  options.max_running = 1;
  options.kv_tokens = 0;
  auto loop = runtime::EngineLoop::create(model, tok, options);
  EXPECT_TRUE(loop.ok()) << loop.status().to_string();
  std::vector<runtime::RequestResult> out;
  for (const RequestSpec& s : specs) {
    auto h = (*loop)->submit(params_of(s));
    EXPECT_TRUE(h.ok()) << h.status().to_string();
    out.push_back(h->wait());
    EXPECT_TRUE(out.back().status.ok()) << out.back().status.to_string();
  }
  (*loop)->shutdown(runtime::ShutdownMode::kDrain);
  return out;
}

// The same request through the reference decode on a Session (greedy or seeded as the spec says,
// no context shift).
inline ReferenceRun through_session(api::Engine& engine, const RequestSpec& s) {
  auto session = engine.new_session({.n_ctx = kEngineCtx, .context_shift = false});
  EXPECT_TRUE(session.ok()) << session.status().to_string();
  if (!session.ok()) return {};
  EXPECT_TRUE((*session)->append_tokens(s.prompt).ok());
  auto r = reference_generate(**session, {.max_tokens = s.max_tokens,
                                          .sampling = s.sampling,
                                          .stop_at_end_of_generation = s.stop_at_end_of_generation});
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : ReferenceRun{};
}

inline runtime::FinishReason finish_reason_of(runtime::StopReason r) {
  switch (r) {
    case runtime::StopReason::kEndOfGeneration: return runtime::FinishReason::kEndOfGeneration;
    case runtime::StopReason::kMaxTokens: return runtime::FinishReason::kMaxTokens;
    case runtime::StopReason::kStopString: return runtime::FinishReason::kStopString;
    case runtime::StopReason::kCancelled: return runtime::FinishReason::kCancelled;
    case runtime::StopReason::kContextFull: return runtime::FinishReason::kContextFull;
  }
  return runtime::FinishReason::kError;
}

// Output and reason of `got` equal the solo run `want`.
inline void expect_same(const runtime::RequestResult& got, const runtime::RequestResult& want, size_t i) {
  EXPECT_TRUE(got.status.ok()) << "request " << i << ": " << got.status.to_string();
  EXPECT_EQ(got.tokens, want.tokens) << "request " << i;
  EXPECT_EQ(got.text, want.text) << "request " << i;
  EXPECT_EQ(got.reason, want.reason) << "request " << i << ": " << runtime::finish_reason_name(got.reason) << " vs "
                                     << runtime::finish_reason_name(want.reason);
}

// The loop's solo run equals the reference decode's: the same ids, text, count and reason.
inline void expect_matches_session(const runtime::RequestResult& loop, const ReferenceRun& s, size_t i) {
  EXPECT_EQ(loop.text, s.result.text) << "request " << i;
  EXPECT_EQ(static_cast<int32_t>(loop.tokens.size()), s.result.n_generated) << "request " << i;
  EXPECT_EQ(loop.reason, finish_reason_of(s.result.reason)) << "request " << i;
  EXPECT_EQ(loop.tokens, s.tokens) << "request " << i;
}

// Holds the loop's thread in the first sink call of one request until open() (so that what the
// test submits meanwhile lands in the same next step).
class Gate {
 public:
  runtime::RequestTokenSink sink() {
    return [this](int32_t) {
      if (entered_.exchange(true)) return;
      reached_.set_value();
      opened_.get_future().wait();
    };
  }
  void wait_reached() { reached_.get_future().wait(); }
  void open() { opened_.set_value(); }

 private:
  std::atomic<bool> entered_{false};
  std::promise<void> reached_, opened_;
};

}  // namespace cera::test
