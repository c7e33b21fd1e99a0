// States that get the same token table: two states are equivalent when no token (at most
// `depth` bytes, the vocabulary's longest) can tell them apart, found by partition refinement
// bounded at that depth. A counted repetition `c{0,1000}` unrolls into 1000 copies of c's
// states, but only the last `depth` copies can see the repetition end within one token, so the
// rest share one table (for SmolLM2's 81-byte tokens: 26003 states -> about 2100 tables).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/grammar/compiled_grammar.h"

namespace cera::runtime::grammar {

// class of each state (dense ids from 0); equal classes have equal token tables.
std::vector<uint32_t> table_classes(const Grammar& g, uint32_t depth);

}  // namespace cera::runtime::grammar
