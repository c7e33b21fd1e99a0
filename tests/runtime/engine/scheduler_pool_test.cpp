// The scheduler with a pool whose blocks are shared (KvPoolView), against a small model of such a
// pool written here: requests of one "group" have the same tokens, so block k of one is block k
// of the other once published. Admission starts after the cached prefix and charges only the new
// blocks (plus the cached ones it takes off the free count); preemption frees only what the
// request held alone; after every step the scheduler's free count equals the pool's.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "runtime/engine/scheduler.h"

namespace cera::runtime {
namespace {

class FakePool final : public KvPoolView {
 public:
  FakePool(int32_t n_blocks, int32_t bs) : bs_(bs), refs_(static_cast<size_t>(n_blocks), 0) {
    for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
  }
  void add(RequestId id, int group, int32_t n_tokens) { reqs_[id] = {.group = group, .n_tokens = n_tokens}; }
  void grow(RequestId id) { ++reqs_.at(id).n_tokens; }

  int32_t n_available_blocks() const override {
    int32_t n = static_cast<int32_t>(free_.size());
    for (const auto& [key, b] : cached_) n += refs_[b] == 0;
    return n;
  }
  Prefix cached_prefix(RequestId id) const override {
    const Req& r = reqs_.at(id);
    Prefix p;
    while (p.n_blocks < (r.n_tokens - 1) / bs_) {
      const auto it = cached_.find({r.group, p.n_blocks});
      if (it == cached_.end()) break;
      ++p.n_blocks;
      p.n_unreferenced += refs_[it->second] == 0;
    }
    p.n_tokens = p.n_blocks * bs_;
    return p;
  }
  int32_t open(RequestId id) override {
    Req& r = reqs_.at(id);
    EXPECT_TRUE(r.blocks.empty());
    const Prefix p = cached_prefix(id);
    for (int32_t k = 0; k < p.n_blocks; ++k) {
      const int32_t b = cached_.at({r.group, k});
      ++refs_[b];
      r.blocks.push_back(b);
    }
    r.length = p.n_tokens;
    ++n_hits_;
    n_cached_tokens_ += p.n_tokens;
    return p.n_tokens;
  }
  void release(RequestId id) override { free_request(id); }

  // What the engine does with a chunk: append (taking free blocks, else evicting an unreferenced
  // cached one), then publish the full blocks.
  void run(const ScheduledChunk& c) {
    Req& r = reqs_.at(c.id);
    ASSERT_EQ(r.length, c.first) << "request " << c.id;
    r.length += c.n;
    while (static_cast<int32_t>(r.blocks.size()) * bs_ < r.length) r.blocks.push_back(take());
    for (int32_t k = 0; k < r.length / bs_; ++k) {
      const int32_t b = r.blocks[static_cast<size_t>(k)];
      if (!cached_.contains({r.group, k}) && !is_cached(b)) cached_[{r.group, k}] = b;
    }
  }
  void free_request(RequestId id) {
    Req& r = reqs_.at(id);
    for (int32_t b : r.blocks) {
      if (--refs_[b] == 0 && !is_cached(b)) free_.push_back(b);
    }
    r.blocks.clear();
    r.length = 0;
  }
  int64_t n_cached_tokens() const { return n_cached_tokens_; }

 private:
  struct Req {
    int group = 0;
    int32_t n_tokens = 0;
    int32_t length = 0;
    std::vector<int32_t> blocks;
  };
  bool is_cached(int32_t b) const {
    return std::any_of(cached_.begin(), cached_.end(), [b](const auto& kv) { return kv.second == b; });
  }
  int32_t take() {
    int32_t b = -1;
    if (!free_.empty()) {
      b = free_.back();
      free_.pop_back();
    } else {
      for (auto it = cached_.begin(); it != cached_.end(); ++it) {
        if (refs_[it->second] != 0) continue;
        b = it->second;
        cached_.erase(it);
        break;
      }
    }
    EXPECT_GE(b, 0) << "the scheduler planned more blocks than the pool has";
    if (b >= 0) refs_[b] = 1;
    return b;
  }
  int32_t bs_;
  std::vector<int32_t> refs_;
  std::vector<int32_t> free_;
  std::map<std::pair<int, int32_t>, int32_t> cached_;  // (group, block index) -> block
  std::map<RequestId, Req> reqs_;
  int64_t n_hits_ = 0, n_cached_tokens_ = 0;
};

SchedulerConfig pool_config(int32_t budget, int32_t bs, int32_t n_blocks) {
  return {.max_batch_tokens = budget, .max_running = 8, .max_waiting = 1000, .block_size = bs, .n_blocks = n_blocks,
          .n_ctx = bs * n_blocks};
}

TEST(SchedulerPool, AdmissionStartsAfterTheCachedPrefixAndChargesOnlyNewBlocks) {
  FakePool pool(10, 4);
  Scheduler s(pool_config(64, 4, 10), &pool);
  pool.add(1, /*group=*/0, 10);
  ASSERT_TRUE(s.add(1, 10).ok());
  StepPlan p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].first, 0);
  pool.run(p.chunks[0]);  // 3 blocks, 2 of them full and published
  EXPECT_EQ(s.n_free_blocks(), 7);
  EXPECT_EQ(pool.n_available_blocks(), 7);
  ASSERT_TRUE(s.remove(1));
  pool.free_request(1);  // the 2 published blocks stay, unreferenced: still available
  EXPECT_EQ(pool.n_available_blocks(), 10);
  // Same group, 14 tokens: blocks 0 and 1 come from the cache, 6 tokens are computed in 2 new blocks.
  pool.add(2, 0, 14);
  ASSERT_TRUE(s.add(2, 14).ok());
  p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].first, 8);
  EXPECT_EQ(p.chunks[0].n, 6);
  EXPECT_TRUE(p.chunks[0].admitted && p.chunks[0].output);
  pool.run(p.chunks[0]);
  EXPECT_EQ(s.n_free_blocks(), 6);  // 10 - 2 taken from the cache - 2 new
  EXPECT_EQ(pool.n_available_blocks(), 6);
  EXPECT_EQ(s.counts(2).n_blocks, 4);
  EXPECT_TRUE(s.check_integrity().ok()) << s.check_integrity().to_string();
  // A third request of the group while 2 runs: it shares 3 published blocks (12 tokens).
  pool.add(3, 0, 13);
  ASSERT_TRUE(s.add(3, 13).ok());
  s.append_token(2);
  pool.grow(2);
  p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[1].first, 12);
  EXPECT_EQ(p.chunks[1].n, 1);
  for (const ScheduledChunk& c : p.chunks) pool.run(c);
  EXPECT_EQ(s.n_free_blocks(), pool.n_available_blocks());
  EXPECT_EQ(pool.n_cached_tokens(), 8 + 12);
}

TEST(SchedulerPool, AHeadWhoseNewBlocksDoNotFitWaitsEvenWithACachedPrefix) {
  FakePool pool(6, 4);
  Scheduler s(pool_config(64, 4, 6), &pool);
  pool.add(1, 0, 9);
  ASSERT_TRUE(s.add(1, 9).ok());
  pool.run(s.schedule().chunks[0]);  // 3 blocks held, blocks 0-1 published (referenced)
  pool.add(2, 0, 21);                // 6 blocks: 2 shared + 4 new, only 3 free
  ASSERT_TRUE(s.add(2, 21).ok());
  s.append_token(1);
  pool.grow(1);
  StepPlan p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 1u);  // request 1's decode token (in its third block); 2 waits
  EXPECT_EQ(s.state(2), RequestState::kWaiting);
  pool.run(p.chunks[0]);
  ASSERT_TRUE(s.remove(1));
  pool.free_request(1);  // 2 cached blocks, unreferenced, + 4 free
  p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].first, 8);
  pool.run(p.chunks[0]);
  EXPECT_EQ(s.n_free_blocks(), 0);
  EXPECT_EQ(pool.n_available_blocks(), 0);
}

// Random groups, lengths, budgets and tiny pools (preemption of requests that share blocks):
// after every step the scheduler's free count equals the pool's, chunks start where the pool's
// sequence ends, and every request finishes; some admissions hit the cache.
TEST(SchedulerPool, RandomizedRunsAgreeWithThePool) {
  std::mt19937 rng(23);
  int64_t cached = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int32_t bs = 1 + static_cast<int32_t>(rng() % 8), n_blocks = 6 + static_cast<int32_t>(rng() % 30);
    SchedulerConfig c = pool_config(1 + static_cast<int32_t>(rng() % 48), bs, n_blocks);
    c.max_running = 1 + static_cast<int32_t>(rng() % 6);
    FakePool pool(n_blocks, bs);
    Scheduler s(c, &pool);
    struct Want {
      int32_t total, n_tokens, computed = 0;
    };
    std::map<RequestId, Want> live;
    for (RequestId id = 1; id <= 30; ++id) {
      const int32_t prompt = 1 + static_cast<int32_t>(rng() % (c.n_ctx / 2));
      const int32_t total = std::min(c.n_ctx, prompt + static_cast<int32_t>(rng() % 12));
      pool.add(id, static_cast<int>(rng() % 3), prompt);
      ASSERT_TRUE(s.add(id, prompt).ok());
      live[id] = {total, prompt};
    }
    for (int step = 0; !live.empty(); ++step) {
      ASSERT_LT(step, 100000) << "no progress";
      const StepPlan p = s.schedule();
      ASSERT_TRUE(s.check_integrity().ok()) << s.check_integrity().to_string();
      for (RequestId id : p.preempted) live[id].computed = 0;
      ASSERT_TRUE(!p.chunks.empty() || !p.preempted.empty());
      for (const ScheduledChunk& ch : p.chunks) {
        Want& w = live.at(ch.id);
        if (ch.admitted) w.computed = ch.first;
        ASSERT_EQ(ch.first, w.computed);
        pool.run(ch);
        w.computed += ch.n;
      }
      ASSERT_EQ(s.n_free_blocks(), pool.n_available_blocks()) << "trial " << trial << " step " << step;
      for (const ScheduledChunk& ch : p.chunks) {
        Want& w = live.at(ch.id);
        ASSERT_EQ(ch.output, w.computed == w.n_tokens);
        if (!ch.output) continue;
        if (w.n_tokens == w.total) {
          ASSERT_TRUE(s.remove(ch.id));
          pool.free_request(ch.id);
          live.erase(ch.id);
        } else {
          s.append_token(ch.id);
          pool.grow(ch.id);
          ++w.n_tokens;
        }
      }
    }
    EXPECT_TRUE(s.idle());
    EXPECT_EQ(pool.n_available_blocks(), n_blocks);
    cached += pool.n_cached_tokens();
  }
  EXPECT_GT(cached, 0);
}

}  // namespace
}  // namespace cera::runtime
