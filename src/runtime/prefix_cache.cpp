// The hash is splitmix64's finaliser chained over (parent, tokens, extra): cheap (a few ns per
// token, against a forward's microseconds per token) and well mixed, and collisions are caught by
// the verification in find() anyway. The LRU is an intrusive doubly linked list over block ids.
#include "runtime/prefix_cache.h"

#include <algorithm>
#include <string>

#include "core/check.h"
#include "core/hash.h"

namespace cera::runtime {
namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;

}  // namespace

uint64_t PrefixCache::hash_block(uint64_t parent, std::span<const int32_t> tokens, uint64_t extra) {
  uint64_t h = mix64(parent + kGolden);
  for (int32_t t : tokens) h = mix64(h + static_cast<uint32_t>(t) + kGolden);
  return mix64(h ^ mix64(extra + kGolden));
}

PrefixCache::PrefixCache(int32_t n_blocks, int32_t block_size)
    : block_size_(block_size),
      entries_(static_cast<size_t>(n_blocks)),
      tokens_(static_cast<size_t>(n_blocks) * static_cast<size_t>(block_size)) {
  CERA_CHECK(n_blocks > 0 && block_size > 0);
}

std::span<const int32_t> PrefixCache::tokens_of(int32_t block) const {
  return std::span<const int32_t>(tokens_).subspan(static_cast<size_t>(block) * block_size_, block_size_);
}

int32_t PrefixCache::find(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens, uint64_t extra) const {
  CERA_CHECK(static_cast<int32_t>(tokens.size()) == block_size_);
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return -1;
  const Entry& e = entries_[static_cast<size_t>(it->second)];
  const std::span<const int32_t> held = tokens_of(it->second);
  if (e.parent != parent || e.extra != extra || !std::equal(held.begin(), held.end(), tokens.begin())) return -1;
  return it->second;
}

bool PrefixCache::insert(int32_t block, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens, uint64_t extra) {
  CERA_CHECK(static_cast<int32_t>(tokens.size()) == block_size_);
  Entry& e = entries_[static_cast<size_t>(block)];
  if (e.cached || by_hash_.contains(hash)) return false;
  e = {.cached = true, .hash = hash, .parent = parent, .extra = extra};
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(block) * block_size_);
  by_hash_.emplace(hash, block);
  return true;
}

void PrefixCache::erase(int32_t block) {
  Entry& e = entries_[static_cast<size_t>(block)];
  if (!e.cached) return;
  if (e.in_lru) unlink(block);
  by_hash_.erase(e.hash);
  e = {};
}

void PrefixCache::unlink(int32_t block) {
  Entry& e = entries_[static_cast<size_t>(block)];
  CERA_CHECK(e.in_lru);
  (e.prev >= 0 ? entries_[static_cast<size_t>(e.prev)].next : lru_head_) = e.next;
  (e.next >= 0 ? entries_[static_cast<size_t>(e.next)].prev : lru_tail_) = e.prev;
  e.prev = e.next = -1;
  e.in_lru = false;
  --n_lru_;
}

void PrefixCache::release(int32_t block) {
  Entry& e = entries_[static_cast<size_t>(block)];
  CERA_CHECK(e.cached && !e.in_lru);
  e.in_lru = true;
  e.prev = lru_tail_;
  e.next = -1;
  (lru_tail_ >= 0 ? entries_[static_cast<size_t>(lru_tail_)].next : lru_head_) = block;
  lru_tail_ = block;
  ++n_lru_;
}

void PrefixCache::acquire(int32_t block) {
  CERA_CHECK(entries_[static_cast<size_t>(block)].cached);
  unlink(block);
}

int32_t PrefixCache::evict() {
  const int32_t block = lru_head_;
  if (block < 0) return -1;
  erase(block);
  return block;
}

Status PrefixCache::check_integrity(std::span<const int32_t> refs) const {
  auto fail = [](const std::string& m) { return Status(ErrorCode::kInternal, "prefix cache integrity: " + m); };
  if (refs.size() != entries_.size()) return fail("reference counts for a different number of blocks");
  int32_t n_cached = 0;
  for (size_t b = 0; b < entries_.size(); ++b) {
    const Entry& e = entries_[b];
    const std::string name = "block " + std::to_string(b);
    if (!e.cached) {
      if (e.in_lru) return fail(name + " is on the LRU but not cached");
      continue;
    }
    ++n_cached;
    const auto it = by_hash_.find(e.hash);
    if (it == by_hash_.end() || it->second != static_cast<int32_t>(b)) return fail(name + " is not indexed by its hash");
    if (hash_block(e.parent, tokens_of(static_cast<int32_t>(b)), e.extra) != e.hash) {
      return fail(name + "'s hash is not the hash of its tokens");
    }
    if (e.in_lru != (refs[b] == 0)) {
      return fail(name + " has " + std::to_string(refs[b]) + " references and is " + (e.in_lru ? "" : "not ") +
                  "on the LRU");
    }
  }
  if (n_cached != static_cast<int32_t>(by_hash_.size())) return fail("the hash table and the entries disagree");
  int32_t n = 0;
  for (int32_t b = lru_head_, prev = -1; b >= 0; prev = b, b = entries_[static_cast<size_t>(b)].next) {
    if (++n > n_lru_ || !entries_[static_cast<size_t>(b)].in_lru || entries_[static_cast<size_t>(b)].prev != prev) {
      return fail("the LRU list is broken at block " + std::to_string(b));
    }
  }
  if (n != n_lru_) return fail("the LRU counts " + std::to_string(n_lru_) + " blocks, its list " + std::to_string(n));
  return {};
}

}  // namespace cera::runtime
