// Block bookkeeping on the host; the K/V rows themselves move only in shift()
// (kv_cache_shift.cpp), fork() and a copy-on-write append. The rings are allocated block by block
// as a sequence grows (a short sequence holds only the blocks it fills) and never shared.
// Recurrent state rollback keeps a snapshot per evaluated chunk rather than recomputing: the
// state at length n is the last L_cache-1 inputs of every convolution layer, and recomputing
// them means re-running those tokens through every earlier layer (attention over the whole
// history included), while a snapshot is (L_cache-1) * n_embd floats per layer (160 KB per chunk
// for LFM2-1.2B), copied through the backend's download/upload so any device works.
#include "runtime/kv_cache.h"

#include <algorithm>
#include <climits>
#include <string>

namespace cera::runtime {

Result<KvCache> KvCache::create(model::Model& model, const KvCacheConfig& config) {
  if (config.block_size <= 0 || config.n_slots <= 0) return invalid_argument("KV cache needs n_slots > 0 and block_size > 0");
  if (config.kv_type != DType::kF32 && config.kv_type != DType::kF16) {
    return invalid_argument("KV cache type must be F32 or F16, not " + std::string(dtype_name(config.kv_type)));
  }
  KvCache c;
  c.model_ = &model;
  c.block_size_ = config.block_size;
  c.kv_type_ = config.kv_type;
  c.head_dim_ = model.hparams().head_dim;
  // A tensor-parallel model's ranks each keep their heads' K/V and their channels' state on
  // their own device; every other model is its own single rank.
  const std::span<model::Model* const> ranks = model.ranks();
  for (model::Model* m : ranks.empty() ? std::span<model::Model* const>(&c.model_, 1) : ranks) {
    const model::KvGeometry rg = m->kv_geometry();
    Rank r{.model = m, .kv_width = rg.kv_width, .state_ne = rg.state_ne};
    if (rg.has_state()) {
      if (rg.state_ne[0] < 0 || rg.state_ne[1] <= 0) return invalid_argument("model reports an empty recurrent state");
      r.state_elements = rg.state_ne[0] * rg.state_ne[1];
    }
    c.ranks_.push_back(std::move(r));
  }
  c.geometry_ = c.ranks_[0].model->kv_geometry();  // the layer kinds and windows, alike on every rank
  const model::KvGeometry& g = c.geometry_;
  c.state_elements_ = c.ranks_[0].state_elements;
  // 64-bit sizing: n_slots near INT32_MAX must not wrap (it once made "KV cache of -2147483632
  // tokens"); the block count itself fits int32 since block_size >= 1.
  const auto n_blocks = static_cast<int32_t>((int64_t{config.n_slots} + config.block_size - 1) / config.block_size);
  int64_t ring_rows = 0;
  if (config.prefix_cache) {
    c.prefix_.emplace(n_blocks, config.block_size);
    c.paged_sliding_ = g.has_sliding();  // see KvCacheConfig::prefix_cache
  }
  if (g.has_sliding() && !c.paged_sliding_) {
    if (g.sliding_window <= 0 || config.max_batch_tokens <= 0 || config.max_sequences <= 0) {
      return invalid_argument("KV cache of sliding-window layers needs window, max_batch_tokens and max_sequences > 0");
    }
    // At least two windows: then a shift's move overlaps itself in one direction only
    // (kv_cache_shift.cpp). A ring as long as the whole cache never turns (positions < n_slots).
    const int64_t ring = int64_t(g.sliding_window) + std::max(config.max_batch_tokens, g.sliding_window);
    c.window_ = g.sliding_window;
    c.max_append_ = config.max_batch_tokens;
    c.ring_blocks_ = std::min(static_cast<int32_t>((ring + c.block_size_ - 1) / c.block_size_), n_blocks);
    const int64_t n_ring_blocks = int64_t{config.max_sequences} * c.ring_blocks_;
    if (n_ring_blocks > INT32_MAX) return out_of_range("KV cache rings of " + std::to_string(n_ring_blocks) + " blocks");
    ring_rows = n_ring_blocks * c.block_size_;
    for (auto b = static_cast<int32_t>(n_ring_blocks) - 1; b >= 0; --b) c.ring_free_.push_back(b);
  }
  for (size_t rank = 0; rank < c.ranks_.size(); ++rank) {
    for (int32_t il = 0; il < g.n_layer; ++il) {
      ops::KvLayer layer{.block_size = config.block_size};
      if (c.uses(il, Storage::kFull) || c.uses(il, Storage::kRing)) {
        const bool ring = c.uses(il, Storage::kRing);
        auto allocated = c.allocate_layer(rank, ring ? ring_rows : int64_t(n_blocks) * config.block_size);
        if (!allocated.ok()) return allocated.status();
        layer = *allocated;
        (ring ? c.bytes_.ring : c.bytes_.full) += 2 * static_cast<uint64_t>(layer.k.row_bytes() * layer.k.rows());
      }
      c.layers_.push_back(layer);
    }
  }
  c.block_refs_.assign(n_blocks, 0);
  for (int32_t b = n_blocks - 1; b >= 0; --b) c.free_blocks_.push_back(b);
  if (c.prefix_ && c.state_elements_ != 0) {
    // One checkpoint per block, allocated with the pool: in steady state every block ends up
    // cached, so allocating on demand would only move the same memory to a worse moment.
    int64_t n_state_layers = 0;
    for (int32_t il = 0; il < g.n_layer; ++il) n_state_layers += g.kind(il) != model::LayerKind::kAttention;
    for (Rank& r : c.ranks_) {
      const int64_t per_block = n_state_layers * r.state_elements;
      const uint64_t bytes = static_cast<uint64_t>(per_block * n_blocks) * sizeof(float);
      auto buf = r.model->backend().allocate(bytes);
      if (!buf.ok()) return buf.status().with_context("KV cache: recurrent state checkpoints of " + std::to_string(n_blocks) + " blocks");
      r.checkpoint_storage = std::move(buf).value();
      c.bytes_.checkpoints += bytes;
    }
    // Block b's views: every rank's n_layer (empty for attention layers), rank-major.
    for (int32_t b = 0; b < n_blocks; ++b) {
      for (Rank& r : c.ranks_) {
        int64_t offset = b * n_state_layers * r.state_elements;
        for (int32_t il = 0; il < g.n_layer; ++il) {
          TensorView v;
          if (g.kind(il) != model::LayerKind::kAttention) {
            v = r.checkpoint_storage->view(DType::kF32, {r.state_ne[0], r.state_ne[1], 1, 1}, r.model->backend().device());
            v.data += offset * static_cast<int64_t>(sizeof(float));
            offset += r.state_elements;
          }
          c.checkpoint_views_.push_back(v);
        }
      }
    }
    c.checkpointed_.assign(static_cast<size_t>(n_blocks), false);
  }
  return c;
}

Result<ops::KvLayer> KvCache::allocate_layer(size_t rank, int64_t n_rows) {
  ops::Backend& backend = ranks_[rank].model->backend();
  const int64_t width = ranks_[rank].kv_width;
  ops::KvLayer layer{.block_size = block_size_};
  for (TensorView* side : {&layer.k, &layer.v}) {
    const auto elem = static_cast<int64_t>(dtype_type_size(kv_type_));  // F32 or F16 (checked in create)
    auto buf = backend.allocate(static_cast<uint64_t>(n_rows * width * elem));
    if (!buf.ok()) {
      const std::string where = ranks_.size() > 1 ? " on tensor-parallel rank " + std::to_string(rank) : "";
      return buf.status().with_context("KV cache of " + std::to_string(n_rows) + " tokens" + where);
    }
    *side = (*buf)->view(kv_type_, {width, n_rows, 1, 1}, backend.device());
    storage_.push_back(std::move(buf).value());
  }
  return layer;
}

bool KvCache::uses(int32_t il, Storage storage) const {
  if (geometry_.kind(il) != model::LayerKind::kAttention) return false;
  return (geometry_.is_sliding(il) && !paged_sliding_) == (storage == Storage::kRing);
}

void KvCache::copy_rows(Storage storage, std::span<const int32_t> src, std::span<const int32_t> dst) {
  if (src.empty()) return;
  const auto n_layer = static_cast<size_t>(geometry_.n_layer);
  for (size_t r = 0; r < ranks_.size(); ++r) {
    for (int32_t il = 0; il < geometry_.n_layer; ++il) {
      if (uses(il, storage)) ranks_[r].model->backend().kv_copy(layers_[r * n_layer + il], src, dst);
    }
  }
}

void KvCache::rerotate_rows(Storage storage, std::span<const int32_t> rows, int32_t delta) {
  if (rows.empty()) return;
  const auto n_layer = static_cast<size_t>(geometry_.n_layer);
  for (size_t r = 0; r < ranks_.size(); ++r) {
    model::Model& m = *ranks_[r].model;
    for (int32_t il = 0; il < geometry_.n_layer; ++il) {
      if (uses(il, storage)) m.backend().kv_rerotate(layers_[r * n_layer + il], rows, delta, head_dim_, m.rope_params(il));
    }
  }
}

const KvCache::Sequence& KvCache::seq_(SeqId s) const {
  CERA_CHECK(s >= 0 && s < static_cast<SeqId>(seqs_.size()) && seqs_[s].live);
  return seqs_[s];
}
KvCache::Sequence& KvCache::seq_(SeqId s) {
  CERA_CHECK(s >= 0 && s < static_cast<SeqId>(seqs_.size()) && seqs_[s].live);
  return seqs_[s];
}

Result<std::shared_ptr<KvCache::StateBuffers>> KvCache::allocate_state() {
  int64_t n_state_layers = 0;
  for (int32_t il = 0; il < geometry_.n_layer; ++il) n_state_layers += geometry_.kind(il) != model::LayerKind::kAttention;
  auto state = std::make_shared<StateBuffers>();
  for (const Rank& r : ranks_) {
    CERA_ASSIGN_OR_RETURN(auto buf, r.model->backend().allocate(static_cast<uint64_t>(n_state_layers * r.state_elements) * sizeof(float)));
    state->push_back(std::move(buf));
  }
  return state;
}

void KvCache::copy_state(const StateBuffers& dst, const StateBuffers& src) {
  for (size_t r = 0; r < ranks_.size(); ++r) {
    ranks_[r].model->backend().copy(whole_state(*dst[r], r), whole_state(*src[r], r));
  }
}

Status KvCache::init_state(Sequence& s) {
  for (Snapshot& p : s.snapshots) drop_snapshot(p);
  s.snapshots.clear();
  if (state_elements_ == 0) return {};
  if (!s.state) {
    CERA_ASSIGN_OR_RETURN(s.state, allocate_state());
    s.state_views.clear();
    for (size_t r = 0; r < ranks_.size(); ++r) {  // rank-major, n_layer views each
      const Rank& rank = ranks_[r];
      int64_t offset = 0;
      for (int32_t il = 0; il < geometry_.n_layer; ++il) {
        TensorView v;
        if (geometry_.kind(il) != model::LayerKind::kAttention) {
          v = (*s.state)[r]->view(DType::kF32, {rank.state_ne[0], rank.state_ne[1], 1, 1}, rank.model->backend().device());
          v.data += offset * static_cast<int64_t>(sizeof(float));
          offset += rank.state_elements;
        }
        s.state_views.push_back(v);
      }
    }
  }
  for (size_t r = 0; r < ranks_.size(); ++r) {
    const TensorView all = whole_state(*(*s.state)[r], r);
    ranks_[r].model->backend().upload(all, std::vector<float>(static_cast<size_t>(all.n_elements()), 0.0f).data());
  }
  return {};
}

TensorView KvCache::whole_state(ops::Buffer& b, size_t rank) const {
  const auto n = static_cast<int64_t>(b.size() / sizeof(float));
  return b.view(DType::kF32, {n, 1, 1, 1}, ranks_[rank].model->backend().device());
}

Result<KvCache::Snapshot> KvCache::take_snapshot(const Sequence& s, int32_t length) {
  std::shared_ptr<StateBuffers> buf;
  if (!snapshot_pool_.empty()) {
    buf = std::move(snapshot_pool_.back());
    snapshot_pool_.pop_back();
  } else {
    CERA_ASSIGN_OR_RETURN(buf, allocate_state());
  }
  copy_state(*buf, *s.state);
  return Snapshot{length, std::move(buf)};
}

void KvCache::restore_snapshot(const Sequence& s, const Snapshot& snap) { copy_state(*s.state, *snap.data); }

void KvCache::drop_snapshot(Snapshot& snap) {
  if (snap.data && snap.data.use_count() == 1) snapshot_pool_.push_back(std::move(snap.data));
  snap.data.reset();
}

SeqId KvCache::new_sequence() {
  SeqId id = 0;
  while (id < static_cast<SeqId>(seqs_.size()) && seqs_[id].live) ++id;
  if (id == static_cast<SeqId>(seqs_.size())) seqs_.emplace_back();
  Sequence& s = seqs_[id];
  s.live = true;
  s.length = 0;
  s.blocks.clear();
  s.ring.clear();
  s.ring_table.clear();
  s.ring_valid = 0;
  s.extra = 0;
  s.hashes.clear();
  s.publish_limit = INT32_MAX;
  // The state is a few KB per layer; failing to allocate it is as fatal as failing to grow seqs_.
  const Status st = init_state(s);
  CERA_CHECK_MSG(st.ok(), "KV cache: recurrent state of a new sequence: " + st.to_string());
  return id;
}

void KvCache::free_sequence(SeqId seq) {
  drop_blocks(seq_(seq), 0);
  for (Snapshot& p : seq_(seq).snapshots) drop_snapshot(p);
  seq_(seq).snapshots.clear();
  seq_(seq).live = false;
}

int32_t KvCache::slot(SeqId seq, int32_t i) const {
  const Sequence& s = seq_(seq);
  CERA_CHECK(i >= 0 && i < s.length);
  return s.blocks[i / block_size_] * block_size_ + i % block_size_;
}

int32_t KvCache::ring_slot(SeqId seq, int32_t i) const {
  if (paged_sliding_) return slot(seq, i);
  const Sequence& s = seq_(seq);
  CERA_CHECK(ring_blocks_ > 0 && i >= 0 && i < s.length);
  return s.ring_table[i / block_size_] * block_size_ + i % block_size_;
}

void KvCache::copy_block_prefix(int32_t from, int32_t to, int32_t n) {
  std::vector<int32_t> src, dst;
  for (int32_t i = 0; i < n; ++i) {
    src.push_back(from * block_size_ + i);
    dst.push_back(to * block_size_ + i);
  }
  copy_rows(Storage::kFull, src, dst);
}

Result<SeqId> KvCache::fork(SeqId src) {
  const int32_t len = seq_(src).length;
  const bool partial = len % block_size_ != 0;
  if (partial && n_free_blocks() == 0) return out_of_range("KV cache is full: no block for the fork's last partial block");
  if (seq_(src).ring.size() > ring_free_.size()) {
    return out_of_range("KV cache: no free ring for the fork's sliding-window layers (raise max_sequences)");
  }
  const SeqId id = new_sequence();
  Sequence& s = seqs_[src];
  Sequence& d = seqs_[id];
  d.blocks.assign(s.blocks.begin(), s.blocks.begin() + len / block_size_);
  for (int32_t b : d.blocks) ++block_refs_[b];
  if (partial) {
    const int32_t block = take_block();
    copy_block_prefix(s.blocks.back(), block, len % block_size_);
    d.blocks.push_back(block);
  }
  d.length = len;
  d.extra = s.extra;
  d.hashes = s.hashes;
  d.publish_limit = s.publish_limit;
  std::vector<int32_t> from, to;
  for (int32_t r : s.ring) {
    d.ring.push_back(ring_free_.back());
    ring_free_.pop_back();
    for (int32_t i = 0; i < block_size_; ++i) {
      from.push_back(r * block_size_ + i);
      to.push_back(d.ring.back() * block_size_ + i);
    }
  }
  copy_rows(Storage::kRing, from, to);
  for (size_t b = 0; ring_blocks_ > 0 && b < d.blocks.size(); ++b) d.ring_table.push_back(d.ring[b % ring_blocks_]);
  d.ring_valid = s.ring_valid;
  if (state_elements_ != 0) {
    copy_state(*d.state, *s.state);
    d.snapshots = s.snapshots;  // immutable: shared
  }
  return id;
}

Status KvCache::append(SeqId seq, int32_t n, std::vector<int32_t>& slots) {
  Sequence& s = seq_(seq);
  const int32_t need_blocks = (s.length + n + block_size_ - 1) / block_size_;
  // Writing into a partly filled last block that another sequence shares, or that the prefix
  // cache holds (a truncate into a published block), needs a private copy.
  const bool copy_last = n > 0 && s.length % block_size_ != 0 && shared_block(s.blocks.back());
  const int32_t extra = need_blocks - static_cast<int32_t>(s.blocks.size()) + (copy_last ? 1 : 0);
  if (extra > n_free_blocks()) {
    return out_of_range("KV cache is full: " + std::to_string(n) + " more tokens need " + std::to_string(extra) +
                        " blocks, " + std::to_string(n_free_blocks()) + " free");
  }
  if (ring_blocks_ > 0) {
    if (n > max_append_) {
      return invalid_argument("KV cache: " + std::to_string(n) + " tokens in one append; the sliding-window rings are sized for " +
                              std::to_string(max_append_));
    }
    const size_t ring_extra = std::min<size_t>(need_blocks, ring_blocks_) - s.ring.size();
    if (ring_extra > ring_free_.size()) {
      return out_of_range("KV cache: no free ring blocks for the sliding-window layers (more live sequences than max_sequences)");
    }
  }
  if (state_elements_ != 0 && (s.snapshots.empty() || s.snapshots.back().length != s.length)) {
    CERA_ASSIGN_OR_RETURN(Snapshot snap, take_snapshot(s, s.length));
    s.snapshots.push_back(std::move(snap));
    if (s.snapshots.size() > kMaxSnapshots) {
      drop_snapshot(s.snapshots.front());
      s.snapshots.erase(s.snapshots.begin());
    }
  }
  if (copy_last) {
    const int32_t block = take_block();
    copy_block_prefix(s.blocks.back(), block, s.length % block_size_);
    unref_block(s.blocks.back());
    s.blocks.back() = block;
  }
  for (int32_t b = static_cast<int32_t>(s.blocks.size()); b < need_blocks; ++b) {
    const int32_t block = take_block();
    s.blocks.push_back(block);
    if (ring_blocks_ == 0) continue;
    if (b < ring_blocks_) {
      s.ring.push_back(ring_free_.back());
      ring_free_.pop_back();
    }
    s.ring_table.push_back(s.ring[b % ring_blocks_]);
  }
  for (int32_t i = s.length; i < s.length + n; ++i) {
    slots.push_back(s.blocks[i / block_size_] * block_size_ + i % block_size_);
  }
  s.length += n;
  // The forward that stores these entries overwrites the ring rows of entries length - ring_tokens and older.
  s.ring_valid = std::max(s.ring_valid, s.length - ring_tokens());
  return {};
}

int32_t KvCache::take_block() {
  int32_t block = -1;
  if (!free_blocks_.empty()) {
    block = free_blocks_.back();
    free_blocks_.pop_back();
  } else {
    CERA_CHECK(prefix_);
    block = prefix_->evict();
  }
  CERA_CHECK(block >= 0 && block_refs_[block] == 0);
  block_refs_[block] = 1;
  if (!checkpointed_.empty()) checkpointed_[block] = false;
  return block;
}

void KvCache::unref_block(int32_t block) {
  CERA_CHECK(block_refs_[block] > 0);
  if (--block_refs_[block] != 0) return;
  if (prefix_ && prefix_->cached(block)) {
    prefix_->release(block);
  } else {
    free_blocks_.push_back(block);
  }
}

void KvCache::drop_blocks(Sequence& s, int32_t n) {
  CERA_CHECK(n >= 0 && n <= s.length);
  const size_t keep_blocks = static_cast<size_t>((n + block_size_ - 1) / block_size_);
  // Released last block first: the cache's LRU then evicts a prefix's tail before its head.
  while (s.blocks.size() > keep_blocks) {
    const int32_t block = s.blocks.back();
    s.blocks.pop_back();
    unref_block(block);
  }
  s.hashes.resize(std::min(s.hashes.size(), static_cast<size_t>(n / block_size_)));
  // Ring blocks past keep_blocks only ever held entries from n on (truncate's precondition).
  s.ring_table.resize(std::min(s.ring_table.size(), keep_blocks));
  while (s.ring.size() > keep_blocks) {
    ring_free_.push_back(s.ring.back());
    s.ring.pop_back();
  }
  s.length = n;
  if (n == 0) s.ring_valid = 0;
}

bool KvCache::can_truncate(SeqId seq, int32_t n) const {
  const Sequence& s = seq_(seq);
  if (n < 0 || n > s.length) return false;
  if (n == s.length || n == 0) return true;
  // The next query (at n) sees entries (n - window, n); the rings must still hold them.
  if (ring_blocks_ > 0 && std::max(0, n - window_ + 1) < s.ring_valid) return false;
  if (state_elements_ == 0) return true;
  return std::any_of(s.snapshots.begin(), s.snapshots.end(), [n](const Snapshot& p) { return p.length == n; });
}

void KvCache::truncate(SeqId seq, int32_t n) {
  Sequence& s = seq_(seq);
  CERA_CHECK_MSG(can_truncate(seq, n), "KV cache: cannot roll the recurrent state of a sequence of " +
                                           std::to_string(s.length) + " back to " + std::to_string(n) +
                                           " (no snapshot at that length)");
  if (state_elements_ != 0 && n != s.length) {
    if (n == 0) {
      const Status st = init_state(s);
      CERA_CHECK_MSG(st.ok(), st.to_string());  // the buffer exists already: nothing is allocated
    } else {
      while (s.snapshots.back().length != n) {
        drop_snapshot(s.snapshots.back());
        s.snapshots.pop_back();
      }
      restore_snapshot(s, s.snapshots.back());
    }
  }
  drop_blocks(s, n);
}

int32_t KvCache::n_live_sequences() const {
  return static_cast<int32_t>(std::count_if(seqs_.begin(), seqs_.end(), [](const Sequence& s) { return s.live; }));
}

Status KvCache::check_integrity() const {
  auto fail = [](const std::string& m) { return Status(ErrorCode::kInternal, "KV cache integrity: " + m); };
  std::vector<int32_t> refs(block_refs_.size(), 0);
  for (size_t id = 0; id < seqs_.size(); ++id) {
    const Sequence& s = seqs_[id];
    if (!s.live) continue;
    const std::string name = "sequence " + std::to_string(id);
    if (s.blocks.size() != static_cast<size_t>((s.length + block_size_ - 1) / block_size_)) {
      return fail(name + " holds " + std::to_string(s.blocks.size()) + " blocks for " + std::to_string(s.length) + " entries");
    }
    for (int32_t b : s.blocks) {
      if (b < 0 || b >= n_blocks()) return fail(name + " holds block " + std::to_string(b) + " out of range");
      ++refs[b];
    }
  }
  for (int32_t b = 0; b < n_blocks(); ++b) {
    if (refs[b] != block_refs_[b]) {
      return fail("block " + std::to_string(b) + " has " + std::to_string(block_refs_[b]) + " references, " +
                  std::to_string(refs[b]) + " sequences hold it");
    }
  }
  std::vector<bool> listed(block_refs_.size(), false);
  for (int32_t b : free_blocks_) {
    if (b < 0 || b >= n_blocks() || listed[b]) return fail("free list entry " + std::to_string(b) + " repeated or out of range");
    if (block_refs_[b] != 0) return fail("block " + std::to_string(b) + " is free but referenced");
    if (prefix_ && prefix_->cached(b)) return fail("block " + std::to_string(b) + " is free but cached");
    listed[b] = true;
  }
  for (int32_t b = 0; b < n_blocks(); ++b) {
    if (block_refs_[b] == 0 && !listed[b] && !(prefix_ && prefix_->evictable(b))) {
      return fail("block " + std::to_string(b) + " is unreferenced but neither free nor cached");
    }
  }
  if (prefix_) CERA_RETURN_IF_ERROR(prefix_->check_integrity(block_refs_));
  for (size_t id = 0; id < seqs_.size(); ++id) {
    const Sequence& s = seqs_[id];
    if (s.live && s.hashes.size() > static_cast<size_t>(s.length / block_size_)) {
      return fail("sequence " + std::to_string(id) + " has " + std::to_string(s.hashes.size()) +
                  " published blocks of " + std::to_string(s.length / block_size_) + " full ones");
    }
  }
  // Rings: every ring block once, free or owned.
  std::vector<int32_t> seen;
  for (int32_t r : ring_free_) seen.push_back(r);
  for (const Sequence& s : seqs_) {
    if (s.live) seen.insert(seen.end(), s.ring.begin(), s.ring.end());
  }
  std::sort(seen.begin(), seen.end());
  if (std::adjacent_find(seen.begin(), seen.end()) != seen.end()) return fail("a ring block is listed twice");
  return {};
}

}  // namespace cera::runtime
