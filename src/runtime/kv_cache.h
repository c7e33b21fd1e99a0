// The paged KV cache: fixed-size blocks of slots shared by all sequences, a block table per
// sequence, and the per-layer storage the backend computes on. A sequence's logical entry i
// (which is also its RoPE position) lives in slot table[i / block_size] * block_size + i % block_size.
// Sliding-window layers (KvGeometry::sliding, gemma3's local layers) get their own storage in
// which each sequence owns a ring of ring_tokens() slots: logical block b lives in ring block
// b mod (ring_tokens / block_size), materialised as an ordinary block table (ring_table) so the
// attention kernels need no change; table entries older than the window alias newer entries,
// and the kernels never read them (a query at p reads only (p - window, p]).
// Models with recurrent layers (KvGeometry::kinds, lfm2's convolutions) also get a fixed-size
// state per sequence and layer, created, forked, rolled back and freed with the sequence.
// With KvCacheConfig::prefix_cache, full blocks are published into a PrefixCache and shared by
// later sequences that start with the same tokens (new_sequence_from_prefix); see that config
// field for what it changes for sliding-window and recurrent layers.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/status.h"
#include "model/model.h"
#include "runtime/prefix_cache.h"

namespace cera::runtime {

using SeqId = int32_t;

struct KvCacheConfig {
  int32_t n_slots = 4096;    // total tokens the cache holds, over all sequences (rounded up to blocks)
  int32_t block_size = 16;
  // Sliding-window layers keep, per sequence, a ring of window + max(max_batch_tokens, window)
  // slots (rounded up to blocks, at most n_slots): while a forward of up to max_batch_tokens
  // tokens of the sequence stores its K/V, every one of its queries still finds its whole
  // window, and a context shift can move the kept window along the ring in place.
  int32_t max_batch_tokens = 512;
  int32_t max_sequences = 1;  // live sequences with tokens the rings are allocated for
  DType kv_type = DType::kF32;  // K/V rows: F32 or F16 (half the bytes; attention math stays float)
  // Keep published full blocks after their sequences end (prefix caching). What it changes:
  // - Sliding-window layers are stored in the paged blocks like the full-length layers (no
  //   rings): a sequence resuming at a block boundary P needs those layers' K/V of the window
  //   before P, which a per-sequence ring cannot share, and no recompute of a finite window can
  //   rebuild it exactly (each sliding layer's K/V depends on the windows of the sliding layers
  //   below it). The cost is memory: those layers take n_slots rows each instead of rings.
  // - Recurrent layers get a state checkpoint per block, taken by the forward at the block's
  //   end (state_checkpoints), so that a hit resumes with the state it had there.
  bool prefix_cache = false;
};

// Bytes of K/V storage by kind of layer (recurrent state not included).
struct KvBytes {
  uint64_t full = 0;  // full-length layers: n_slots rows of K and V each
  uint64_t ring = 0;  // sliding-window layers: max_sequences rings of ring_tokens rows each
  uint64_t checkpoints = 0;  // recurrent state per block, with a prefix cache
  uint64_t total() const { return full + ring + checkpoints; }
};

class KvCache {
 public:
  static Result<KvCache> create(model::Model& model, const KvCacheConfig& config);

  // One per model layer; a layer without K/V (a recurrent layer) has empty views. A
  // sliding-window layer's views are its ring storage (ring_table / ring_slot address it). For a
  // tensor-parallel model (Model::ranks()), every rank's layers, rank-major.
  std::span<const ops::KvLayer> layers() const { return layers_; }
  int32_t block_size() const { return block_size_; }
  // Blocks of the full-length layers' storage.
  int32_t n_blocks() const { return static_cast<int32_t>(block_refs_.size()); }
  // Blocks an append can take: the free list plus the cached blocks no sequence references
  // (evicted, least recently used first, when the free list is empty).
  int32_t n_free_blocks() const { return static_cast<int32_t>(free_blocks_.size()) + n_evictable_blocks(); }
  int32_t n_evictable_blocks() const { return prefix_ ? prefix_->n_evictable() : 0; }
  int32_t n_cached_blocks() const { return prefix_ ? prefix_->n_cached() : 0; }
  bool has_prefix_cache() const { return prefix_.has_value(); }
  // Slots of one sequence's ring in the sliding-window layers; 0 when the model has none. With
  // a prefix cache those layers are paged: a "ring" as long as the pool, which never turns
  // (ring_table is the block table, ring_slot the slot).
  int32_t ring_tokens() const { return paged_sliding_ ? n_blocks() * block_size_ : ring_blocks_ * block_size_; }
  KvBytes bytes() const { return bytes_; }
  // The bookkeeping is consistent: every block's reference count equals the live sequences whose
  // tables hold it, the free list holds exactly the unreferenced blocks once each, and every ring
  // block is either free or owned by one live sequence; with a prefix cache, an unreferenced
  // block is either free or cached (on the cache's LRU), never both, and PrefixCache's own
  // check holds. O(blocks + table entries); for tests and idle-time checks (the engine loop's
  // pool check).
  Status check_integrity() const;
  int32_t n_live_sequences() const;

  SeqId new_sequence();
  void free_sequence(SeqId seq);
  int32_t length(SeqId seq) const { return seq_(seq).length; }
  std::span<const int32_t> block_table(SeqId seq) const { return seq_(seq).blocks; }
  int32_t slot(SeqId seq, int32_t i) const;
  // The sliding-window layers' table of the sequence ([ceil(length / block_size)] ring blocks,
  // ForwardBatch::ring) and the ring slot of entry i; empty / unused without such layers.
  std::span<const int32_t> ring_table(SeqId seq) const {
    return paged_sliding_ ? seq_(seq).blocks : std::span<const int32_t>(seq_(seq).ring_table);
  }
  int32_t ring_slot(SeqId seq, int32_t i) const;

  // A new sequence with the same entries (and recurrent state) as `src`: full blocks are shared
  // (reference counted, copied on a later write), the partly filled last block is copied. Fails
  // (changing nothing) when no block is free for that copy. The ring of the sliding-window
  // layers is copied whole (a ring cannot be shared: its slots are overwritten as it turns).
  Result<SeqId> fork(SeqId src);
  // The sequence's recurrent state, one view per model layer (empty views for attention
  // layers; an empty span for models without recurrent layers), every rank's for a
  // tensor-parallel model, rank-major. ForwardBatch::recurrent_state.
  std::span<const TensorView> recurrent_state(SeqId seq) const { return seq_(seq).state_views; }

  // Extends the sequence by n entries, allocating blocks as needed; appends their slots to
  // `slots` (ring_slot gives the sliding-window layers' slots). Fails (changing nothing) when
  // the cache has too few free blocks or ring blocks, or, with sliding-window layers, when n >
  // max_batch_tokens. Those layers assume each forward stores one append's entries per sequence.
  // With recurrent layers it first snapshots the state at the current length (see truncate).
  Status append(SeqId seq, int32_t n, std::vector<int32_t>& slots);
  // Forgets entries [n, length): rollback after a rejected draft or a failed forward, or an edit
  // of history. The recurrent state cannot be rolled back by forgetting entries: it is restored
  // from the snapshot append() took at length n (kept for the last kMaxSnapshots chunks), or
  // zeroed for n == 0. The rings must still hold the window before n: entries
  // (n - window, n) were not overwritten, i.e. length - n <= ring_tokens - window + 1 (always
  // true for the rollback of the last append). Precondition: can_truncate(seq, n).
  void truncate(SeqId seq, int32_t n);
  bool can_truncate(SeqId seq, int32_t n) const;
  // Context shift: drops entries [n_keep, n_keep + n_discard), moves the rest down and
  // re-rotates their K by -n_discard so every entry's RoPE position equals its new index. The
  // rings keep only what later queries can see, the last window - 1 entries after the shift,
  // moved to their new ring slots. The recurrent state is kept as it is: it holds the last
  // L_cache-1 inputs, which are never among the dropped entries (shift keeps the end of the
  // sequence) and carry no position. Snapshots taken before the shift are dropped (their
  // lengths no longer name the same history). Precondition: can_shift.
  void shift(SeqId seq, int32_t n_keep, int32_t n_discard);
  // False when the blocks the move writes (those of [n_keep, new length)) are shared with a fork
  // or another sequence's prefix-cache hit and too few blocks are free for private copies of
  // them (shift() makes those copies), or when an entry the rings must keep is gone: kept prefix
  // entries within the window of the new end that the ring has already overwritten (n_keep
  // close to the new length on a long sequence).
  bool can_shift(SeqId seq, int32_t n_keep, int32_t n_discard) const;

  // --- prefix cache (KvCacheConfig::prefix_cache; without it nothing is ever cached) ------
  // The longest cached prefix of `tokens` under `extra`: whole blocks, at most
  // (tokens.size() - 1) / block_size of them, so that at least the last token is computed (its
  // logits are wanted). n_unreferenced: how many of those blocks no sequence holds now (taking
  // them makes them unavailable to appends). Changes nothing.
  struct PrefixMatch {
    int32_t n_tokens = 0;  // n_blocks * block_size
    int32_t n_blocks = 0;
    int32_t n_unreferenced = 0;
  };
  PrefixMatch match_prefix(std::span<const int32_t> tokens, uint64_t extra) const;
  // A new sequence holding match_prefix(tokens, extra)'s blocks (shared, reference counted) and,
  // with recurrent layers, the state saved at the end of its last block; its later blocks are
  // published under `extra`. Returns the sequence; its length() is the prefix's n_tokens.
  SeqId new_sequence_from_prefix(std::span<const int32_t> tokens, uint64_t extra);
  // Publishes the sequence's full blocks not published yet whose tokens are known: blocks
  // wholly inside [0, min(length, tokens.size())). Call it only once the forwards that computed
  // them succeeded: a published block is trusted by every later sequence. `tokens` are the
  // sequence's tokens from entry 0. With recurrent layers a block is published only if its state
  // checkpoint was taken (state_checkpoints); publishing stops at the first that was not. A
  // published block is shared for good: appends copy rather than write into it (a truncate into
  // it), shift() forgets it. A block already cached by another sequence stays private. After a
  // shift, blocks from n_keep's on are never published (their K/V are not a fresh run's).
  void publish_blocks(SeqId seq, std::span<const int32_t> tokens);
  // After append(seq, n): where this append's forward must save the recurrent state, one
  // checkpoint per block the n entries complete (ForwardBatch::state_checkpoints, with `token`
  // offset by first_row: the batch row of the append's first entry). Nothing without recurrent
  // layers or without a prefix cache. The views stay valid for the cache's lifetime.
  void state_checkpoints(SeqId seq, int32_t n, int32_t first_row, std::vector<model::StateCheckpoint>& out);

  // Snapshots kept per sequence: rollback reaches back this many evaluated chunks (decode steps
  // count as chunks). A snapshot is (L_cache-1) * n_embd floats per recurrent layer, kept on the
  // backend's device (a copy there per append: no host round trip in the decode loop).
  static constexpr size_t kMaxSnapshots = 16;

 private:
  using StateBuffers = std::vector<std::unique_ptr<ops::Buffer>>;  // [n_ranks]: one state, per rank
  struct Snapshot {
    int32_t length = 0;
    // Every recurrent layer's state, as laid out in Sequence::state. Immutable once taken, so
    // forks share it; back in snapshot_pool_ when the last holder drops it.
    std::shared_ptr<StateBuffers> data;
  };
  struct Sequence {
    bool live = false;
    int32_t length = 0;
    std::vector<int32_t> blocks;
    std::vector<int32_t> ring;        // ring blocks owned, min(blocks.size(), ring_blocks_) of them
    std::vector<int32_t> ring_table;  // [blocks.size()] ring[b % ring_blocks_]
    int32_t ring_valid = 0;           // first entry whose ring rows still hold its K/V
    std::shared_ptr<StateBuffers> state;  // recurrent layers' state, allocated once per sequence slot
    std::vector<TensorView> state_views;  // [n_ranks * n_layer] views into `state`; empty when no recurrent layer
    std::vector<Snapshot> snapshots;      // ascending lengths, at most kMaxSnapshots
    uint64_t extra = 0;                   // the prefix cache's extra key of its blocks
    std::vector<uint64_t> hashes;         // chained hashes of its first hashes.size() blocks (published)
    // Blocks it may ever publish: after a shift, entries from n_keep on hold K/V computed with
    // the discarded history (and re-rotated), not what a fresh run of its tokens gives, and so
    // does everything computed after them.
    int32_t publish_limit = INT32_MAX;
  };
  const Sequence& seq_(SeqId s) const;
  Sequence& seq_(SeqId s);

  Status init_state(Sequence& s);  // allocates (once) and zeroes the sequence's state
  // A snapshot of the sequence's state (a device copy into a pooled buffer), and its restore.
  Result<Snapshot> take_snapshot(const Sequence& s, int32_t length);
  void restore_snapshot(const Sequence& s, const Snapshot& snap);
  void drop_snapshot(Snapshot& snap);  // returns its buffer to the pool when no fork holds it
  TensorView whole_state(ops::Buffer& b, size_t rank) const;  // rank's state buffer as one F32 row
  Result<std::shared_ptr<StateBuffers>> allocate_state();  // every rank's buffer of one state
  void copy_state(const StateBuffers& dst, const StateBuffers& src);
  // The one place K/V storage is allocated: K and V of one layer of a rank, [kv_width, n_rows] each.
  Result<ops::KvLayer> allocate_layer(size_t rank, int64_t n_rows);
  enum class Storage { kFull, kRing };
  bool uses(int32_t il, Storage storage) const;
  // Copies rows src[i] -> dst[i] (and re-rotates them) in every layer with that storage.
  void copy_rows(Storage storage, std::span<const int32_t> src, std::span<const int32_t> dst);
  void rerotate_rows(Storage storage, std::span<const int32_t> rows, int32_t delta);
  void drop_blocks(Sequence& s, int32_t n);  // block and ring bookkeeping of truncate, state untouched
  // A block for an append or a copy: the free list first, else the least recently used cached
  // block nobody references. Precondition: n_free_blocks() > 0.
  int32_t take_block();
  void unref_block(int32_t block);  // a reference goes: to the free list, or to the cache's LRU
  // Whether appending into `block` (the partly kept last block) must copy it first.
  bool shared_block(int32_t block) const { return block_refs_[block] > 1 || (prefix_ && prefix_->cached(block)); }
  TensorView checkpoint_row(int32_t block, size_t rank) const;  // block's checkpoint on a rank, one F32 row
  // Copies slots [0, n) of block `from` into block `to` in every full-length layer.
  void copy_block_prefix(int32_t from, int32_t to, int32_t n);
  // Moves the ring rows of entries [first + n_discard, last + n_discard) to those of [first, last).
  void move_ring_tail(SeqId seq, int32_t first, int32_t last, int32_t n_discard);  // kv_cache_shift.cpp

  model::Model* model_ = nullptr;
  // Where each tensor-parallel rank keeps its share (one rank, the model itself, for a model on
  // one device): its model's backend allocates and computes; its geometry sizes the rows.
  struct Rank {
    model::Model* model = nullptr;
    int32_t kv_width = 0;
    std::array<int64_t, 2> state_ne = {};  // one recurrent layer's state
    int64_t state_elements = 0;            // floats of one recurrent layer's state
    std::unique_ptr<ops::Buffer> checkpoint_storage;  // with a prefix cache: laid out like Sequence::state per block
  };
  std::vector<Rank> ranks_;
  model::KvGeometry geometry_;  // rank 0's: layer kinds and windows are every rank's
  int64_t state_elements_ = 0;  // rank 0's: 0 when the model has no recurrent layer
  int32_t block_size_ = 16;
  DType kv_type_ = DType::kF32;  // KvCacheConfig::kv_type
  int32_t head_dim_ = 0;
  std::vector<std::unique_ptr<ops::Buffer>> storage_;
  std::vector<ops::KvLayer> layers_;
  KvBytes bytes_;
  std::vector<int32_t> block_refs_;   // [n_blocks] sequences using each block
  std::vector<int32_t> free_blocks_;  // stack; lowest index on top for locality
  // Rings of the sliding-window layers: ring_blocks_ blocks per sequence from ring_free_.
  int32_t window_ = 0;
  int32_t ring_blocks_ = 0;
  int32_t max_append_ = 0;  // KvCacheConfig::max_batch_tokens
  std::vector<int32_t> ring_free_;  // stack; lowest index on top
  std::vector<Sequence> seqs_;
  std::vector<std::shared_ptr<StateBuffers>> snapshot_pool_;  // free snapshot buffers
  // Prefix cache (KvCacheConfig::prefix_cache).
  std::optional<PrefixCache> prefix_;
  bool paged_sliding_ = false;  // sliding-window layers use the paged blocks (no rings)
  // Recurrent models with a prefix cache: the state at the end of each block, laid out like
  // Sequence::state, block b at b * state_bytes; views [n_blocks * n_layer] (empty views for
  // attention layers); checkpointed_[b]: a forward was asked to write block b's checkpoint since
  // the block was last taken.
  std::vector<TensorView> checkpoint_views_;  // rank-major per block: [n_blocks][n_ranks][n_layer]
  std::vector<bool> checkpointed_;
};

}  // namespace cera::runtime
