// Block bookkeeping of the paged KV cache.
#include <gtest/gtest.h>

#include <set>

#include "api/engine.h"
#include "runtime/kv_cache.h"
#include "stories_model.h"

namespace cera::runtime {
namespace {

TEST(KvCache, BlocksAreAllocatedFreedAndNeverShared) {
  auto engine = api::Engine::load({.model_path = test::stories_gguf(), .device = api::DeviceChoice::kCpu});
  ASSERT_TRUE(engine.ok());
  auto cache = KvCache::create((*engine)->model(), {.n_slots = 64, .block_size = 16});
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ(cache->n_blocks(), 4);
  const SeqId a = cache->new_sequence(), b = cache->new_sequence();
  std::vector<int32_t> slots_a, slots_b;
  ASSERT_TRUE(cache->append(a, 20, slots_a).ok());
  ASSERT_TRUE(cache->append(b, 17, slots_b).ok());
  EXPECT_EQ(cache->n_free_blocks(), 0);
  std::set<int32_t> all(slots_a.begin(), slots_a.end());
  all.insert(slots_b.begin(), slots_b.end());
  EXPECT_EQ(all.size(), 37u);  // no slot handed out twice
  for (int i = 0; i < 20; ++i) EXPECT_EQ(cache->slot(a, i), slots_a[i]);
  std::vector<int32_t> more;
  const Status full = cache->append(a, 13, more);
  EXPECT_EQ(full.code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(cache->length(a), 20);  // a failed append changes nothing
  cache->truncate(a, 5);
  EXPECT_EQ(cache->n_free_blocks(), 1);
  cache->free_sequence(b);
  EXPECT_EQ(cache->n_free_blocks(), 3);
  ASSERT_TRUE(cache->append(a, 40, more).ok());
  EXPECT_EQ(cache->length(a), 45);
}

}  // namespace
}  // namespace cera::runtime
