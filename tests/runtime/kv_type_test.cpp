// The KV cache element type (KvCacheConfig::kv_type, --kv-type): F16 caches hold F16 views of half
// the bytes, other types are refused, auto resolves to F32 on the CPU and F16 on CUDA, and a stories260K session
// with F16 K/V gives logits close to, but not equal to, the F32 session's (so the type reaches
// the attention verbs and the only change is the rounding of K/V).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "api/engine.h"
#include "runtime/kv_cache.h"
#include "stories_model.h"

namespace cera::runtime {
namespace {

std::unique_ptr<api::Engine> load(api::KvTypeChoice kv_type) {
  auto e = api::Engine::load(
      {.model_path = test::stories_gguf(), .device = api::DeviceChoice::kCpu, .kv_type = kv_type});
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return std::move(e).value();
}

TEST(KvType, F16CacheHoldsHalfTheBytes) {
  auto engine = load(api::KvTypeChoice::kAuto);
  EXPECT_EQ(engine->kv_type(), DType::kF32);  // auto on the CPU
  auto f32 = KvCache::create(engine->model(), {.n_slots = 64, .block_size = 16});
  auto f16 = KvCache::create(engine->model(), {.n_slots = 64, .block_size = 16, .kv_type = DType::kF16});
  ASSERT_TRUE(f32.ok() && f16.ok());
  EXPECT_EQ(f16->bytes().total() * 2, f32->bytes().total());
  for (const ops::KvLayer& l : f16->layers()) {
    EXPECT_EQ(l.k.dtype, DType::kF16);
    EXPECT_EQ(l.v.dtype, DType::kF16);
  }
  auto bf16 = KvCache::create(engine->model(), {.n_slots = 64, .block_size = 16, .kv_type = DType::kBF16});
  EXPECT_EQ(bf16.status().code(), ErrorCode::kInvalidArgument);
}

// --device auto picks CUDA where a device is, and auto K/V is F16 there, F32 on the CPU.
TEST(KvType, AutoFollowsTheBackend) {
  auto e = api::Engine::load({.model_path = test::stories_gguf(), .device = api::DeviceChoice::kAuto});
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  const bool cuda = (*e)->backend().device() == Device::kCuda;
  EXPECT_EQ((*e)->kv_type(), cuda ? DType::kF16 : DType::kF32) << (*e)->backend().name();
}

TEST(KvType, F16SessionLogitsStayCloseToF32) {
  std::vector<int32_t> tokens(96);
  std::iota(tokens.begin(), tokens.end(), 1);
  std::vector<float> logits[2];
  int i = 0;
  for (api::KvTypeChoice t : {api::KvTypeChoice::kF32, api::KvTypeChoice::kF16}) {
    auto engine = load(t);
    EXPECT_EQ(engine->kv_type(), t == api::KvTypeChoice::kF16 ? DType::kF16 : DType::kF32);
    auto session = engine->new_session({.n_ctx = 128});
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    ASSERT_TRUE((*session)->append_tokens(tokens).ok());
    const auto l = (*session)->last_logits();
    logits[i++].assign(l.begin(), l.end());
  }
  ASSERT_EQ(logits[0].size(), logits[1].size());
  double max_diff = 0, max_abs = 0;
  for (size_t j = 0; j < logits[0].size(); ++j) {
    max_diff = std::max(max_diff, double(std::fabs(logits[0][j] - logits[1][j])));
    max_abs = std::max(max_abs, double(std::fabs(logits[0][j])));
  }
  EXPECT_GT(max_diff, 0.0) << "the F16 session read the same K/V as the F32 one";
  EXPECT_LT(max_diff / max_abs, 1e-2);
  EXPECT_EQ(std::max_element(logits[0].begin(), logits[0].end()) - logits[0].begin(),
            std::max_element(logits[1].begin(), logits[1].end()) - logits[1].begin());
}

}  // namespace
}  // namespace cera::runtime
