// Evaluator: walks the statement tree with a stack of variable frames and writes the output.
// Scoping follows jinja2: a for-loop iteration and a macro call get their own frame, `if` does
// not, and `set` writes to the innermost frame (so a set inside a loop does not leak out).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/chat/ast.h"
#include "runtime/chat/value.h"

namespace cera::runtime::chat {

class Evaluator {
 public:
  // `globals` becomes the outermost frame (context variables and global functions).
  explicit Evaluator(Object globals);

  // Appends the rendering of `body` to `out`. Errors carry the template line:column.
  Status render(const Body& body, std::string& out);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Frame = std::shared_ptr<Object>;

  Result<Flow> exec(const Body& body, std::string& out);
  Result<Flow> exec_for(const Stmt& s, std::string& out);
  Status exec_set(const Stmt& s);
  Value make_macro(const Stmt& s);

  Result<Value> eval(const Expr& e);
  Result<Value> eval_binary(const Expr& e);
  Result<Value> eval_call(const Expr& e);
  Result<CallArgs> eval_args(const std::vector<Arg>& args);
  Result<Value> get_item(const Expr& e, const Value& object, const Value& key);

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value value) { frames_.back()->set(name, std::move(value)); }
  Status assign_targets(const std::vector<std::string>& targets, const Value& value, SourcePos pos);
  static Status error(SourcePos pos, const std::string& what);

  std::vector<Frame> frames_;
  int call_depth_ = 0;
};

// Applies Python slice semantics (negative indexes, steps, clamping) to a list or string.
Result<Value> slice_value(const Value& v, const Value& start, const Value& stop, const Value& step);

}  // namespace cera::runtime::chat
