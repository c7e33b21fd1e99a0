// The template's syntax tree: expressions and statements as tagged structs (one kind enum each)
// rather than a class hierarchy, so the evaluator is two switch statements that read top-down.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/chat/lexer.h"
#include "runtime/chat/value.h"

namespace cera::runtime::chat {

enum class ExprKind {
  kLiteral,    // literal
  kName,       // name
  kGetAttr,    // children[0].name
  kGetItem,    // children[0][children[1]]
  kSlice,      // children[0][children[1]:children[2]:children[3]] (null = omitted)
  kCall,       // children[0](args)
  kFilter,     // children[0] | name(args)
  kTest,       // children[0] is [not] name(args)
  kUnary,      // op children[0]
  kBinary,     // children[0] op children[1]
  kCondition,  // children[1] if children[0] else children[2] (children[2] null: undefined)
  kList,       // [children...]
  kTuple,      // (children...)
  kDict,       // {children[0]: children[1], ...}
};

enum class Op {
  kNone,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kFloorDiv,
  kMod,
  kPow,
  kConcat,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kIn,
  kNotIn,
  kAnd,
  kOr,
  kNot,
  kNeg,
  kPos,
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Arg {
  std::string keyword;  // empty: positional
  ExprPtr value;
};

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  SourcePos pos;
  Op op = Op::kNone;
  Value literal;
  std::string name;
  bool negated = false;  // kTest: `is not`
  std::vector<ExprPtr> children;
  std::vector<Arg> args;
};

enum class StmtKind {
  kText,    // text
  kOutput,  // {{ expr }}
  kIf,      // branches (cond, body)...; else_body
  kFor,     // {% for targets in expr [if filter] %} body {% else %} else_body
  kSet,     // {% set targets = expr %} / {% set ns.attr = expr %} / {% set x %}body{% endset %}
  kMacro,   // {% macro name(params) %} body
  kBreak,
  kContinue,
  kBlock,  // a plain body (e.g. transformers' {% generation %})
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Branch {
  ExprPtr condition;
  Body body;
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct Stmt {
  StmtKind kind = StmtKind::kText;
  SourcePos pos;
  std::string text;                  // kText; kMacro: the macro's name
  ExprPtr expr;                      // kOutput, kFor iterable, kSet value (null for block set)
  ExprPtr filter;                    // kFor: `if` clause
  std::vector<std::string> targets;  // kFor / kSet names (tuple unpacking when > 1)
  std::string attribute;             // kSet: `ns.attribute` when not empty (targets[0] = ns)
  std::vector<Branch> branches;      // kIf
  Body body;                         // kFor, kSet block, kMacro, kBlock
  Body else_body;                    // kIf, kFor
  std::vector<MacroParam> params;    // kMacro
  bool uses_loop = true;             // kFor: the body names `loop` (else it is not built)
};

}  // namespace cera::runtime::chat
