// TokenMatcher. Frames interned while a mask is computed are speculative and truncated when it
// is done; frames of states kept for rollback are freed by truncation on rollback and, for the
// rest, by compaction once they clearly outnumber the live ones.
#include "runtime/grammar/token_matcher.h"

#include <algorithm>

namespace cera::runtime::grammar {

TokenMatcher::TokenMatcher(std::shared_ptr<const TokenTables> tables)
    : tables_(std::move(tables)), stepper_(tables_->grammar()) {
  const Grammar& g = tables_->grammar();
  stepper_.start(arena_, g.rules()[g.root()].start, kRootParent, current_);
  levels_.resize(tables_->vocab().max_token_bytes() + 1);
}

bool TokenMatcher::accept_token(int32_t id) {
  const VocabIndex& v = tables_->vocab();
  if (ended_ || id < 0 || id >= v.n_vocab()) return false;
  const TokenRole role = v.role(id);
  if (role == TokenRole::kNever) return false;
  if (role == TokenRole::kEndOfGeneration) {
    if (!current_.completed) return false;
    if (history_.size() == kMaxRollback) history_.pop_front();
    history_.push_back({current_, arena_.size(), ended_});
    ended_ = true;
    return true;
  }
  return advance(v.bytes(id), /*remember=*/true);
}

bool TokenMatcher::accept_bytes(std::string_view bytes) {
  if (ended_) return false;
  return advance(bytes, /*remember=*/false);
}

bool TokenMatcher::advance(std::string_view bytes, bool remember) {
  const uint32_t checkpoint = arena_.size();
  Snapshot before{current_, checkpoint, ended_};
  for (unsigned char b : bytes) {
    stepper_.advance(arena_, current_, b, next_);
    std::swap(current_, next_);
    if (!current_.alive()) {
      current_ = std::move(before.set);
      arena_.truncate(checkpoint);
      return false;
    }
  }
  if (remember) {
    if (history_.size() == kMaxRollback) history_.pop_front();
    history_.push_back(std::move(before));
  } else {
    history_.clear();  // a forced prefix is not a token to roll back to
  }
  maybe_compact();
  return true;
}

bool TokenMatcher::rollback(int n) {
  if (n < 0 || n > static_cast<int>(history_.size())) return false;
  if (n == 0) return true;
  Snapshot& target = history_[history_.size() - n];
  current_ = std::move(target.set);
  ended_ = target.ended;
  arena_.truncate(target.checkpoint);
  history_.resize(history_.size() - n);
  return true;
}

void TokenMatcher::maybe_compact() {
  if (arena_.size() <= 4 * live_after_compact_ + 65536) return;
  std::vector<std::vector<uint32_t>*> roots{&current_.tops};
  for (Snapshot& s : history_) roots.push_back(&s.set.tops);
  arena_.compact(roots);
  live_after_compact_ = arena_.size();
  // Renumbering mixed the snapshots' frames: none can be truncated away any more.
  for (Snapshot& s : history_) s.checkpoint = arena_.size();
}

void TokenMatcher::fill_mask(std::span<uint32_t> mask) {
  const VocabIndex& v = tables_->vocab();
  std::fill(mask.begin(), mask.begin() + static_cast<std::ptrdiff_t>(v.mask_words()), 0u);
  if (ended_) return;
  if (current_.completed) {
    for (int32_t id : v.end_tokens()) mask[id >> 5] |= uint32_t{1} << (id & 31);
  }
  const uint32_t checkpoint = arena_.size();
  for (uint32_t top : current_.tops) {
    const StateTokens& t = tables_->state(arena_.frame(top).state);
    if (!t.accepted_bits.empty()) {
      for (size_t w = 0; w < t.accepted_bits.size(); ++w) mask[w] |= t.accepted_bits[w];
    } else {
      for (int32_t id : t.accepted_ids) mask[id >> 5] |= uint32_t{1} << (id & 31);
    }
  }
  for (uint32_t top : current_.tops) {
    const StateTokens& t = tables_->state(arena_.frame(top).state);
    if (!t.uncertain.empty()) check_uncertain(top, t, mask);
  }
  arena_.truncate(checkpoint);
}

// Walks `table.uncertain` (byte order) from the single stack `top`, keeping the levels shared
// with the previously walked token.
void TokenMatcher::check_uncertain(uint32_t top, const StateTokens& table, std::span<uint32_t> mask) {
  const VocabIndex& v = tables_->vocab();
  levels_[0].set.tops.assign(1, top);
  levels_[0].set.completed = false;
  uint32_t computed = 0;
  std::string_view prev;
  for (uint32_t k : table.uncertain) {
    const int32_t id = v.sorted()[k];
    if ((mask[id >> 5] >> (id & 31)) & 1) continue;
    const std::string_view t = v.sorted_bytes(k);
    const uint32_t len = static_cast<uint32_t>(t.size());
    uint32_t common = 0;
    while (common < prev.size() && common < len && prev[common] == t[common]) ++common;
    const uint32_t shared = std::min(common, computed);
    if (shared < computed) arena_.truncate(levels_[shared + 1].checkpoint);
    computed = shared;
    while (computed < len && !levels_[computed].set.tops.empty()) {
      levels_[computed + 1].checkpoint = arena_.size();
      stepper_.advance(arena_, levels_[computed].set, static_cast<uint8_t>(t[computed]),
                       levels_[computed + 1].set);
      ++computed;
    }
    const StackSet& at = levels_[computed].set;
    if (computed == len && (!at.tops.empty() || at.completed)) mask[id >> 5] |= uint32_t{1} << (id & 31);
    prev = t;
  }
}

}  // namespace cera::runtime::grammar
