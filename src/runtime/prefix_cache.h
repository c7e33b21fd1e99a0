// The prefix cache's index of full KV blocks: a chained 64-bit hash (the parent block's hash, the
// block's token ids, an extra key such as a LoRA id or a cache salt) -> block id, the tokens each
// cached block holds, and the LRU order of the cached blocks that no sequence references.
// The decision that is not obvious: a hit is verified against the stored parent hash, tokens and
// extra key, never trusted on the hash alone, so a 64-bit collision costs a miss, never a wrong
// answer. Host bookkeeping only: KvCache owns the blocks, their reference counts and their rows;
// an unreferenced cached block is off KvCache's free list but reclaimable (evict()).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace cera::runtime {

class PrefixCache {
 public:
  // The parent hash of a sequence's first block.
  static constexpr uint64_t kRootHash = 0x6365726170726566ull;  // "cerapref"
  // The chained hash of one full block: parent hash, its block_size token ids, the extra key.
  static uint64_t hash_block(uint64_t parent, std::span<const int32_t> tokens, uint64_t extra);

  PrefixCache(int32_t n_blocks, int32_t block_size);

  // The cached block that holds `tokens` (block_size ids) right after the chain ending in
  // `parent`, under `extra`; `hash` is hash_block(parent, tokens, extra). -1 when none.
  int32_t find(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens, uint64_t extra) const;
  // Caches `block`, whose rows hold `tokens` for good (full, computed, never written again while
  // cached). False, changing nothing, when that hash is cached already (another sequence
  // computed the same block first: this one stays private) or the block is cached. The caller
  // holds a reference to the block (it is not on the LRU).
  bool insert(int32_t block, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens, uint64_t extra);
  bool cached(int32_t block) const { return entries_[static_cast<size_t>(block)].cached; }
  // Forgets a cached block, referenced or not (its rows are about to change).
  void erase(int32_t block);

  // The LRU of cached blocks with no reference. release: a cached block's last reference went
  // (it becomes the most recently used); acquire: a sequence references it again.
  void release(int32_t block);
  void acquire(int32_t block);
  bool evictable(int32_t block) const { return entries_[static_cast<size_t>(block)].in_lru; }
  // Forgets the least recently used unreferenced block and returns it (the caller reuses it);
  // -1 when every cached block is referenced.
  int32_t evict();

  int32_t n_cached() const { return static_cast<int32_t>(by_hash_.size()); }
  int32_t n_evictable() const { return n_lru_; }
  int32_t block_size() const { return block_size_; }

  // Consistent with `refs` (the KV cache's reference count of every block): the hash table and
  // the entries agree, every stored hash is the hash of its stored tokens, and the LRU holds
  // exactly the cached blocks with no reference, once each.
  Status check_integrity(std::span<const int32_t> refs) const;

 private:
  struct Entry {
    bool cached = false;
    bool in_lru = false;
    uint64_t hash = 0, parent = 0, extra = 0;
    int32_t prev = -1, next = -1;  // LRU links (head: least recently used)
  };
  std::span<const int32_t> tokens_of(int32_t block) const;
  void unlink(int32_t block);

  int32_t block_size_ = 0;
  std::vector<Entry> entries_;                    // [n_blocks]
  std::vector<int32_t> tokens_;                   // [n_blocks * block_size] tokens of cached blocks
  std::unordered_map<uint64_t, int32_t> by_hash_;  // hash -> cached block
  int32_t lru_head_ = -1, lru_tail_ = -1, n_lru_ = 0;
};

}  // namespace cera::runtime
