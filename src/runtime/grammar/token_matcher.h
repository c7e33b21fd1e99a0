// A request's grammar state at the token level: accepts token ids, fills the mask of allowed
// tokens, rolls back recent tokens. Masks OR each stack top's precomputed accepted tokens
// (token_tables.h) and walk only its context-dependent ones against the real stack, in byte
// order so that shared prefixes are advanced once.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string_view>

#include "runtime/grammar/stack_arena.h"
#include "runtime/grammar/token_tables.h"

namespace cera::runtime::grammar {

// Not thread-safe: one per request (the TokenTables it reads are shared and thread-safe).
class TokenMatcher {
 public:
  // How many accepted tokens rollback() can undo (the oldest are forgotten beyond this).
  static constexpr int kMaxRollback = 32;

  explicit TokenMatcher(std::shared_ptr<const TokenTables> tables);

  // Accepts token `id` if the grammar allows it now: a text token whose bytes continue a
  // sentence, or an end-of-generation token when can_end() (after which nothing more is
  // accepted). Returns false and changes nothing otherwise (also for invalid ids).
  bool accept_token(int32_t id);
  // Consumes bytes that are not a token of the vocabulary (a lazily started grammar's trigger
  // text, which the model produced as a control token): all or nothing, like accept_token. The
  // history is cleared: rollback() cannot go back past them.
  bool accept_bytes(std::string_view bytes);
  // Sets bit id of `mask` (word id / 32, bit id % 32) for every token accept_token() would
  // take now, clears all others. Precondition: mask.size() >= vocab().mask_words().
  void fill_mask(std::span<uint32_t> mask);
  // Undoes the last n accepted tokens. False (and unchanged) if n > rollback_depth().
  bool rollback(int n);
  int rollback_depth() const { return static_cast<int>(history_.size()); }

  // The tokens so far form a complete sentence of the grammar.
  bool can_end() const { return !ended_ && current_.completed; }
  // An end-of-generation token has been accepted.
  bool ended() const { return ended_; }
  const VocabIndex& vocab() const { return tables_->vocab(); }

 private:
  struct Snapshot {
    StackSet set;
    uint32_t checkpoint = 0;  // arena size when this state was current
    bool ended = false;
  };
  struct Level {
    StackSet set;
    uint32_t checkpoint = 0;
  };
  void check_uncertain(uint32_t top, const StateTokens& table, std::span<uint32_t> mask);
  bool advance(std::string_view bytes, bool remember);
  void maybe_compact();

  std::shared_ptr<const TokenTables> tables_;
  StackArena arena_;
  StackStepper stepper_;
  StackSet current_, next_;
  bool ended_ = false;
  std::deque<Snapshot> history_;
  std::vector<Level> levels_;
  uint32_t live_after_compact_ = 0;
};

}  // namespace cera::runtime::grammar
