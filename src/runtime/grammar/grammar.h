// The grammar engine's entry points: GBNF text -> compiled Grammar (cached), and ByteMatcher,
// which follows bytes through it. Token-level masks live in token_matcher.h.
//
// Design. Each rule's body (with small non-recursive rules inlined into it) becomes one
// epsilon-free automaton over UTF-8 BYTES whose edges consume a byte from a set or call another
// rule; repetition stays inside the rule as loops or unrolled copies. A matcher's state is the
// set of pushdown stacks (rule call chains) consistent with the input so far, as in llama.cpp,
// but stacks are persistent hash-consed frames (stack_arena.h), so shared bottoms are stored
// once and equal stacks are one id; calls in tail position push nothing. Left recursion and
// rules that can never end are refused at compile time. Character classes are sets of code
// points compiled to their UTF-8 byte sequences, so a token holding part of a character is
// allowed exactly when some valid character starts with its bytes.
#pragma once

#include <memory>
#include <string_view>

#include "core/status.h"
#include "runtime/grammar/compiled_grammar.h"
#include "runtime/grammar/gbnf_parser.h"
#include "runtime/grammar/stack_arena.h"

namespace cera::runtime::grammar {

// Parses and compiles `text` with `root` as the start rule. Results are cached by (text,
// root): compiling the same grammar again returns the same object. Thread-safe. Errors name
// line:column, what was found and what was expected; undefined rules, left recursion, rules
// that never end, empty grammars and exceeded GrammarLimits are refused.
Result<std::shared_ptr<const Grammar>> compile_gbnf(std::string_view text, std::string_view root = "root");
// Same with explicit limits (not cached).
Result<std::shared_ptr<const Grammar>> compile_gbnf(std::string_view text, std::string_view root,
                                                    const GrammarLimits& limits);

// Follows a byte stream through a grammar. Not thread-safe; one per stream; cheap to create.
class ByteMatcher {
 public:
  explicit ByteMatcher(std::shared_ptr<const Grammar> g);

  // Consumes `bytes` if the input so far followed by them is a prefix of some sentence of the
  // root rule. All or nothing: on false the state is unchanged.
  bool accept(std::string_view bytes);
  // The input so far is a complete sentence of the root rule.
  bool can_end() const { return current_.completed; }
  // Some non-empty continuation exists (false once only the end is possible).
  bool can_continue() const { return !current_.tops.empty(); }

 private:
  std::shared_ptr<const Grammar> g_;
  StackArena arena_;
  StackStepper stepper_;
  StackSet current_, next_, saved_;
  uint32_t live_after_compact_ = 0;
};

}  // namespace cera::runtime::grammar
