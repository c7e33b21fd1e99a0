// Evaluator: walks the statement tree with a stack of variable frames and writes the output.
// Scoping follows jinja2: a for-loop iteration and a macro call get their own frame, `if` does
// not, and `set` writes to the innermost frame (so a set inside a loop does not leak out).
// Every render is bounded by TemplateLimits (limits.h): recursion depth (macro calls included),
// output and value sizes, loop iterations and total steps, each checked where it grows.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/chat/ast.h"
#include "runtime/chat/limits.h"
#include "runtime/chat/value.h"

namespace cera::runtime::chat {

class Evaluator {
 public:
  // `globals` becomes the outermost frame (context variables and global functions). One
  // Evaluator renders once: the step and iteration budgets are spent across render().
  Evaluator(Object globals, const TemplateLimits& limits = {});

  // Appends the rendering of `body` to `out`. Errors carry the template line:column.
  Status render(const Body& body, std::string& out);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Frame = std::shared_ptr<Object>;
  class Nest;

  Result<Flow> exec(const Body& body, std::string& out);
  Result<Flow> exec_for(const Stmt& s, std::string& out);
  Status exec_set(const Stmt& s);
  Value make_macro(const Stmt& s);

  // eval() checks the depth and counts the step; eval_node() does the work.
  Result<Value> eval(const Expr& e);
  Result<Value> eval_node(const Expr& e);
  Result<Value> eval_filter_or_test(const Expr& e);
  Result<Value> eval_binary(const Expr& e);
  Result<Value> eval_call(const Expr& e);
  Result<CallArgs> eval_args(const std::vector<Arg>& args);
  Result<Value> get_item(const Expr& e, const Value& object, const Value& key);

  // Budgets. charge() spends steps; built() checks a value an expression just made against
  // the value limits and charges for building it; append() grows an output within its limit.
  Status charge(SourcePos pos, uint64_t steps);
  Status charge_reading(SourcePos pos, const Value& v);
  // A library call reads its input and arguments, and may search (builtins.h).
  Status charge_call(SourcePos pos, const Value& input, const CallArgs& args,
                     uint64_t search_bytes);
  Status built(SourcePos pos, const Value& v);
  Status append(SourcePos pos, std::string& out, std::string_view text);

  // Frames and dicts are searched linearly: both charge for the entries they compare.
  Result<Value> lookup(SourcePos pos, const std::string& name);
  Status assign(SourcePos pos, const std::string& name, Value value);
  Status assign_targets(const std::vector<std::string>& targets, const Value& value, SourcePos pos);
  static Status error(SourcePos pos, const std::string& what);
  // A library function's error with the position prefixed, its code kept.
  static Status error(SourcePos pos, const Status& status);

  std::vector<Frame> frames_;
  const TemplateLimits limits_;
  const std::string* output_ = nullptr;  // render()'s output: max_output_bytes, not value bytes
  int depth_ = 0;
  uint64_t steps_ = 0;
  uint64_t iterations_ = 0;
};

// Applies Python slice semantics (negative indexes, steps, clamping) to a list or string
// (slice.cpp).
Result<Value> slice_value(const Value& v, const Value& start, const Value& stop, const Value& step);

// "chat template L:C: integer overflow in '<op>'": int64 arithmetic where Python would grow a
// big integer (operators.cpp).
Status integer_overflow(SourcePos pos, const char* op);

}  // namespace cera::runtime::chat
