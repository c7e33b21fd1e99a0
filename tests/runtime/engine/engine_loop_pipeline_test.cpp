// Which path the engine loop's decode takes (EngineLoopOptions::pipeline), seen from the backend:
// with the overlap on, every step queued ahead embeds ids that the device's argmax wrote
// (Backend::embed_ids) and each argmax is read back asynchronously; off, and on the CPU by
// default (kAuto: no overlap to gain), neither happens; sampled requests never overlap. Equal
// outputs alone would not tell these paths apart (engine_loop_test.cpp checks those).
#include <gtest/gtest.h>

#include "format/gguf.h"
#include "forwarding_backend.h"
#include "model/model.h"
#include "ops/cpu/cpu_backend.h"
#include "runtime/engine/engine_loop.h"
#include "stories_model.h"

namespace cera::runtime {
namespace {

// A CPU backend that counts embed_ids and download_async.
class CountingBackend final : public test::ForwardingBackend {
 public:
  CountingBackend() : ForwardingBackend(ops::make_cpu_backend({.n_threads = 1})) {}
  int embed_ids_calls = 0, async_calls = 0;

  std::string name() const override { return "counting " + inner().name(); }
  ops::Readback download_async(void* dst, const TensorView& src) override {
    ++async_calls;
    return ForwardingBackend::download_async(dst, src);
  }
  void embed_ids(const TensorView& o, const TensorView& t, const TensorView& ids, float s) override {
    ++embed_ids_calls;
    ForwardingBackend::embed_ids(o, t, ids, s);
  }
};

TEST(EngineLoopPipelineCounting, OnlyTheOverlappedLoopFeedsIdsOnTheDevice) {
  auto file = format::GgufFile::open(test::stories_gguf());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok());
  const std::vector<int32_t> prompt = tok->encode("Once upon a time", {.add_special = true});
  std::string texts[3];
  for (const DecodePipeline p : {DecodePipeline::kOff, DecodePipeline::kAuto, DecodePipeline::kOn}) {
    CountingBackend backend;
    auto m = model::load_model(*file, backend);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    auto loop = EngineLoop::create(**m, *tok, {.n_ctx = 128, .pipeline = p});
    ASSERT_TRUE(loop.ok()) << loop.status().to_string();
    const RequestResult r = (*loop)->submit({.prompt = prompt, .sampling = {.temperature = 0.0f}, .max_tokens = 20,
                                             .stop_at_end_of_generation = false})
                                ->wait();
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    ASSERT_EQ(r.tokens.size(), 20u);
    texts[int(p)] = r.text;
    const EngineLoopStats st = (*loop)->stats();
    // Each step queued ahead is one forward whose embedding reads the ids on the device.
    const bool on = p == DecodePipeline::kOn;
    EXPECT_EQ(backend.embed_ids_calls, st.n_steps_ahead) << int(p);
    if (on) {
      EXPECT_GE(st.n_steps_ahead, 15);
      EXPECT_GE(backend.async_calls, st.n_steps_ahead);  // the argmax of every step queued ahead, at least
    } else {
      EXPECT_EQ(st.n_steps_ahead, 0) << int(p);
      EXPECT_EQ(backend.async_calls, 0) << int(p);
    }
    // Sampling other than greedy never overlaps.
    backend.embed_ids_calls = backend.async_calls = 0;
    const RequestResult s = (*loop)->submit({.prompt = prompt, .sampling = {.temperature = 0.7f, .seed = 5},
                                             .max_tokens = 20, .stop_at_end_of_generation = false})
                                ->wait();
    ASSERT_TRUE(s.status.ok()) << s.status.to_string();
    EXPECT_EQ(backend.embed_ids_calls, 0) << int(p);
    EXPECT_EQ(backend.async_calls, 0) << int(p);
    (*loop)->shutdown(ShutdownMode::kDrain);
  }
  EXPECT_EQ(texts[0], texts[1]);
  EXPECT_EQ(texts[0], texts[2]);
}

}  // namespace
}  // namespace cera::runtime
