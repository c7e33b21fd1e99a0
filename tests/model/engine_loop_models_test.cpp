// The engine loop on the architectures whose cache is more than K/V blocks: gemma3's
// sliding-window layers (KvCache rings; small steps so that chunks, rings and preemption all
// turn) and lfm2's convolution state (one per sequence, zeroed for a recompute). Batched equals
// alone, bit-exact on the CPU with F32 K/V, against the loop's solo runs and the reference decode
// over a Session (generate_helpers.h); the overlapped decode with its discarded steps against the
// same reference, and the next turn's logits (through the prefix cache) against a fresh Session.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "api/engine.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "fixture_models.h"
#include "runtime/engine/engine_test_helpers.h"
#include "test_device.h"

namespace cera::runtime {
namespace {


class EngineLoopModels : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineLoopModels, BatchedWithPreemptionEqualsAlone) {
  auto engine = api::Engine::load({.model_path = test::fixture_gguf(GetParam()), .device = api::DeviceChoice::kCpu,
                                   .kv_type = api::KvTypeChoice::kF32});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  model::Model& m = (*engine)->model();
  const tokenizer::Tokenizer& tok = (*engine)->tokenizer();
  std::mt19937 rng(3);
  const std::vector<test::RequestSpec> specs = test::random_specs(rng, 16, 40, 24, tok, /*stop_at_eog=*/false);
  // Steps of 8 tokens over blocks of 4: prompts go in several chunks, and the rings (window 6
  // for gemma3) turn within one request.
  const EngineLoopOptions base{.n_ctx = 64, .max_batch_tokens = 8, .kv_block_size = 4};
  const std::vector<RequestResult> solo = test::solo_through_loop(m, tok, specs, base);
  for (size_t i = 0; i < specs.size(); i += 3) {
    auto session = (*engine)->new_session({.n_ctx = 64, .context_shift = false});
    ASSERT_TRUE(session.ok());
    ASSERT_TRUE((*session)->append_tokens(specs[i].prompt).ok());
    GenerateOptions gen{.max_tokens = specs[i].max_tokens, .sampling = specs[i].sampling, .stop_at_end_of_generation = false};
    auto r = test::reference_generate(**session, gen);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(solo[i].text, r->result.text) << "request " << i;
    EXPECT_EQ(solo[i].tokens, r->tokens) << "request " << i;
  }
  int32_t demand = 0;
  for (const auto& s : specs) demand += static_cast<int32_t>(s.prompt.size()) + s.max_tokens;
  EngineLoopOptions batched = base;
  batched.max_running = 16;
  batched.kv_tokens = std::max(64, demand / 4);
  auto loop = EngineLoop::create(m, tok, batched);
  ASSERT_TRUE(loop.ok()) << loop.status().to_string();
  std::vector<RequestHandle> handles;
  for (const auto& s : specs) handles.push_back(*(*loop)->submit(test::params_of(s)));
  for (size_t i = 0; i < specs.size(); ++i) test::expect_same(handles[i].wait(), solo[i], i);
  (*loop)->shutdown(ShutdownMode::kDrain);
  EXPECT_GT((*loop)->stats().max_rows_in_step, 1);
  EXPECT_GT((*loop)->stats().n_preemptions, 0);
  EXPECT_TRUE((*loop)->check_pool_after_shutdown().ok()) << (*loop)->check_pool_after_shutdown().to_string();
  std::printf("%s: %lld preemptions, %lld steps\n", GetParam().c_str(),
              static_cast<long long>((*loop)->stats().n_preemptions), static_cast<long long>((*loop)->stats().n_steps));
}

INSTANTIATE_TEST_SUITE_P(Architectures, EngineLoopModels, ::testing::Values("gemma3", "lfm2"),
                         [](const auto& info) { return info.param; });

// log(softmax(logits)) in float64, the reference for RequestResult::logprobs.
std::vector<double> log_softmax(std::span<const float> logits) {
  double max = -INFINITY, sum = 0;
  for (float l : logits) max = std::max(max, static_cast<double>(l));
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - max - std::log(sum);
  return out;
}

// The largest |logprob - reference| over a one-token turn's 5 top logprobs, the reference being a
// fresh Session's log-softmax after `prompt` (the engine's model must be free: no loop running).
double max_logprob_delta(api::Engine& engine, int32_t n_ctx, const std::vector<int32_t>& prompt,
                         const RequestResult& turn) {
  auto fresh = engine.new_session({.n_ctx = n_ctx});
  EXPECT_TRUE(fresh.ok());
  if (!fresh.ok() || !(*fresh)->append_tokens(prompt).ok()) {
    ADD_FAILURE() << "the reference Session could not evaluate the prompt";
    return INFINITY;
  }
  const std::vector<double> want_lp = log_softmax((*fresh)->last_logits());
  EXPECT_EQ(turn.logprobs.size(), 1u);
  if (turn.logprobs.size() != 1) return INFINITY;
  EXPECT_EQ(turn.logprobs[0].top.size(), 5u);
  double max_delta = 0;
  for (const TokenLogprob& t : turn.logprobs[0].top) {
    max_delta = std::max(max_delta, std::fabs(t.logprob - want_lp[static_cast<size_t>(t.token)]));
  }
  return max_delta;
}

class EngineLoopPipelined : public ::testing::TestWithParam<std::string> {};

// Greedy decode with the overlap forced on (every step queued before the previous token is read
// back; on the CPU the same bookkeeping runs synchronously) gives the reference decode's tokens,
// text and reason, also when a stop string ends the request while its next step is queued: that
// step's row is discarded. It has run, though, so for lfm2 it advanced the sequence's convolution
// state past the request's end. The next turn (the context plus new text) takes the finished
// request's blocks from the prefix cache, and its first logprobs must equal the log-softmax of a
// fresh Session's logits over the same tokens: a state left advanced would show there. On
// CERA_TEST_DEVICE's backend (test_device.h; the CPU by default), the reference on the same one.
TEST_P(EngineLoopPipelined, StopStringsAndTheNextTurnEqualTheReference) {
  const test::TestDevice device = test::test_device();
  ASSERT_TRUE(device.error.empty()) << device.error;
  auto engine = api::Engine::load({.model_path = test::fixture_gguf(GetParam()), .device = device.choice,
                                   .kv_type = api::KvTypeChoice::kF32});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string() << " (CERA_TEST_DEVICE=" << device.name << ")";
  model::Model& m = (*engine)->model();
  const tokenizer::Tokenizer& tok = (*engine)->tokenizer();
  const int32_t n_ctx = 96;
  const std::vector<int32_t> prompt = tok.encode("The quick brown fox jumps over the lazy dog.", {.add_special = true});
  const GenerateOptions gen{.max_tokens = 40, .sampling = {.temperature = 0.0f}, .stop_at_end_of_generation = false};
  auto reference = [&](const std::vector<std::string>& stop) {
    auto s = (*engine)->new_session({.n_ctx = n_ctx});
    EXPECT_TRUE(s.ok());
    EXPECT_TRUE((*s)->append_tokens(prompt).ok());
    GenerateOptions g = gen;
    g.stop = stop;
    auto r = test::reference_generate(**s, g);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? std::move(r).value() : test::ReferenceRun{};
  };
  const test::ReferenceRun plain = reference({});
  ASSERT_GT(plain.result.text.size(), 8u);
  // A stop string from the middle of the plain text: generation ends there.
  const std::string stop = plain.result.text.substr(plain.result.text.size() / 2, 3);
  for (const std::vector<std::string>& stops : {std::vector<std::string>{}, std::vector<std::string>{stop}}) {
    const test::ReferenceRun want = stops.empty() ? plain : reference(stops);
    // A loop per case, gone before the fresh Session runs the model (the loop owns it while it lives).
    auto loop = EngineLoop::create(m, tok, {.n_ctx = n_ctx, .max_running = 1, .kv_block_size = 4,
                                            .pipeline = DecodePipeline::kOn});
    ASSERT_TRUE(loop.ok()) << loop.status().to_string();
    RequestParams p{.prompt = prompt, .sampling = gen.sampling, .max_tokens = gen.max_tokens, .stop = stops,
                    .stop_at_end_of_generation = false};
    const RequestResult got = (*loop)->submit(std::move(p))->wait();
    ASSERT_TRUE(got.status.ok()) << got.status.to_string();
    EXPECT_EQ(got.text, want.result.text);
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.reason, test::finish_reason_of(want.result.reason));
    // The step queued on the token that completed the stop string; none at the token limit.
    EXPECT_EQ((*loop)->stats().n_rows_discarded, stops.empty() ? 0 : 1);
    // The next turn on the finished request's context.
    std::vector<int32_t> next = got.context;
    const std::vector<int32_t> more = tok.encode(" and then", {});
    next.insert(next.end(), more.begin(), more.end());
    RequestParams q{.prompt = next, .sampling = gen.sampling, .max_tokens = 1, .logprobs = true, .top_logprobs = 5};
    const RequestResult turn = (*loop)->submit(std::move(q))->wait();
    ASSERT_TRUE(turn.status.ok()) << turn.status.to_string();
    EXPECT_GT(turn.n_cached_tokens, 0);  // the finished request's blocks
    (*loop)->shutdown(ShutdownMode::kDrain);
    EXPECT_GT((*loop)->stats().n_steps_ahead, 0);
    EXPECT_TRUE((*loop)->check_pool_after_shutdown().ok()) << (*loop)->check_pool_after_shutdown().to_string();
    loop->reset();
    const double max_delta = max_logprob_delta(**engine, n_ctx, next, turn);
    EXPECT_LT(max_delta, 1e-4) << (stops.empty() ? "token limit" : "stop string");
    std::printf("%s pipelined greedy (%s): %zu tokens, %s, next turn %d cached tokens, max |delta logprob| = %.2e\n",
                GetParam().c_str(), stops.empty() ? "token limit" : "stop string", got.tokens.size(),
                finish_reason_name(got.reason), turn.n_cached_tokens, max_delta);
  }
}

// A copy of `model` whose end-of-sequence token is `eos` (an ordinary token greedy decoding reaches).
std::filesystem::path with_eos(const std::filesystem::path& model, int32_t eos) {
  auto f = format::GgufFile::open(model);
  EXPECT_TRUE(f.ok()) << f.status().to_string();
  if (!f.ok()) return {};
  format::GgufWriter w;
  for (const auto& kv : f->metadata()) w.set(kv.key, kv.value);
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos));
  for (const auto& t : f->tensors()) EXPECT_TRUE(w.add_tensor_view({t.name, t.dtype, t.shape}, f->tensor_data(t)).ok());
  const auto out = test::temp_dir() / (model.stem().string() + "-eos" + std::to_string(eos) + ".gguf");
  EXPECT_TRUE(w.write(out).ok()) << out;
  return out;
}

// The same with an end of generation, the case where a discarded step consumed a token that is
// not in the request's context: a copy of the model whose end-of-sequence token is one that
// greedy decoding reaches. The step queued on that token has run (into lfm2's state, and a K/V
// row past the context); the next turn on the context, through the prefix cache, must not see
// it. The ends fall on every offset within a KV block of 4 (the last block the finished request
// publishes ends at or before its end).
TEST_P(EngineLoopPipelined, EndOfGenerationAndTheNextTurnEqualTheReference) {
  const test::TestDevice device = test::test_device();
  ASSERT_TRUE(device.error.empty()) << device.error;
  const int32_t n_ctx = 96, block = 4;
  const GenerateOptions gen{.max_tokens = 40, .sampling = {.temperature = 0.0f}};
  std::vector<int32_t> prompt;
  test::ReferenceRun plain;
  {
    auto engine = api::Engine::load({.model_path = test::fixture_gguf(GetParam()), .device = device.choice,
                                     .kv_type = api::KvTypeChoice::kF32});
    ASSERT_TRUE(engine.ok()) << engine.status().to_string() << " (CERA_TEST_DEVICE=" << device.name << ")";
    prompt = (*engine)->tokenizer().encode("The quick brown fox jumps over the lazy dog.", {.add_special = true});
    auto s = (*engine)->new_session({.n_ctx = n_ctx});
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->append_tokens(prompt).ok());
    GenerateOptions g = gen;
    g.stop_at_end_of_generation = false;
    auto r = test::reference_generate(**s, g);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    plain = std::move(r).value();
  }
  std::set<size_t> offsets;
  for (size_t k = 1; k < plain.tokens.size() && offsets.size() < block; ++k) {
    const int32_t eos = plain.tokens[k];
    const size_t first = static_cast<size_t>(std::find(plain.tokens.begin(), plain.tokens.end(), eos) - plain.tokens.begin());
    if (first != k || !offsets.insert((prompt.size() + first) % block).second) continue;  // generation ends at `first`
    auto engine = api::Engine::load({.model_path = with_eos(test::fixture_gguf(GetParam()), eos), .device = device.choice,
                                     .kv_type = api::KvTypeChoice::kF32});
    ASSERT_TRUE(engine.ok()) << engine.status().to_string();
    const tokenizer::Tokenizer& tok = (*engine)->tokenizer();
    ASSERT_TRUE(tok.is_end_of_generation(eos));
    auto s = (*engine)->new_session({.n_ctx = n_ctx});
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->append_tokens(prompt).ok());
    auto want = test::reference_generate(**s, gen);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    ASSERT_EQ(want->result.reason, StopReason::kEndOfGeneration);
    ASSERT_EQ(want->tokens, std::vector<int32_t>(plain.tokens.begin(), plain.tokens.begin() + first));
    auto loop = EngineLoop::create((*engine)->model(), tok, {.n_ctx = n_ctx, .max_running = 1, .kv_block_size = block,
                                                            .pipeline = DecodePipeline::kOn});
    ASSERT_TRUE(loop.ok()) << loop.status().to_string();
    const RequestResult got =
        (*loop)->submit({.prompt = prompt, .sampling = gen.sampling, .max_tokens = gen.max_tokens})->wait();
    ASSERT_TRUE(got.status.ok()) << got.status.to_string();
    EXPECT_EQ(got.reason, FinishReason::kEndOfGeneration);
    EXPECT_EQ(got.tokens, want->tokens);
    EXPECT_EQ(got.text, want->result.text);
    EXPECT_EQ((*loop)->stats().n_rows_discarded, 1);  // the step queued on the end-of-generation token
    std::vector<int32_t> next = got.context;
    ASSERT_EQ(next.size(), prompt.size() + first);
    const std::vector<int32_t> more = tok.encode(" and then", {});
    next.insert(next.end(), more.begin(), more.end());
    const RequestResult turn = (*loop)->submit({.prompt = next, .sampling = gen.sampling, .max_tokens = 1,
                                                .logprobs = true, .top_logprobs = 5})
                                   ->wait();
    ASSERT_TRUE(turn.status.ok()) << turn.status.to_string();
    EXPECT_EQ(turn.n_cached_tokens, static_cast<int32_t>(got.context.size()) / block * block);
    (*loop)->shutdown(ShutdownMode::kDrain);
    EXPECT_TRUE((*loop)->check_pool_after_shutdown().ok()) << (*loop)->check_pool_after_shutdown().to_string();
    loop->reset();  // the fresh Session runs the model next
    const double max_delta = max_logprob_delta(**engine, n_ctx, next, turn);
    EXPECT_LT(max_delta, 1e-4) << "end after " << first << " tokens";
    std::printf("%s pipelined greedy, end of generation after %zu tokens (context %zu, offset %zu in a block): next "
                "turn %d cached tokens, max |delta logprob| = %.2e\n",
                GetParam().c_str(), first, got.context.size(), got.context.size() % block, turn.n_cached_tokens,
                max_delta);
  }
  EXPECT_EQ(offsets.size(), static_cast<size_t>(block));
}

INSTANTIATE_TEST_SUITE_P(Architectures, EngineLoopPipelined, ::testing::Values("gemma3", "lfm2", "lfm2moe"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace cera::runtime
