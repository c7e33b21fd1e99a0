// Engine::kv_cache_bytes, the estimate the CLI checks a context against before allocating,
// against what KvCache::create really allocates on gemma3's fixture (sliding-window layers):
// with rings (a Session) and paged like the other layers (an engine loop with its prefix cache).
#include <gtest/gtest.h>

#include "api/engine.h"
#include "convert/parity_fixture.h"
#include "runtime/kv_cache.h"

namespace cera {
namespace {

TEST(KvBytesEstimate, BoundsWhatTheCacheAllocatesWithRingsAndPaged) {
  auto engine = api::Engine::load({.model_path = test::parity_fixture_dir("gemma3") / "model.gguf",
                                   .device = api::DeviceChoice::kCpu, .kv_type = api::KvTypeChoice::kF32});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  ASSERT_TRUE((*engine)->model().kv_geometry().has_sliding());
  for (const bool paged : {false, true}) {
    const runtime::SessionOptions sized{.n_ctx = 512, .n_batch = 64, .kv_block_size = 16};
    const uint64_t estimate = (*engine)->kv_cache_bytes(sized, paged);
    auto cache = runtime::KvCache::create((*engine)->model(), {.n_slots = 512,
                                                               .block_size = 16,
                                                               .max_batch_tokens = 64,
                                                               .max_sequences = 1,
                                                               .kv_type = DType::kF32,
                                                               .prefix_cache = paged});
    ASSERT_TRUE(cache.ok()) << cache.status().to_string();
    const runtime::KvBytes real = cache->bytes();
    EXPECT_GE(estimate, real.full + real.ring) << (paged ? "paged" : "rings");
    EXPECT_LE(estimate, (real.full + real.ring) * 5 / 4) << (paged ? "paged" : "rings");
    if (paged) {
      EXPECT_EQ(real.ring, 0u);
    }
    std::printf("%s: estimate %llu bytes, allocated %llu (full %llu, ring %llu)\n", paged ? "paged" : "rings",
                static_cast<unsigned long long>(estimate), static_cast<unsigned long long>(real.full + real.ring),
                static_cast<unsigned long long>(real.full), static_cast<unsigned long long>(real.ring));
  }
}

}  // namespace
}  // namespace cera
