// The parsed form of a GBNF grammar: rules as expression trees, exactly as written (no
// rewriting). Character classes are already normalized to sorted, disjoint code point ranges
// with negation applied, so the compiler never sees `[^...]`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cera::runtime::grammar {

struct SourcePos {
  uint32_t line = 1;    // 1-based
  uint32_t column = 1;  // 1-based, in bytes
  std::string text() const { return std::to_string(line) + ":" + std::to_string(column); }  // "line:column"
};

struct CodepointRange {
  uint32_t lo = 0;
  uint32_t hi = 0;  // inclusive
};

enum class ExprKind {
  kLiteral,    // text: UTF-8 bytes (may be empty: matches the empty string)
  kCharClass,  // ranges: one code point from them (`.` is the class of every character)
  kRuleRef,    // text: the rule's name
  kSequence,   // children, one after another (empty: the empty string)
  kChoice,     // children, one of them (at least two)
  kRepeat,     // children[0] between min and max times (max == kUnbounded: no upper bound)
};

inline constexpr uint32_t kUnbounded = UINT32_MAX;

struct Expr {
  ExprKind kind = ExprKind::kSequence;
  SourcePos at;
  std::string text;
  std::vector<CodepointRange> ranges;
  std::vector<Expr> children;
  uint32_t min = 0;
  uint32_t max = 0;
};

struct RuleDef {
  std::string name;
  SourcePos at;  // where the name is written
  Expr body;
};

struct GbnfAst {
  std::vector<RuleDef> rules;  // in the order written
};

}  // namespace cera::runtime::grammar
