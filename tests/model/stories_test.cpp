// Oracle 2 of TESTING.md: greedy decoding of stories260K from BOS must reproduce llama2.c's
// output byte for byte: through the engine loop (every front end's generation) on 1 and on 2
// threads, with the overlap of decode steps forced on, and through the tests' reference decode
// over a Session (generate_helpers.h), which the engine tests take as their judge.
#include <gtest/gtest.h>

#include "api/engine.h"
#include "format/gguf_writer.h"
#include "generate_helpers.h"
#include "runtime/engine/engine_loop.h"
#include "stories_model.h"

namespace cera {
namespace {

// llama2.c's generate() runs 256 positions from BOS and samples at each of them, printing 256
// tokens (the last is sampled but never fed back), then a newline.
constexpr int32_t kReferenceTokens = 256;

std::string greedy_through_loop(int threads, runtime::DecodePipeline pipeline) {
  auto engine = api::Engine::load({.model_path = test::stories_gguf(), .device = api::DeviceChoice::kCpu, .n_threads = threads});
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return {};
  auto loop = runtime::EngineLoop::create((*engine)->model(), (*engine)->tokenizer(), {.n_ctx = 512, .pipeline = pipeline});
  EXPECT_TRUE(loop.ok()) << loop.status().to_string();
  if (!loop.ok()) return {};
  auto h = (*loop)->submit({.prompt = {(*engine)->tokenizer().bos()},
                            .sampling = {.temperature = 0.0f},
                            .max_tokens = kReferenceTokens});
  EXPECT_TRUE(h.ok()) << h.status().to_string();
  if (!h.ok()) return {};
  const runtime::RequestResult& r = h->wait();
  EXPECT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.reason, runtime::FinishReason::kMaxTokens);
  if (pipeline == runtime::DecodePipeline::kOn) {
    EXPECT_GT((*loop)->stats().n_steps_ahead, 200);
  }
  return r.text;
}

TEST(Stories260K, GreedyMatchesLlama2cOnOneThread) {
  EXPECT_EQ(greedy_through_loop(1, runtime::DecodePipeline::kOff) + "\n", test::stories_reference_text());
}

TEST(Stories260K, GreedyMatchesLlama2cOnTwoThreads) {
  EXPECT_EQ(greedy_through_loop(2, runtime::DecodePipeline::kOff) + "\n", test::stories_reference_text());
}

// Every step but the first few queued before the previous token is read back (the CPU runs the
// bookkeeping CUDA's overlap runs).
TEST(Stories260K, GreedyMatchesLlama2cPipelined) {
  EXPECT_EQ(greedy_through_loop(1, runtime::DecodePipeline::kOn) + "\n", test::stories_reference_text());
}

TEST(Stories260K, ReferenceDecodeMatchesLlama2c) {
  auto engine = api::Engine::load({.model_path = test::stories_gguf(), .device = api::DeviceChoice::kCpu});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto session = (*engine)->new_session({.n_ctx = 512});
  ASSERT_TRUE(session.ok());
  const int32_t bos = (*engine)->tokenizer().bos();
  ASSERT_TRUE((*session)->append_tokens(std::span(&bos, 1)).ok());
  auto r = test::reference_generate(**session, {.max_tokens = kReferenceTokens, .sampling = {.temperature = 0.0f}});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->result.text + "\n", test::stories_reference_text());
  EXPECT_EQ(r->result.n_generated, kReferenceTokens);
}

TEST(Stories260K, PromptProcessingInChunksGivesTheSameLogits) {
  // The same 40 tokens evaluated in one batch, in chunks of 7, and one at a time.
  auto engine = api::Engine::load({.model_path = test::stories_gguf(), .device = api::DeviceChoice::kCpu});
  ASSERT_TRUE(engine.ok());
  std::vector<int32_t> tokens = (*engine)->tokenizer().encode("Once upon a time, there was a dog named Max who liked to run.", {.add_special = true});
  ASSERT_GT(tokens.size(), 10u);
  std::vector<std::vector<float>> results;
  for (int batch : {512, 7, 1}) {
    auto session = (*engine)->new_session({.n_ctx = 128, .n_batch = batch});
    ASSERT_TRUE(session.ok());
    ASSERT_TRUE((*session)->append_tokens(tokens).ok());
    auto l = (*session)->last_logits();
    results.emplace_back(l.begin(), l.end());
  }
  for (size_t i = 0; i < results[0].size(); ++i) {
    EXPECT_NEAR(results[1][i], results[0][i], 1e-4f);
    EXPECT_NEAR(results[2][i], results[0][i], 1e-4f);
  }
}

TEST(ModelLoading, ErrorsNameTheProblem) {
  auto engine = api::Engine::load({.model_path = test::source_dir() / "tests/fixtures/gguf/reference.gguf"});
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("tokenizer"), std::string::npos) << engine.status().message();
}

}  // namespace
}  // namespace cera

namespace cera {
namespace {

// Writes a copy of the stories GGUF with one change, for load-error tests.
std::filesystem::path edited_copy(const std::string& name, const std::string& drop_key, const std::string& bad_tensor) {
  auto f = format::GgufFile::open(test::stories_gguf());
  EXPECT_TRUE(f.ok());
  format::GgufWriter w;
  for (const auto& kv : f->metadata()) {
    if (kv.key != drop_key) w.set(kv.key, kv.value);
  }
  for (const auto& t : f->tensors()) {
    std::vector<uint64_t> shape = t.shape;
    auto data = f->tensor_data(t);
    if (t.name == bad_tensor) {
      shape[1] /= 2;
      data = data.first(data.size() / 2);
    }
    EXPECT_TRUE(w.add_tensor_view({t.name, t.dtype, shape}, data).ok());
  }
  const auto path = test::temp_dir() / name;
  EXPECT_TRUE(w.write(path).ok());
  return path;
}

TEST(ModelLoading, WrongTensorShapeIsNamed) {
  auto engine = api::Engine::load({.model_path = edited_copy("bad_shape.gguf", "", "blk.1.attn_q.weight")});
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("tensor 'blk.1.attn_q.weight' has shape [64, 32], expected [64, 64]"),
            std::string::npos)
      << engine.status().message();
}

TEST(ModelLoading, WeightTypeWithoutKernelIsNamed) {
  // blk.0.attn_q as Q2_0 (64-element blocks of 18 bytes), a type no backend has a kernel for.
  auto f = format::GgufFile::open(test::stories_gguf());
  ASSERT_TRUE(f.ok());
  format::GgufWriter w;
  for (const auto& kv : f->metadata()) w.set(kv.key, kv.value);
  for (const auto& t : f->tensors()) {
    if (t.name == "blk.0.attn_q.weight") {
      ASSERT_TRUE(w.add_tensor({t.name, DType::kQ2_0, t.shape}, std::vector<std::byte>(64 * 18, std::byte{0x11})).ok());
    } else {
      ASSERT_TRUE(w.add_tensor_view({t.name, t.dtype, t.shape}, f->tensor_data(t)).ok());
    }
  }
  const auto path = test::temp_dir() / "q2_0.gguf";
  ASSERT_TRUE(w.write(path).ok());
  auto engine = api::Engine::load({.model_path = path, .device = api::DeviceChoice::kCpu});
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("tensor 'blk.0.attn_q.weight' has type Q2_0, which has no cpu"),
            std::string::npos)
      << engine.status().message();
}

TEST(ModelLoading, MissingKeyIsNamed) {
  auto engine = api::Engine::load({.model_path = edited_copy("no_blocks.gguf", "llama.block_count", "")});
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("'llama.block_count' is missing"), std::string::npos)
      << engine.status().message();
}

}  // namespace
}  // namespace cera
