// Pushdown stacks as persistent, hash-consed frames: a frame is (state, parent frame), so a set
// of stacks sharing their bottoms stores each shared frame once, and two equal stacks are the
// same id (the set of stacks needs no deep comparison). Frames are freed only LIFO (truncate to
// a checkpoint) or by compact(), which keeps those reachable from the given roots.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/grammar/compiled_grammar.h"

namespace cera::runtime::grammar {

// Parents that are not frames: the bottom of a real stack (popping it ends the root rule), and
// the unknown context below a state when tokens are classified per state.
inline constexpr uint32_t kRootParent = 0xFFFFFFFFu;
inline constexpr uint32_t kOpenParent = 0xFFFFFFFEu;

struct Frame {
  uint32_t state = 0;
  uint32_t parent = kRootParent;
};

class StackArena {
 public:
  StackArena();

  // The id of frame (state, parent), created if new.
  uint32_t intern(uint32_t state, uint32_t parent);
  const Frame& frame(uint32_t id) const { return frames_[id]; }
  uint32_t size() const { return static_cast<uint32_t>(frames_.size()); }
  // Forgets every frame with id >= checkpoint. Precondition: nothing alive refers to them.
  void truncate(uint32_t checkpoint);
  // Keeps the frames reachable from `roots` (renumbering them in place in the spans).
  void compact(std::span<std::vector<uint32_t>* const> roots);
  void clear();

 private:
  void grow();
  uint32_t find_slot(uint32_t state, uint32_t parent) const;

  std::vector<Frame> frames_;
  std::vector<uint32_t> slot_of_;  // table slot of each frame, for truncation
  std::vector<uint32_t> table_;    // open addressing: frame id + 1, 0 = empty
  uint32_t mask_ = 0;
};

// The configuration of the automaton after some bytes: the stacks whose top state has byte
// edges, plus whether some stack popped past its bottom (the root ended / the open context was
// reached) after exactly these bytes.
struct StackSet {
  std::vector<uint32_t> tops;  // frame ids, no duplicates
  bool completed = false;      // the root rule has ended: the bytes so far are a sentence
  bool escaped = false;        // a stack popped into kOpenParent (classification only)
  bool alive() const { return !tops.empty() || completed || escaped; }
};

// Expands and advances stack sets over one Grammar. Holds scratch memory only; one per thread.
class StackStepper {
 public:
  explicit StackStepper(const Grammar& grammar) : g_(grammar) {}

  // The set for "at the start of `state` with `parent` below": follows calls, pops final
  // states, records tops. `out` is overwritten.
  void start(StackArena& arena, uint32_t state, uint32_t parent, StackSet& out);
  // The set after consuming byte b from `from`. `out` is overwritten; it may not alias `from`.
  void advance(StackArena& arena, const StackSet& from, uint8_t b, StackSet& out);

 private:
  void begin_step(StackSet& out);
  void expand(StackArena& arena, uint32_t state, uint32_t parent, StackSet& out);
  bool visit(uint32_t state, uint32_t parent);

  const Grammar& g_;
  // (state, parent) pairs expanded in the current step: expansion is a function of the pair,
  // so repeating one adds nothing, and loops of nullable calls terminate.
  std::vector<uint64_t> seen_;
  std::vector<uint64_t> seen_table_;
  std::vector<uint32_t> seen_used_;
  bool seen_hashed_ = false;
};

}  // namespace cera::runtime::grammar
