// PrefixCache's bookkeeping against a model written out in the test: the chained hash (parent,
// tokens and extra key all matter), verified hits (a forged hash entry never matches), refusal of
// a second block under one hash, the LRU order of eviction, and a randomized run that checks the
// index against a plain std::map model and check_integrity after every operation.
#include "runtime/prefix_cache.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <vector>

namespace cera::runtime {
namespace {

constexpr int32_t kBs = 4;

TEST(PrefixCache, TheHashDependsOnParentTokensAndExtraKey) {
  const std::vector<int32_t> a{1, 2, 3, 4}, b{1, 2, 3, 5}, swapped{2, 1, 3, 4};
  const uint64_t h = PrefixCache::hash_block(PrefixCache::kRootHash, a, 0);
  EXPECT_EQ(h, PrefixCache::hash_block(PrefixCache::kRootHash, a, 0));
  EXPECT_NE(h, PrefixCache::hash_block(PrefixCache::kRootHash, b, 0));
  EXPECT_NE(h, PrefixCache::hash_block(PrefixCache::kRootHash, swapped, 0));
  EXPECT_NE(h, PrefixCache::hash_block(PrefixCache::kRootHash, a, 1));
  EXPECT_NE(h, PrefixCache::hash_block(h, a, 0));  // the same block after another parent
  std::set<uint64_t> seen;
  for (int32_t t = 0; t < 1000; ++t) seen.insert(PrefixCache::hash_block(h, std::vector<int32_t>{t, 0, 0, 0}, 0));
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(PrefixCache, AHitIsVerifiedNotTrustedOnTheHash) {
  PrefixCache c(8, kBs);
  const std::vector<int32_t> t{7, 8, 9, 10};
  const uint64_t h = PrefixCache::hash_block(PrefixCache::kRootHash, t, 3);
  ASSERT_TRUE(c.insert(5, h, PrefixCache::kRootHash, t, 3));
  EXPECT_EQ(c.find(h, PrefixCache::kRootHash, t, 3), 5);
  // Same hash value presented with other tokens, parent or key (what a collision looks like).
  EXPECT_EQ(c.find(h, PrefixCache::kRootHash, std::vector<int32_t>{7, 8, 9, 11}, 3), -1);
  EXPECT_EQ(c.find(h, 12345, t, 3), -1);
  EXPECT_EQ(c.find(h, PrefixCache::kRootHash, t, 4), -1);
  EXPECT_EQ(c.find(h + 1, PrefixCache::kRootHash, t, 3), -1);
  // A second block under the same hash is refused: the first one stays the cached copy.
  EXPECT_FALSE(c.insert(6, h, PrefixCache::kRootHash, t, 3));
  EXPECT_FALSE(c.cached(6));
  EXPECT_FALSE(c.insert(5, h ^ 1, PrefixCache::kRootHash, t, 3));  // a cached block is not re-keyed
  EXPECT_EQ(c.n_cached(), 1);
}

TEST(PrefixCache, UnreferencedBlocksAreEvictedLeastRecentlyUsedFirst) {
  PrefixCache c(8, kBs);
  std::vector<int32_t> refs(8, 0);
  uint64_t parent = PrefixCache::kRootHash;
  for (int32_t b = 0; b < 4; ++b) {
    const std::vector<int32_t> t{b, b, b, b};
    const uint64_t h = PrefixCache::hash_block(parent, t, 0);
    ASSERT_TRUE(c.insert(b, h, parent, t, 0));
    refs[b] = 1;
    parent = h;
  }
  EXPECT_EQ(c.evict(), -1);  // all referenced
  for (int32_t b : {2, 0, 3, 1}) {
    c.release(b);
    refs[b] = 0;
  }
  ASSERT_TRUE(c.check_integrity(refs).ok()) << c.check_integrity(refs).to_string();
  EXPECT_EQ(c.n_evictable(), 4);
  c.acquire(0);  // taken again: off the LRU
  refs[0] = 1;
  ASSERT_TRUE(c.check_integrity(refs).ok()) << c.check_integrity(refs).to_string();
  c.release(0);  // now the most recently used
  refs[0] = 0;
  EXPECT_EQ(c.evict(), 2);
  EXPECT_EQ(c.evict(), 3);
  EXPECT_EQ(c.evict(), 1);
  EXPECT_EQ(c.evict(), 0);
  EXPECT_EQ(c.evict(), -1);
  EXPECT_EQ(c.n_cached(), 0);
  EXPECT_TRUE(c.check_integrity(refs).ok());
}

TEST(PrefixCache, CheckIntegrityCatchesAReferencedBlockOnTheLru) {
  PrefixCache c(4, kBs);
  const std::vector<int32_t> t{1, 1, 1, 1};
  ASSERT_TRUE(c.insert(1, PrefixCache::hash_block(PrefixCache::kRootHash, t, 0), PrefixCache::kRootHash, t, 0));
  c.release(1);
  const std::vector<int32_t> refs{0, 1, 0, 0};  // the KV cache says block 1 is held
  EXPECT_FALSE(c.check_integrity(refs).ok());
  EXPECT_TRUE(c.check_integrity(std::vector<int32_t>(4, 0)).ok());
}

// Random insert / release / acquire / erase / evict against a model: a map hash -> block and an
// LRU list kept by hand.
TEST(PrefixCache, RandomizedAgainstAModel) {
  constexpr int32_t kBlocks = 32;
  PrefixCache c(kBlocks, kBs);
  std::mt19937 rng(17);
  std::vector<int32_t> refs(kBlocks, 0);
  std::map<uint64_t, int32_t> model_index;
  std::vector<int32_t> model_lru;  // front: least recently used
  std::vector<std::vector<int32_t>> tokens(kBlocks);
  std::vector<uint64_t> hash_of(kBlocks, 0);
  for (int step = 0; step < 5000; ++step) {
    const int32_t b = static_cast<int32_t>(rng() % kBlocks);
    const bool is_cached = hash_of[b] != 0;
    switch (rng() % 5) {
      case 0: {  // insert a referenced, uncached block
        if (is_cached) break;
        std::vector<int32_t> t(kBs);
        for (int32_t& x : t) x = static_cast<int32_t>(rng() % 3);  // few values: duplicate hashes happen
        const uint64_t h = PrefixCache::hash_block(PrefixCache::kRootHash, t, 0);
        const bool want = !model_index.contains(h);
        ASSERT_EQ(c.insert(b, h, PrefixCache::kRootHash, t, 0), want);
        if (want) {
          model_index[h] = b;
          hash_of[b] = h;
          tokens[b] = t;
          refs[b] = 1;
        }
        break;
      }
      case 1:  // last reference goes
        if (!is_cached || refs[b] == 0) break;
        c.release(b);
        refs[b] = 0;
        model_lru.push_back(b);
        break;
      case 2:  // referenced again
        if (!is_cached || refs[b] != 0) break;
        c.acquire(b);
        refs[b] = 1;
        std::erase(model_lru, b);
        break;
      case 3:  // forgotten (its rows change)
        if (!is_cached) break;
        c.erase(b);
        model_index.erase(hash_of[b]);
        hash_of[b] = 0;
        refs[b] = 0;
        std::erase(model_lru, b);
        break;
      case 4: {
        const int32_t want = model_lru.empty() ? -1 : model_lru.front();
        ASSERT_EQ(c.evict(), want) << "step " << step;
        if (want >= 0) {
          model_lru.erase(model_lru.begin());
          model_index.erase(hash_of[want]);
          hash_of[want] = 0;
        }
        break;
      }
    }
    ASSERT_EQ(c.n_cached(), static_cast<int32_t>(model_index.size()));
    ASSERT_EQ(c.n_evictable(), static_cast<int32_t>(model_lru.size()));
    for (const auto& [h, block] : model_index) ASSERT_EQ(c.find(h, PrefixCache::kRootHash, tokens[block], 0), block);
    // Uncached blocks' refs do not matter to the index; the check wants 0 for them on no LRU.
    std::vector<int32_t> check_refs(kBlocks, 0);
    for (int32_t i = 0; i < kBlocks; ++i) check_refs[i] = hash_of[i] != 0 ? refs[i] : 0;
    ASSERT_TRUE(c.check_integrity(check_refs).ok()) << c.check_integrity(check_refs).to_string();
  }
}

}  // namespace
}  // namespace cera::runtime
