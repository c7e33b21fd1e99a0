// GBNF text -> GbnfAst (llama.cpp's syntax). A rule's body runs until the next `name ::=` or
// the end of the text, so alternatives may continue on following lines (a superset of
// llama.cpp, which ends a top-level sequence at a newline; every grammar it accepts means the
// same here). Errors are values naming line:column, what was found and what was expected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/status.h"
#include "runtime/grammar/gbnf_ast.h"

namespace cera::runtime::grammar {

// Bounds on what a grammar may ask for; each refusal names the field it hit.
struct GrammarLimits {
  std::size_t max_text_bytes = std::size_t{8} << 20;  // grammar text
  uint32_t max_nesting = 128;                         // depth of ( ) groups
  uint32_t max_repetition = 10000;                    // m and n of {m,n}
  std::size_t max_states = std::size_t{1} << 21;      // automaton states after compilation
};

Result<GbnfAst> parse_gbnf(std::string_view text, const GrammarLimits& limits = {});

}  // namespace cera::runtime::grammar
