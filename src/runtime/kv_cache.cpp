// Block bookkeeping on the host; the K/V rows themselves move only in shift() (kv_copy in chunks
// that never overlap their own source, then kv_rerotate).
#include "runtime/kv_cache.h"

#include <algorithm>

namespace cera::runtime {

Result<KvCache> KvCache::create(model::Model& model, const KvCacheConfig& config) {
  if (config.block_size <= 0 || config.n_slots <= 0) return invalid_argument("KV cache needs n_slots > 0 and block_size > 0");
  KvCache c;
  c.model_ = &model;
  c.block_size_ = config.block_size;
  c.head_dim_ = model.hparams().head_dim;
  const model::KvGeometry g = model.kv_geometry();
  const int32_t n_blocks = (config.n_slots + config.block_size - 1) / config.block_size;
  const int64_t n_slots = int64_t(n_blocks) * config.block_size;
  ops::Backend& backend = model.backend();
  for (int32_t il = 0; il < g.n_layer; ++il) {
    ops::KvLayer layer;
    layer.block_size = config.block_size;
    for (TensorView* side : {&layer.k, &layer.v}) {
      auto buf = backend.allocate(static_cast<uint64_t>(n_slots * g.kv_width) * sizeof(float));
      if (!buf.ok()) return buf.status().with_context("KV cache of " + std::to_string(n_slots) + " tokens");
      *side = (*buf)->view(DType::kF32, {g.kv_width, n_slots, 1, 1}, backend.device());
      c.storage_.push_back(std::move(buf).value());
    }
    c.layers_.push_back(layer);
  }
  c.block_refs_.assign(n_blocks, 0);
  for (int32_t b = n_blocks - 1; b >= 0; --b) c.free_blocks_.push_back(b);
  return c;
}

const KvCache::Sequence& KvCache::seq_(SeqId s) const {
  CERA_CHECK(s >= 0 && s < static_cast<SeqId>(seqs_.size()) && seqs_[s].live);
  return seqs_[s];
}
KvCache::Sequence& KvCache::seq_(SeqId s) {
  CERA_CHECK(s >= 0 && s < static_cast<SeqId>(seqs_.size()) && seqs_[s].live);
  return seqs_[s];
}

SeqId KvCache::new_sequence() {
  for (SeqId s = 0; s < static_cast<SeqId>(seqs_.size()); ++s) {
    if (!seqs_[s].live) {
      seqs_[s] = {true, 0, {}};
      return s;
    }
  }
  seqs_.push_back({true, 0, {}});
  return static_cast<SeqId>(seqs_.size() - 1);
}

void KvCache::free_sequence(SeqId seq) {
  truncate(seq, 0);
  seq_(seq).live = false;
}

int32_t KvCache::slot(SeqId seq, int32_t i) const {
  const Sequence& s = seq_(seq);
  CERA_CHECK(i >= 0 && i < s.length);
  return s.blocks[i / block_size_] * block_size_ + i % block_size_;
}

Status KvCache::append(SeqId seq, int32_t n, std::vector<int32_t>& slots) {
  Sequence& s = seq_(seq);
  const int32_t need_blocks = (s.length + n + block_size_ - 1) / block_size_;
  const int32_t extra = need_blocks - static_cast<int32_t>(s.blocks.size());
  if (extra > n_free_blocks()) {
    return out_of_range("KV cache is full: " + std::to_string(n) + " more tokens need " + std::to_string(extra) +
                        " blocks, " + std::to_string(n_free_blocks()) + " free");
  }
  for (int32_t b = 0; b < extra; ++b) {
    const int32_t block = free_blocks_.back();
    free_blocks_.pop_back();
    block_refs_[block] = 1;
    s.blocks.push_back(block);
  }
  for (int32_t i = s.length; i < s.length + n; ++i) {
    slots.push_back(s.blocks[i / block_size_] * block_size_ + i % block_size_);
  }
  s.length += n;
  return {};
}

void KvCache::truncate(SeqId seq, int32_t n) {
  Sequence& s = seq_(seq);
  CERA_CHECK(n >= 0 && n <= s.length);
  const size_t keep_blocks = static_cast<size_t>((n + block_size_ - 1) / block_size_);
  while (s.blocks.size() > keep_blocks) {
    const int32_t block = s.blocks.back();
    s.blocks.pop_back();
    if (--block_refs_[block] == 0) free_blocks_.push_back(block);
  }
  s.length = n;
}

void KvCache::shift(SeqId seq, int32_t n_keep, int32_t n_discard) {
  const int32_t len = seq_(seq).length;
  CERA_CHECK(n_keep >= 0 && n_discard > 0 && n_keep + n_discard <= len);
  ops::Backend& backend = model_->backend();
  // Move entries down in chunks of n_discard: a chunk's destination was read by earlier chunks
  // (or was discarded), so no chunk overwrites a row it still has to read.
  std::vector<int32_t> src, dst;
  for (int32_t first = n_keep + n_discard; first < len; first += n_discard) {
    src.clear();
    dst.clear();
    for (int32_t i = first; i < std::min(len, first + n_discard); ++i) {
      src.push_back(slot(seq, i));
      dst.push_back(slot(seq, i - n_discard));
    }
    for (const ops::KvLayer& layer : layers_) backend.kv_copy(layer, src, dst);
  }
  truncate(seq, len - n_discard);
  std::vector<int32_t> moved;
  for (int32_t i = n_keep; i < len - n_discard; ++i) moved.push_back(slot(seq, i));
  if (!moved.empty()) {
    for (size_t il = 0; il < layers_.size(); ++il) {
      backend.kv_rerotate(layers_[il], moved, -n_discard, head_dim_, model_->rope_params(static_cast<int32_t>(il)));
    }
  }
}

}  // namespace cera::runtime
