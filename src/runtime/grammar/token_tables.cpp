// Classifies every text token for one state by walking the sorted vocabulary from a stack whose
// bottom is unknown (kOpenParent): level d holds the stack set after the first d bytes of the
// current token, and levels shared with the previous token (its common prefix) are kept, so
// each trie node is advanced once and a dead prefix rejects all tokens under it at once.
#include "runtime/grammar/token_tables.h"

#include <algorithm>
#include <list>
#include <mutex>

#include "runtime/grammar/stack_arena.h"
#include "runtime/grammar/table_classes.h"

namespace cera::runtime::grammar {
namespace {

struct Level {
  StackSet set;
  uint32_t checkpoint = 0;  // arena size before this level was computed
  // Some stack popped into the unknown context after j < d bytes, with byte j able to follow
  // the state's rule: the token's rest then depends on the context.
  bool pending_escape = false;
};

}  // namespace

StateTokens classify_state(const Grammar& g, const VocabIndex& vocab, uint32_t state) {
  StackArena arena;
  StackStepper stepper(g);
  std::vector<Level> levels(vocab.max_token_bytes() + 1);
  levels[0].set.tops.push_back(arena.intern(state, kOpenParent));
  const ByteSet& follow = g.follow()[g.states()[state].rule];
  std::vector<int32_t> accepted;
  StateTokens out;
  uint32_t computed = 0;
  const auto sorted = vocab.sorted();
  const uint32_t n = static_cast<uint32_t>(sorted.size());
  for (uint32_t k = 0; k < n;) {
    const std::string_view t = vocab.sorted_bytes(k);
    const uint32_t len = static_cast<uint32_t>(t.size());
    const uint32_t shared = std::min(vocab.lcp(k), computed);
    if (shared < computed) arena.truncate(levels[shared + 1].checkpoint);
    computed = shared;
    while (computed < len && !levels[computed].set.tops.empty()) {
      const Level& from = levels[computed];
      Level& to = levels[computed + 1];
      to.checkpoint = arena.size();
      const uint8_t b = static_cast<uint8_t>(t[computed]);
      stepper.advance(arena, from.set, b, to.set);
      to.pending_escape = from.pending_escape || (from.set.escaped && follow.test(b));
      ++computed;
    }
    const Level& at = levels[computed];
    if (computed == len && (!at.set.tops.empty() || at.set.escaped)) {
      accepted.push_back(sorted[k]);
    } else if (at.pending_escape ||
               (computed < len && at.set.escaped && follow.test(static_cast<uint8_t>(t[computed])))) {
      out.uncertain.push_back(k);
    }
    ++k;
    // Dead after `computed` bytes with no escape on the way: every following token that shares
    // those bytes is rejected too; jump over all of them at once.
    if (computed < len && !at.pending_escape && !at.set.escaped) {
      while (k < n && vocab.lcp(k) >= computed) k = vocab.skip(k);
    }
  }
  if (accepted.size() > vocab.mask_words()) {
    out.accepted_bits.assign(vocab.mask_words(), 0);
    for (int32_t id : accepted) out.accepted_bits[id >> 5] |= uint32_t{1} << (id & 31);
  } else {
    std::sort(accepted.begin(), accepted.end());
    out.accepted_ids = std::move(accepted);
  }
  return out;
}

TokenTables::TokenTables(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const VocabIndex> vocab)
    : grammar_(std::move(grammar)),
      vocab_(std::move(vocab)),
      class_of_(table_classes(*grammar_, vocab_->max_token_bytes())) {
  for (uint32_t c : class_of_) n_tables_ = std::max<size_t>(n_tables_, c + size_t{1});
  tables_.reset(new std::atomic<const StateTokens*>[n_tables_]);
  for (size_t c = 0; c < n_tables_; ++c) tables_[c].store(nullptr, std::memory_order_relaxed);
}

TokenTables::~TokenTables() {
  for (size_t c = 0; c < n_tables_; ++c) delete tables_[c].load(std::memory_order_relaxed);
}

const StateTokens& TokenTables::state(uint32_t state) const {
  std::atomic<const StateTokens*>& slot = tables_[class_of_[state]];
  const StateTokens* p = slot.load(std::memory_order_acquire);
  if (p != nullptr) return *p;
  // Any state of the class computes the same table; this one does.
  const StateTokens* fresh = new StateTokens(classify_state(*grammar_, *vocab_, state));
  if (slot.compare_exchange_strong(p, fresh, std::memory_order_acq_rel)) return *fresh;
  delete fresh;
  return *p;
}

size_t TokenTables::memory_bytes() const {
  size_t bytes = class_of_.size() * sizeof(uint32_t);
  for (size_t c = 0; c < n_tables_; ++c) {
    if (const StateTokens* t = tables_[c].load(std::memory_order_acquire)) {
      bytes += sizeof(StateTokens) + 4 * (t->accepted_bits.size() + t->accepted_ids.size() + t->uncertain.size());
    }
  }
  return bytes;
}

void TokenTables::precompute_all() const {
  for (uint32_t s = 0; s < grammar_->states().size(); ++s) {
    if (grammar_->states()[s].has_bytes()) state(s);
  }
}

std::shared_ptr<const TokenTables> token_tables_for(std::shared_ptr<const Grammar> grammar,
                                                    std::shared_ptr<const VocabIndex> vocab) {
  constexpr size_t kCacheSize = 32;
  static std::mutex mutex;
  static std::list<std::shared_ptr<const TokenTables>> cache;  // most recent first
  std::lock_guard<std::mutex> lock(mutex);
  for (auto it = cache.begin(); it != cache.end(); ++it) {
    if (&(*it)->grammar() == grammar.get() && &(*it)->vocab() == vocab.get()) {
      cache.splice(cache.begin(), cache, it);
      return cache.front();
    }
  }
  cache.push_front(std::make_shared<const TokenTables>(std::move(grammar), std::move(vocab)));
  if (cache.size() > kCacheSize) cache.pop_back();
  return cache.front();
}

}  // namespace cera::runtime::grammar
