// The compiled form of a grammar: one epsilon-free automaton over bytes per rule, all rules'
// states in one array. An edge either consumes a byte from a set or calls another rule and
// continues at a return state; a final state may end its rule. Immutable once built.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/grammar/gbnf_ast.h"

namespace cera::runtime::grammar {

struct ByteSet {
  uint64_t words[4] = {0, 0, 0, 0};

  bool test(uint8_t b) const { return (words[b >> 6] >> (b & 63)) & 1; }
  void set(uint8_t b) { words[b >> 6] |= uint64_t{1} << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) set(static_cast<uint8_t>(b));
  }
  void merge(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) words[i] |= o.words[i];
  }
  bool empty() const { return (words[0] | words[1] | words[2] | words[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
};

struct ByteEdge {
  ByteSet on;
  uint32_t target = 0;  // state id
};

struct CallEdge {
  uint32_t rule = 0;
  uint32_t ret = 0;  // state id where the caller continues once the rule has ended
};

struct NfaState {
  uint32_t rule = 0;  // the compiled rule this state belongs to
  uint32_t bytes_begin = 0, bytes_end = 0;  // [begin, end) in Grammar::byte_edges
  uint32_t calls_begin = 0, calls_end = 0;  // [begin, end) in Grammar::call_edges
  bool final = false;  // the rule may end here
  // final and without edges: a call returning here would pop at once, so callers push no
  // frame for it (tail calls keep `x ::= "a" x | ""` at constant stack depth).
  bool exit_only = false;
  bool has_bytes() const { return bytes_end > bytes_begin; }
};

struct CompiledRule {
  std::string name;
  SourcePos at;
  uint32_t start = 0;  // state id
};

// What the compiler fills (grammar_compile.cpp, grammar_checks.cpp) before a Grammar exists.
struct GrammarParts {
  std::vector<NfaState> states;
  std::vector<ByteEdge> byte_edges;
  std::vector<CallEdge> call_edges;
  std::vector<CompiledRule> rules;
  std::vector<ByteSet> follow;    // per rule
  std::vector<bool> ends_input;   // per rule
  uint32_t root = 0;
};

class Grammar {
 public:
  explicit Grammar(GrammarParts parts) : p_(std::move(parts)) {}

  const std::vector<NfaState>& states() const { return p_.states; }
  const std::vector<ByteEdge>& byte_edges() const { return p_.byte_edges; }
  const std::vector<CallEdge>& call_edges() const { return p_.call_edges; }
  const std::vector<CompiledRule>& rules() const { return p_.rules; }
  uint32_t root() const { return p_.root; }  // index into rules()
  // Bytes that may follow the end of each rule in some context (FOLLOW sets over bytes);
  // ends_input()[r]: the root may be complete right after rule r ends.
  const std::vector<ByteSet>& follow() const { return p_.follow; }
  const std::vector<bool>& ends_input() const { return p_.ends_input; }

 private:
  GrammarParts p_;
};

}  // namespace cera::runtime::grammar
