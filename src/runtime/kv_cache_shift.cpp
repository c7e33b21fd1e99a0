// Context shift of the KV cache. Full-length layers move every entry after the gap down by
// n_discard (kv_copy in chunks that never overlap their own source) and re-rotate its K. A ring
// keeps only what later queries can see, the last window - 1 entries, moved along the ring by
// n_discard mod ring_tokens in the same chunked way, without staging memory. Blocks the move
// writes (those of [n_keep, new length)) must be this sequence's alone: shared ones (a fork, or
// another request's prefix-cache hit) are first replaced by private copies, so a shift never
// depends on who else holds the prefix; published ones it writes leave the prefix cache.
#include <algorithm>

#include "runtime/kv_cache.h"

namespace cera::runtime {

bool KvCache::can_shift(SeqId seq, int32_t n_keep, int32_t n_discard) const {
  const Sequence& s = seq_(seq);
  if (n_keep < 0 || n_discard <= 0 || n_keep + n_discard > s.length) return false;
  int32_t copies = 0;  // shared blocks the move would write: each needs a private copy first
  for (int32_t b = n_keep / block_size_; b < (s.length - n_discard + block_size_ - 1) / block_size_; ++b) {
    copies += block_refs_[s.blocks[static_cast<size_t>(b)]] != 1;
  }
  if (copies > n_free_blocks()) return false;
  if (ring_blocks_ == 0) return true;
  // After the shift the next query sees new positions [lo, new_len); those below n_keep are
  // prefix entries that stay in their ring rows, which must not have been overwritten.
  const int32_t lo = std::max(0, s.length - n_discard - window_ + 1);
  return lo >= n_keep || lo >= s.ring_valid;
}

void KvCache::shift(SeqId seq, int32_t n_keep, int32_t n_discard) {
  CERA_CHECK_MSG(can_shift(seq, n_keep, n_discard),
                 "KV cache: shift(" + std::to_string(n_keep) + ", " + std::to_string(n_discard) + ") of a sequence of " +
                     std::to_string(seq_(seq).length) + " needs private copies of shared blocks with too few blocks free, or ring entries already overwritten");
  const int32_t len = seq_(seq).length, new_len = len - n_discard;
  {
    // The blocks of [n_keep, new_len) get new rows: private copies of shared ones, and published
    // ones (now held by this sequence alone) leave the prefix cache. Later blocks are only read.
    std::vector<int32_t>& blocks = seq_(seq).blocks;
    for (auto b = static_cast<size_t>(n_keep / block_size_); b < static_cast<size_t>((new_len + block_size_ - 1) / block_size_); ++b) {
      if (block_refs_[blocks[b]] > 1) {
        const int32_t copy = take_block();
        copy_block_prefix(blocks[b], copy, block_size_);
        unref_block(blocks[b]);
        blocks[b] = copy;
      } else if (prefix_) {
        prefix_->erase(blocks[b]);
      }
    }
    seq_(seq).hashes.resize(std::min(seq_(seq).hashes.size(), static_cast<size_t>(n_keep / block_size_)));
    seq_(seq).publish_limit = std::min(seq_(seq).publish_limit, n_keep / block_size_);
  }
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
    copy_rows(Storage::kFull, src, dst);
  }
  // Rings: the kept tail within the window of the new end moves by n_discard mod ring_tokens.
  const int32_t first_moved = std::max(n_keep, new_len - window_ + 1);
  if (ring_blocks_ > 0) move_ring_tail(seq, first_moved, new_len, n_discard);
  Sequence& s = seq_(seq);
  drop_blocks(s, new_len);  // the state stays: it describes the (kept) end of the sequence
  for (Snapshot& p : s.snapshots) drop_snapshot(p);
  s.snapshots.clear();
  std::vector<int32_t> moved;
  for (int32_t i = n_keep; i < new_len; ++i) moved.push_back(slot(seq, i));
  rerotate_rows(Storage::kFull, moved, -n_discard);
  if (ring_blocks_ == 0) return;
  std::vector<int32_t> ring_rows;
  for (int32_t i = first_moved; i < new_len; ++i) ring_rows.push_back(ring_slot(seq, i));
  rerotate_rows(Storage::kRing, ring_rows, -n_discard);
  s.ring_valid = std::max(0, new_len - window_ + 1);
}

// Entry i + n_discard's ring position (i + n_discard) mod R goes to position i mod R, for i in
// [first, last): the arc of sources moves down the ring by dp = n_discard mod R, i.e. up by R - dp.
// Like the full-length move, chunks no longer than the distance moved, taken in the direction
// of the move, never overwrite a source still to be read. Only one direction overlaps, since
// last - first < window <= R / 2 (create() sizes the ring so), and the kept prefix entries sit at
// other positions (all kept entries lie within one window, fewer than R positions).
void KvCache::move_ring_tail(SeqId seq, int32_t first, int32_t last, int32_t n_discard) {
  const int32_t m = last - first, dp = n_discard % ring_tokens(), up = ring_tokens() - dp;
  if (m <= 0 || dp == 0) return;  // dp == 0: every entry is already at its new ring position
  std::vector<int32_t> src, dst;
  auto copy = [&](int32_t lo, int32_t hi) {
    src.clear();
    dst.clear();
    for (int32_t i = lo; i < hi; ++i) {
      src.push_back(ring_slot(seq, i + n_discard));
      dst.push_back(ring_slot(seq, i));
    }
    copy_rows(Storage::kRing, src, dst);
  };
  if (dp < m) {
    for (int32_t lo = first; lo < last; lo += dp) copy(lo, std::min(last, lo + dp));
  } else if (up < m) {
    for (int32_t hi = last; hi > first; hi -= up) copy(std::max(first, hi - up), hi);
  } else {
    copy(first, last);  // the two arcs are disjoint
  }
}

}  // namespace cera::runtime
