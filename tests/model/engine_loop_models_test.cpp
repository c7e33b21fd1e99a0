// The engine loop on the architectures whose cache is more than K/V blocks: gemma3's
// sliding-window layers (KvCache rings; small steps so that chunks, rings and preemption all
// turn) and lfm2's convolution state (one per sequence, zeroed for a recompute). Batched equals
// alone, bit-exact on the CPU with F32 K/V, against the loop's solo runs and today's Session.
#include <gtest/gtest.h>

#include "api/engine.h"
#include "convert/hf_convert.h"
#include "convert/parity_fixture.h"
#include "runtime/engine/engine_test_helpers.h"

namespace cera::runtime {
namespace {

std::filesystem::path model_path(const std::string& name) {
  if (name == "gemma3") return test::parity_fixture_dir(name) / "model.gguf";
  const auto gguf = test::temp_dir() / (name + "-engine-loop-f32.gguf");
  if (!std::filesystem::exists(gguf)) {
    auto r = convert::convert_hf({.dir = test::parity_fixture_dir(name), .output = gguf, .type = DType::kF32});
    EXPECT_TRUE(r.ok()) << r.status().to_string();
  }
  return gguf;
}

class EngineLoopModels : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineLoopModels, BatchedWithPreemptionEqualsAlone) {
  auto engine = api::Engine::load({.model_path = model_path(GetParam()), .device = api::DeviceChoice::kCpu,
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
    auto r = (*session)->generate(gen, nullptr);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(solo[i].text, r->text) << "request " << i;
    EXPECT_EQ(static_cast<int32_t>(solo[i].tokens.size()), r->n_generated) << "request " << i;
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

}  // namespace
}  // namespace cera::runtime
