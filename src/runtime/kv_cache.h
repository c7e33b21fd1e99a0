// The paged KV cache: fixed-size blocks of slots shared by all sequences, a block table per
// sequence, and the per-layer storage the backend computes on. A sequence's logical entry i
// (which is also its RoPE position) lives in slot table[i / block_size] * block_size + i % block_size.
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

  std::span<const ops::KvLayer> layers() const { return layers_; }
  int32_t block_size() const { return block_size_; }
  int32_t n_blocks() const { return static_cast<int32_t>(block_refs_.size()); }
  int32_t n_free_blocks() const { return static_cast<int32_t>(free_blocks_.size()); }

  SeqId new_sequence();
  void free_sequence(SeqId seq);
  int32_t length(SeqId seq) const { return seq_(seq).length; }
  std::span<const int32_t> block_table(SeqId seq) const { return seq_(seq).blocks; }
  int32_t slot(SeqId seq, int32_t i) const;

  // Extends the sequence by n entries, allocating blocks as needed; appends their slots to
  // `slots`. Fails (changing nothing) when the cache has too few free blocks.
  Status append(SeqId seq, int32_t n, std::vector<int32_t>& slots);
  // Forgets entries [n, length): rollback after a rejected draft, or an edit of history.
  void truncate(SeqId seq, int32_t n);
  // Context shift: drops entries [n_keep, n_keep + n_discard), moves the rest down and
  // re-rotates their K by -n_discard so every entry's RoPE position equals its new index.
  void shift(SeqId seq, int32_t n_keep, int32_t n_discard);

 private:
  struct Sequence {
    bool live = false;
    int32_t length = 0;
    std::vector<int32_t> blocks;
  };
  const Sequence& seq_(SeqId s) const;
  Sequence& seq_(SeqId s);

  model::Model* model_ = nullptr;
  int32_t block_size_ = 16;
  int32_t head_dim_ = 0;
  std::vector<std::unique_ptr<ops::Buffer>> storage_;
  std::vector<ops::KvLayer> layers_;
  std::vector<int32_t> block_refs_;   // [n_blocks] sequences using each block
  std::vector<int32_t> free_blocks_;  // stack; lowest index on top for locality
  std::vector<Sequence> seqs_;
};

}  // namespace cera::runtime
