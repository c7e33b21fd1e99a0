// The KV cache's prefix cache on stories260K (blocks and K/V rows) and the gemma3 fixture (paged
// sliding-window layers): published blocks are matched, shared and kept after their sequence
// ends; the last token is never taken from the cache; the extra key separates requests; eviction
// takes the least recently used block once the free list is empty; a truncate into a published
// block copies instead of writing into it; a shift forgets what it moves; check_integrity holds
// after every step. Expected counts are worked out by hand in the comments.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "api/engine.h"
#include "convert/parity_fixture.h"
#include "runtime/kv_cache.h"
#include "stories_model.h"

namespace cera::runtime {
namespace {

class KvCachePrefix : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto e = api::Engine::load({.model_path = test::stories_gguf(), .device = api::DeviceChoice::kCpu});
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    engine_ = std::move(e).value().release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  // 16 blocks of 4 tokens.
  static KvCache make_cache(bool prefix = true) {
    auto c = KvCache::create(engine_->model(), {.n_slots = 64, .block_size = 4, .prefix_cache = prefix});
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return std::move(c).value();
  }
  static SeqId sequence_of(KvCache& c, std::span<const int32_t> tokens) {
    const SeqId s = c.new_sequence_from_prefix(tokens, 0);
    std::vector<int32_t> slots;
    EXPECT_TRUE(c.append(s, static_cast<int32_t>(tokens.size()) - c.length(s), slots).ok());
    // Layer 0's K rows of the new entries get finite values of their own, as a forward would
    // store: the tests compare rows before and after a copy, and uninitialized rows may hold NaN
    // (which equals nothing, itself included).
    const ops::KvLayer& l = c.layers()[0];
    std::vector<float> row(static_cast<size_t>(l.k.cols()));
    for (int32_t slot : slots) {
      for (size_t j = 0; j < row.size(); ++j) row[j] = static_cast<float>(slot) + 0.001f * static_cast<float>(j);
      engine_->model().backend().upload(l.k.slice_rows(slot, 1), row.data());
    }
    c.publish_blocks(s, tokens);
    return s;
  }
  // Block b's K rows of layer 0, as floats.
  static std::vector<float> k_rows(const KvCache& c, int32_t block) {
    const ops::KvLayer& l = c.layers()[0];
    std::vector<float> out(static_cast<size_t>(l.k.cols() * c.block_size()));
    engine_->model().backend().download(out.data(), l.k.slice_rows(int64_t{block} * c.block_size(), c.block_size()));
    return out;
  }
  inline static api::Engine* engine_ = nullptr;
};

std::vector<int32_t> iota_tokens(int32_t n, int32_t from = 1) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), from);
  return t;
}

TEST_F(KvCachePrefix, PublishedBlocksAreSharedAndOutliveTheirSequence) {
  KvCache c = make_cache();
  const std::vector<int32_t> t = iota_tokens(10);
  const SeqId a = sequence_of(c, t);  // 3 blocks, the first 2 full: published
  EXPECT_EQ(c.n_cached_blocks(), 2);
  EXPECT_EQ(c.n_free_blocks(), 13);  // 16 - 3 held
  // The last token is always computed: 10 tokens may take (10 - 1) / 4 = 2 blocks, 8 tokens only 1.
  EXPECT_EQ(c.match_prefix(t, 0).n_tokens, 8);
  EXPECT_EQ(c.match_prefix(std::span(t).first(8), 0).n_tokens, 4);
  EXPECT_EQ(c.match_prefix(std::span(t).first(9), 0).n_tokens, 8);
  EXPECT_EQ(c.match_prefix(t, 0).n_unreferenced, 0);  // a holds them
  EXPECT_EQ(c.match_prefix(t, 7).n_tokens, 0);        // another extra key shares nothing
  std::vector<int32_t> other = t;
  other[5] = 99;  // differs in block 1: only block 0 matches
  EXPECT_EQ(c.match_prefix(other, 0).n_tokens, 4);
  const std::vector<int32_t> a_table(c.block_table(a).begin(), c.block_table(a).end());
  c.free_sequence(a);
  ASSERT_TRUE(c.check_integrity().ok()) << c.check_integrity().to_string();
  EXPECT_EQ(c.n_free_blocks(), 16);  // cached but unreferenced blocks count as free
  EXPECT_EQ(c.n_evictable_blocks(), 2);
  EXPECT_EQ(c.match_prefix(t, 0).n_unreferenced, 2);
  std::vector<int32_t> longer = iota_tokens(14);
  const SeqId b = c.new_sequence_from_prefix(longer, 0);
  EXPECT_EQ(c.length(b), 8);
  ASSERT_EQ(c.block_table(b).size(), 2u);
  EXPECT_EQ(c.block_table(b)[0], a_table[0]);
  EXPECT_EQ(c.block_table(b)[1], a_table[1]);
  EXPECT_EQ(c.n_evictable_blocks(), 0);
  const SeqId d = c.new_sequence_from_prefix(longer, 0);  // a second holder of the same blocks
  EXPECT_EQ(c.length(d), 8);
  EXPECT_EQ(c.n_free_blocks(), 14);
  ASSERT_TRUE(c.check_integrity().ok()) << c.check_integrity().to_string();
  std::vector<int32_t> slots;
  ASSERT_TRUE(c.append(b, 6, slots).ok());  // entries 8..13: blocks 2 and 3, new
  EXPECT_EQ(slots.front(), c.slot(b, 8));
  c.publish_blocks(b, longer);  // block 2 full (entries 8..11): published; block 3 is not full
  EXPECT_EQ(c.n_cached_blocks(), 3);
  EXPECT_EQ(c.match_prefix(iota_tokens(20), 0).n_tokens, 12);
  c.free_sequence(b);
  c.free_sequence(d);
  ASSERT_TRUE(c.check_integrity().ok()) << c.check_integrity().to_string();
  EXPECT_EQ(c.n_free_blocks(), 16);
}

TEST_F(KvCachePrefix, PublishingWaitsForTheTokensAndSkipsBlocksCachedByAnother) {
  KvCache c = make_cache();
  const std::vector<int32_t> t = iota_tokens(12);
  const SeqId a = c.new_sequence();
  std::vector<int32_t> slots;
  ASSERT_TRUE(c.append(a, 12, slots).ok());
  c.publish_blocks(a, std::span(t).first(7));  // tokens known up to 7: block 0 only
  EXPECT_EQ(c.n_cached_blocks(), 1);
  // b computed the same first block before a published it: it stays private, b's chain goes on.
  const SeqId b = c.new_sequence();
  ASSERT_TRUE(c.append(b, 12, slots).ok());
  c.publish_blocks(b, t);
  EXPECT_EQ(c.n_cached_blocks(), 3);  // a's block 0, b's blocks 1 and 2
  c.publish_blocks(a, t);             // a's blocks 1 and 2: cached already by b
  EXPECT_EQ(c.n_cached_blocks(), 3);
  EXPECT_EQ(c.match_prefix(iota_tokens(13), 0).n_tokens, 12);
  c.free_sequence(a);
  c.free_sequence(b);
  EXPECT_EQ(c.n_evictable_blocks(), 3);
  ASSERT_TRUE(c.check_integrity().ok()) << c.check_integrity().to_string();
}

TEST_F(KvCachePrefix, EvictionTakesTheLeastRecentlyUsedOnceTheFreeListIsEmpty) {
  KvCache c = make_cache();
  const std::vector<int32_t> t = iota_tokens(9);
  c.free_sequence(sequence_of(c, t));  // 2 cached blocks (0, 1), released last block first
  const SeqId big = c.new_sequence();
  std::vector<int32_t> slots;
  ASSERT_TRUE(c.append(big, 14 * 4, slots).ok());  // the 14 free blocks exactly
  EXPECT_EQ(c.n_free_blocks(), 2);
  EXPECT_EQ(c.match_prefix(t, 0).n_tokens, 8);
  ASSERT_TRUE(c.append(big, 1, slots).ok());  // evicts the LRU block: the chain's tail (block 1)
  EXPECT_EQ(c.n_cached_blocks(), 1);
  EXPECT_EQ(c.match_prefix(t, 0).n_tokens, 4);
  ASSERT_TRUE(c.append(big, 4, slots).ok());
  EXPECT_EQ(c.n_cached_blocks(), 0);
  EXPECT_EQ(c.n_free_blocks(), 0);
  EXPECT_EQ(c.append(big, 4, slots).code(), ErrorCode::kOutOfRange);
  ASSERT_TRUE(c.check_integrity().ok()) << c.check_integrity().to_string();
}

TEST_F(KvCachePrefix, ATruncateIntoAPublishedBlockCopiesIt) {
  KvCache c = make_cache();
  const std::vector<int32_t> t = iota_tokens(9);
  const SeqId a = sequence_of(c, t);
  const int32_t published = c.block_table(a)[1];
  const std::vector<float> before = k_rows(c, published);
  c.truncate(a, 6);  // into block 1 (entries 4..7)
  std::vector<int32_t> slots;
  ASSERT_TRUE(c.append(a, 3, slots).ok());
  EXPECT_NE(c.block_table(a)[1], published);  // a private copy of entries 4, 5
  EXPECT_EQ(c.match_prefix(t, 0).n_tokens, 8);
  // A forward storing new K/V at a's slots never reaches the published rows.
  for (int32_t s : slots) EXPECT_NE(s / c.block_size(), published);
  EXPECT_EQ(k_rows(c, published), before);
  ASSERT_TRUE(c.check_integrity().ok()) << c.check_integrity().to_string();
  c.free_sequence(a);
  ASSERT_TRUE(c.check_integrity().ok()) << c.check_integrity().to_string();
}

TEST_F(KvCachePrefix, AShiftCopiesSharedBlocksAndForgetsThePublishedBlocksItRewrites) {
  KvCache c = make_cache();
  const std::vector<int32_t> t = iota_tokens(13);
  const SeqId a = sequence_of(c, t);  // blocks 0..2 published, block 3 holds entry 12
  EXPECT_EQ(c.n_cached_blocks(), 3);
  const SeqId b = c.new_sequence_from_prefix(t, 0);  // shares the 3 blocks
  const std::vector<int32_t> b_table(c.block_table(b).begin(), c.block_table(b).end());
  std::vector<std::vector<float>> b_rows;
  for (int32_t block : b_table) b_rows.push_back(k_rows(c, block));
  // shift(4, 4): 13 -> 9 entries; the move writes blocks 1 and 2 (entries 4..8), both shared
  // with b: a gets private copies of them (2 of the 12 free blocks), b's rows stay as they were.
  ASSERT_TRUE(c.can_shift(a, 4, 4));
  c.shift(a, 4, 4);
  EXPECT_EQ(c.block_table(a)[0], b_table[0]);
  EXPECT_NE(c.block_table(a)[1], b_table[1]);
  EXPECT_NE(c.block_table(a)[2], b_table[2]);
  for (size_t i = 0; i < b_table.size(); ++i) EXPECT_EQ(k_rows(c, b_table[i]), b_rows[i]) << "block " << i;
  EXPECT_EQ(c.n_cached_blocks(), 3);  // nothing published was written
  EXPECT_EQ(c.match_prefix(t, 0).n_tokens, 12);
  EXPECT_EQ(c.n_free_blocks(), 16 - 3 - 2);  // b's 3, a's 2 copies (a's old block 3 went)
  ASSERT_TRUE(c.check_integrity().ok()) << c.check_integrity().to_string();
  c.free_sequence(a);
  c.free_sequence(b);
  // Alone, a sequence's published blocks that a shift rewrites leave the cache; block 0 stays.
  const SeqId d = sequence_of(c, iota_tokens(13, 100));
  EXPECT_EQ(c.match_prefix(iota_tokens(13, 100), 0).n_tokens, 12);
  c.shift(d, 4, 4);
  EXPECT_EQ(c.match_prefix(iota_tokens(13, 100), 0).n_tokens, 4);
  // Its entries from 4 on hold K/V of the old history, re-rotated: never published again, even
  // once the blocks are full under the shifted token list (entries 0-3, 8-12, then new ones).
  std::vector<int32_t> shifted = iota_tokens(4, 100);
  for (int32_t t : iota_tokens(9, 108)) shifted.push_back(t);
  std::vector<int32_t> grown;
  ASSERT_TRUE(c.append(d, 7, grown).ok());  // 16 entries: 4 full blocks
  c.publish_blocks(d, shifted);
  EXPECT_EQ(c.match_prefix(shifted, 0).n_tokens, 4);
  ASSERT_TRUE(c.check_integrity().ok()) << c.check_integrity().to_string();
  // Too few free blocks for the copies: refused. g shares f's 3 published blocks, e takes all
  // free blocks but one; shift(4, 4) of f would need copies of blocks 1 and 2.
  c.free_sequence(d);
  const SeqId f = sequence_of(c, iota_tokens(13, 200));
  const SeqId g = c.new_sequence_from_prefix(iota_tokens(13, 200), 0);
  const SeqId e = c.new_sequence();
  std::vector<int32_t> slots;
  ASSERT_TRUE(c.append(e, 4 * (c.n_free_blocks() - 1), slots).ok());
  EXPECT_EQ(c.n_free_blocks(), 1);
  EXPECT_FALSE(c.can_shift(f, 4, 4));
  EXPECT_TRUE(c.can_shift(f, 8, 4));  // writes block 2 only: one copy
  c.free_sequence(g);
  EXPECT_TRUE(c.can_shift(f, 4, 4));  // nothing shared any more
  ASSERT_TRUE(c.check_integrity().ok()) << c.check_integrity().to_string();
}

TEST_F(KvCachePrefix, WithoutAPrefixCacheNothingIsCached) {
  KvCache c = make_cache(/*prefix=*/false);
  const std::vector<int32_t> t = iota_tokens(9);
  c.free_sequence(sequence_of(c, t));
  EXPECT_EQ(c.n_cached_blocks(), 0);
  EXPECT_EQ(c.match_prefix(t, 0).n_tokens, 0);
  EXPECT_EQ(c.length(c.new_sequence_from_prefix(t, 0)), 0);
  EXPECT_TRUE(c.check_integrity().ok());
}

// With a prefix cache, gemma3's sliding-window layers are paged like the full-length ones: the
// ring tables are the block tables and no ring storage exists.
TEST(KvCachePrefixSliding, SlidingLayersArePagedAtFullLength) {
  auto engine = api::Engine::load({.model_path = test::parity_fixture_dir("gemma3") / "model.gguf",
                                   .device = api::DeviceChoice::kCpu});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto ring = KvCache::create((*engine)->model(), {.n_slots = 64, .block_size = 4, .max_batch_tokens = 8});
  auto paged = KvCache::create((*engine)->model(), {.n_slots = 64, .block_size = 4, .max_batch_tokens = 8, .prefix_cache = true});
  ASSERT_TRUE(ring.ok() && paged.ok());
  EXPECT_GT(ring->bytes().ring, 0u);
  EXPECT_EQ(paged->bytes().ring, 0u);
  EXPECT_EQ(paged->bytes().full, ring->bytes().full * 3);  // 3 layers paged instead of 1 (2 of them sliding)
  EXPECT_EQ(paged->ring_tokens(), 64);
  const SeqId s = paged->new_sequence();
  std::vector<int32_t> slots;
  ASSERT_TRUE(paged->append(s, 30, slots).ok());  // no max_batch_tokens limit without rings
  EXPECT_TRUE(std::equal(paged->ring_table(s).begin(), paged->ring_table(s).end(), paged->block_table(s).begin(),
                         paged->block_table(s).end()));
  for (int32_t i = 0; i < 30; ++i) EXPECT_EQ(paged->ring_slot(s, i), paged->slot(s, i));
}

}  // namespace
}  // namespace cera::runtime
