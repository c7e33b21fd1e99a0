// Per grammar x vocabulary: for each automaton state that can be a stack top, the tokens it
// accepts whatever the stack below holds, and the few that depend on it (XGrammar's adaptive
// token mask cache). A token is context-independent when it is accepted before or exactly as
// the state's rule ends, or rejected without the rule ending; it is context-dependent
// ("uncertain") when the rule can end with bytes of the token left over, and those bytes' first
// one can follow the rule somewhere (FOLLOW set); only these are checked against the real stack.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/grammar/compiled_grammar.h"
#include "runtime/grammar/vocab_index.h"

namespace cera::runtime::grammar {

struct StateTokens {
  // Accepted tokens, as a bitmask over ids (mask_words() words) when there are many, else as a
  // list of ids: whichever is smaller. Exactly one is non-empty unless none is accepted.
  std::vector<uint32_t> accepted_bits;
  std::vector<int32_t> accepted_ids;
  // Context-dependent tokens as indexes into VocabIndex::sorted(), ascending (byte order).
  std::vector<uint32_t> uncertain;
};

class TokenTables {
 public:
  TokenTables(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const VocabIndex> vocab);
  ~TokenTables();
  TokenTables(const TokenTables&) = delete;
  TokenTables& operator=(const TokenTables&) = delete;

  // The table of `state` (a state with byte edges), computed on first use and shared by every
  // equivalent state (table_classes.h). Thread-safe: racing first uses both compute and one
  // result is kept; lookups after that are two loads.
  const StateTokens& state(uint32_t state) const;
  // Computes every state's table now (a server does this off the request path).
  void precompute_all() const;
  size_t table_count() const { return n_tables_; }  // distinct tables (equivalence classes)
  size_t memory_bytes() const;                        // of the tables computed so far

  const Grammar& grammar() const { return *grammar_; }
  const VocabIndex& vocab() const { return *vocab_; }
  const std::shared_ptr<const Grammar>& grammar_ptr() const { return grammar_; }

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const VocabIndex> vocab_;
  std::vector<uint32_t> class_of_;  // state -> table index
  size_t n_tables_ = 0;
  std::unique_ptr<std::atomic<const StateTokens*>[]> tables_;
};

// The tables for (grammar, vocab), shared by every request using both: a small cache keyed by
// the two objects' addresses, holding them alive. Thread-safe.
std::shared_ptr<const TokenTables> token_tables_for(std::shared_ptr<const Grammar> grammar,
                                                    std::shared_ptr<const VocabIndex> vocab);

// Computes one state's table (token_tables.cpp); exposed for tests and benchmarks.
StateTokens classify_state(const Grammar& grammar, const VocabIndex& vocab, uint32_t state);

}  // namespace cera::runtime::grammar
