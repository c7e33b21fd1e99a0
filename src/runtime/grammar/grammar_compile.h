// GbnfAst -> Grammar. Rules that are not recursive and small are inlined into their callers,
// so repetition over them (`char*` with `char ::= [^"\\] | "\\" ...`) stays a loop inside one
// rule's automaton: a token spanning many characters then never leaves the rule, which is what
// lets per-state token tables decide it without looking at the stack.
#pragma once

#include <memory>
#include <string_view>

#include "core/status.h"
#include "runtime/grammar/compiled_grammar.h"
#include "runtime/grammar/gbnf_parser.h"

namespace cera::runtime::grammar {

// A rule whose automaton would have at most this many states is inlined (if not recursive).
inline constexpr uint32_t kInlineStateLimit = 128;

Result<std::shared_ptr<const Grammar>> compile_ast(const GbnfAst& ast, std::string_view root,
                                                   const GrammarLimits& limits);

// Checks on the compiled automaton (grammar_checks.cpp): rules that call themselves before
// consuming input (left recursion) or can never end are refused by name; fills follow sets.
Status check_and_analyze(GrammarParts& g);

}  // namespace cera::runtime::grammar
