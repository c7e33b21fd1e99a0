// The KV cache's side of prefix caching: matching a token list against the published blocks,
// starting a sequence on them, publishing a sequence's finished blocks, and the recurrent state
// checkpoints at block ends. A match walks the hash chain block by block and stops at the first
// miss, so its cost is that of the prefix it finds (plus one block).
#include <algorithm>

#include "runtime/kv_cache.h"

namespace cera::runtime {

TensorView KvCache::checkpoint_row(int32_t block, size_t rank) const {
  const Rank& r = ranks_[rank];
  const int64_t per_block = static_cast<int64_t>(r.checkpoint_storage->size() / sizeof(float)) / n_blocks();
  TensorView v = r.checkpoint_storage->view(DType::kF32, {per_block, 1, 1, 1}, r.model->backend().device());
  v.data += int64_t{block} * per_block * static_cast<int64_t>(sizeof(float));
  return v;
}

KvCache::PrefixMatch KvCache::match_prefix(std::span<const int32_t> tokens, uint64_t extra) const {
  PrefixMatch m;
  if (!prefix_ || tokens.empty()) return m;
  const auto max_blocks = static_cast<int32_t>((tokens.size() - 1) / static_cast<size_t>(block_size_));
  uint64_t parent = PrefixCache::kRootHash;
  for (int32_t k = 0; k < max_blocks; ++k) {
    const auto block_tokens = tokens.subspan(static_cast<size_t>(k) * block_size_, block_size_);
    const uint64_t hash = PrefixCache::hash_block(parent, block_tokens, extra);
    const int32_t block = prefix_->find(hash, parent, block_tokens, extra);
    if (block < 0) break;
    ++m.n_blocks;
    m.n_unreferenced += block_refs_[block] == 0;
    parent = hash;
  }
  m.n_tokens = m.n_blocks * block_size_;
  return m;
}

SeqId KvCache::new_sequence_from_prefix(std::span<const int32_t> tokens, uint64_t extra) {
  const PrefixMatch m = match_prefix(tokens, extra);
  const SeqId id = new_sequence();
  Sequence& s = seqs_[id];
  s.extra = extra;
  uint64_t parent = PrefixCache::kRootHash;
  for (int32_t k = 0; k < m.n_blocks; ++k) {
    const auto block_tokens = tokens.subspan(static_cast<size_t>(k) * block_size_, block_size_);
    const uint64_t hash = PrefixCache::hash_block(parent, block_tokens, extra);
    const int32_t block = prefix_->find(hash, parent, block_tokens, extra);
    CERA_CHECK(block >= 0);
    if (block_refs_[block]++ == 0) prefix_->acquire(block);
    s.blocks.push_back(block);
    s.hashes.push_back(hash);
    parent = hash;
  }
  s.length = m.n_tokens;
  // The state after the prefix is the checkpoint at its last block's end (every published block
  // of a recurrent model has one: publish_blocks).
  if (state_elements_ != 0 && m.n_blocks > 0) {
    for (size_t r = 0; r < ranks_.size(); ++r) {
      ranks_[r].model->backend().copy(whole_state(*(*s.state)[r], r), checkpoint_row(s.blocks.back(), r));
    }
  }
  return id;
}

void KvCache::publish_blocks(SeqId seq, std::span<const int32_t> tokens) {
  if (!prefix_) return;
  Sequence& s = seq_(seq);
  const size_t n_full = std::min(std::min(static_cast<size_t>(s.length), tokens.size()) / static_cast<size_t>(block_size_),
                                 static_cast<size_t>(s.publish_limit));
  while (s.hashes.size() < n_full) {
    const size_t k = s.hashes.size();
    const int32_t block = s.blocks[k];
    if (state_elements_ != 0 && !checkpointed_[block]) return;  // no state to resume from there
    const uint64_t parent = k == 0 ? PrefixCache::kRootHash : s.hashes[k - 1];
    const auto block_tokens = tokens.subspan(k * block_size_, block_size_);
    const uint64_t hash = PrefixCache::hash_block(parent, block_tokens, s.extra);
    prefix_->insert(block, hash, parent, block_tokens, s.extra);  // false: cached already, by this block or another
    s.hashes.push_back(hash);
  }
}

void KvCache::state_checkpoints(SeqId seq, int32_t n, int32_t first_row, std::vector<model::StateCheckpoint>& out) {
  if (!prefix_ || state_elements_ == 0) return;
  const Sequence& s = seq_(seq);
  const int32_t start = s.length - n;
  CERA_CHECK(n >= 0 && start >= 0);
  const size_t per_block = ranks_.size() * static_cast<size_t>(geometry_.n_layer);  // rank-major
  for (int32_t end = (start / block_size_ + 1) * block_size_; end <= s.length; end += block_size_) {
    const int32_t block = s.blocks[static_cast<size_t>(end / block_size_ - 1)];
    checkpointed_[block] = true;
    out.push_back({.token = first_row + (end - 1 - start),
                   .state = std::span<const TensorView>(checkpoint_views_).subspan(block * per_block, per_block)});
  }
}

}  // namespace cera::runtime
