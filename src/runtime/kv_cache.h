// The paged KV cache: fixed-size blocks of slots shared by all sequences, a block table per
// sequence, and the per-layer storage the backend computes on. A sequence's logical entry i
// (which is also its RoPE position) lives in slot table[i / block_size] * block_size + i % block_size.
// Models with recurrent layers (KvGeometry::kinds, lfm2's convolutions) also get a fixed-size
// state per sequence and layer, created, forked, rolled back and freed with the sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "model/model.h"

namespace cera::runtime {

using SeqId = int32_t;

struct KvCacheConfig {
  int32_t n_slots = 4096;    // total tokens the cache holds, over all sequences (rounded up to blocks)
  int32_t block_size = 16;
};

class KvCache {
 public:
  static Result<KvCache> create(model::Model& model, const KvCacheConfig& config);

  // One per model layer; a layer without K/V (a recurrent layer) has empty views.
  std::span<const ops::KvLayer> layers() const { return layers_; }
  int32_t block_size() const { return block_size_; }
  int32_t n_blocks() const { return static_cast<int32_t>(block_refs_.size()); }
  int32_t n_free_blocks() const { return static_cast<int32_t>(free_blocks_.size()); }

  SeqId new_sequence();
  void free_sequence(SeqId seq);
  int32_t length(SeqId seq) const { return seq_(seq).length; }
  std::span<const int32_t> block_table(SeqId seq) const { return seq_(seq).blocks; }
  int32_t slot(SeqId seq, int32_t i) const;

  // A new sequence with the same entries (and recurrent state) as `src`: full blocks are shared
  // (reference counted, copied on a later write), the partly filled last block is copied. Fails
  // (changing nothing) when no block is free for that copy.
  Result<SeqId> fork(SeqId src);
  // The sequence's recurrent state, one view per model layer (empty views for attention
  // layers; an empty span for models without recurrent layers). ForwardBatch::recurrent_state.
  std::span<const TensorView> recurrent_state(SeqId seq) const { return seq_(seq).state_views; }

  // Extends the sequence by n entries, allocating blocks as needed; appends their slots to
  // `slots`. Fails (changing nothing) when the cache has too few free blocks. With recurrent
  // layers it first snapshots the state at the current length (see truncate).
  Status append(SeqId seq, int32_t n, std::vector<int32_t>& slots);
  // Forgets entries [n, length): rollback after a rejected draft or a failed forward, or an edit
  // of history. The recurrent state cannot be rolled back by forgetting entries: it is restored
  // from the snapshot append() took at length n (kept for the last kMaxSnapshots chunks), or
  // zeroed for n == 0. Precondition: can_truncate(seq, n).
  void truncate(SeqId seq, int32_t n);
  bool can_truncate(SeqId seq, int32_t n) const;
  // Context shift: drops entries [n_keep, n_keep + n_discard), moves the rest down and
  // re-rotates their K by -n_discard so every entry's RoPE position equals its new index. The
  // recurrent state is kept as it is: it holds the last L_cache-1 inputs, which are never among
  // the dropped entries (shift keeps the end of the sequence) and carry no position. Snapshots
  // taken before the shift are dropped (their lengths no longer name the same history).
  // Precondition: the blocks from n_keep on are not shared with a fork.
  void shift(SeqId seq, int32_t n_keep, int32_t n_discard);

  // Snapshots kept per sequence: rollback reaches back this many evaluated chunks (decode steps
  // count as chunks). A snapshot is (L_cache-1) * n_embd floats per recurrent layer.
  static constexpr size_t kMaxSnapshots = 16;

 private:
  struct Snapshot {
    int32_t length = 0;
    std::vector<float> data;  // every recurrent layer's state, concatenated in layer order
  };
  struct Sequence {
    bool live = false;
    int32_t length = 0;
    std::vector<int32_t> blocks;
    std::shared_ptr<ops::Buffer> state;  // recurrent layers' state, allocated once per sequence slot
    std::vector<TensorView> state_views;  // [n_layer] views into `state`; empty when no recurrent layer
    std::vector<Snapshot> snapshots;      // ascending lengths, at most kMaxSnapshots
  };
  const Sequence& seq_(SeqId s) const;
  Sequence& seq_(SeqId s);

  Status init_state(Sequence& s);  // allocates (once) and zeroes the sequence's state
  std::vector<float> save_state(const Sequence& s) const;
  void load_state(const Sequence& s, const std::vector<float>& data);
  void drop_blocks(Sequence& s, int32_t n);  // block bookkeeping of truncate, state untouched
  // Copies slots [0, n) of block `from` into block `to` in every attention layer.
  void copy_block_prefix(int32_t from, int32_t to, int32_t n);

  model::Model* model_ = nullptr;
  model::KvGeometry geometry_;
  int64_t state_elements_ = 0;  // floats of one recurrent layer's state
  int32_t block_size_ = 16;
  int32_t head_dim_ = 0;
  std::vector<std::unique_ptr<ops::Buffer>> storage_;
  std::vector<ops::KvLayer> layers_;
  std::vector<int32_t> block_refs_;   // [n_blocks] sequences using each block
  std::vector<int32_t> free_blocks_;  // stack; lowest index on top for locality
  std::vector<Sequence> seqs_;
};

}  // namespace cera::runtime
