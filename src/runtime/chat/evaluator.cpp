// Statement execution and expression evaluation (operators in operators.cpp, slices in
// slice.cpp). Python semantics where templates rely on them: undefined is falsy and prints
// nothing but fails on attribute access (as jinja2's default Undefined does). Every recursion
// takes a level of max_depth and every operation pays its steps (costs.h) before it works.
#include "runtime/chat/evaluator.h"

#include "runtime/chat/builtins.h"
#include "runtime/chat/costs.h"

namespace cera::runtime::chat {
namespace {

using cost::build_steps;
using cost::kBytesPerStep;
using cost::kCallSteps;
using cost::kEntriesPerStep;
using cost::kIterationSteps;
using cost::kLoopObjectSteps;
using cost::kSearchBytesPerStep;
using cost::read_steps;

// Tests that look at more than their input's type and so cost its size (see max_steps).
bool test_reads_input(std::string_view name) {
  for (std::string_view n : {"in", "sameas", "equalto", "eq", "==", "ne", "!=", "lower", "upper"})
    if (n == name) return true;
  return false;
}

}  // namespace

// One level of recursion (eval, exec), given back on scope exit.
class Evaluator::Nest {
 public:
  explicit Nest(int& depth) : depth_(depth) { ++depth_; }
  ~Nest() { --depth_; }
  Nest(const Nest&) = delete;
  Nest& operator=(const Nest&) = delete;

 private:
  int& depth_;
};

namespace {

// A frame pushed for a loop and popped on every way out of it.
class ScopedFrame {
 public:
  explicit ScopedFrame(std::vector<std::shared_ptr<Object>>& frames) : frames_(frames) {
    frames_.push_back(std::make_shared<Object>());
    frame_ = frames_.back();
  }
  ~ScopedFrame() { frames_.pop_back(); }
  ScopedFrame(const ScopedFrame&) = delete;
  ScopedFrame& operator=(const ScopedFrame&) = delete;
  Object* operator->() const { return frame_.get(); }

 private:
  std::vector<std::shared_ptr<Object>>& frames_;
  std::shared_ptr<Object> frame_;
};

// jinja2's loop variable for item i of n.
Value make_loop(const Array& items, size_t i) {
  const auto n = static_cast<int64_t>(items.size());
  const auto k = static_cast<int64_t>(i);
  Object loop;
  loop.entries.reserve(12);
  const auto add = [&](const char* key, Value v) { loop.entries.emplace_back(key, std::move(v)); };
  add("index0", Value(k));
  add("index", Value(k + 1));
  add("revindex0", Value(n - 1 - k));
  add("revindex", Value(n - k));
  add("first", Value(k == 0));
  add("last", Value(k == n - 1));
  add("length", Value(n));
  add("depth", Value(int64_t{1}));
  add("depth0", Value(int64_t{0}));
  add("previtem", k > 0 ? items[i - 1] : Value());
  add("nextitem", k + 1 < n ? items[i + 1] : Value());
  add("cycle", Value::function([i](const CallArgs& args) -> Result<Value> {
        if (args.positional.empty())
          return invalid_argument("loop.cycle() needs at least one value");
        return args.positional[i % args.positional.size()];
      }));
  return Value(std::move(loop));
}

}  // namespace

Evaluator::Evaluator(Object globals, const TemplateLimits& limits) : limits_(limits) {
  frames_.push_back(std::make_shared<Object>(std::move(globals)));
}

Status Evaluator::error(SourcePos pos, const std::string& what) {
  return invalid_argument("chat template " + to_string(pos) + ": " + what);
}

Status Evaluator::error(SourcePos pos, const Status& status) {
  // Errors from macros (and limits) already carry a position.
  if (status.message().rfind("chat template ", 0) == 0) return status;
  return Status(status.code(), "chat template " + to_string(pos) + ": " + status.message());
}

Status Evaluator::render(const Body& body, std::string& out) {
  output_ = &out;
  CERA_ASSIGN_OR_RETURN(Flow flow, exec(body, out));
  (void)flow;
  return ok_status();
}

Status Evaluator::charge(SourcePos pos, uint64_t steps) {
  steps_ = steps > UINT64_MAX - steps_ ? UINT64_MAX : steps_ + steps;
  if (steps_ > limits_.max_steps)
    return limit_error(pos, "more evaluation steps", limits_.max_steps, "steps", "max_steps");
  return ok_status();
}

Status Evaluator::charge_reading(SourcePos pos, const Value& v) {
  return charge(pos, read_steps(v));
}

Status Evaluator::charge_call(SourcePos pos, const Value& input, const CallArgs& args,
                              uint64_t search_bytes) {
  CERA_RETURN_IF_ERROR(charge_reading(pos, input));
  for (const Value& a : args.positional) CERA_RETURN_IF_ERROR(charge_reading(pos, a));
  for (const auto& [k, a] : args.keyword) CERA_RETURN_IF_ERROR(charge_reading(pos, a));
  return charge(pos, search_bytes / kSearchBytesPerStep);
}

Status Evaluator::built(SourcePos pos, const Value& v) {
  if (!v.is_string() && !v.is_array() && !v.is_object()) return ok_status();
  const ValueSize s = v.size();
  if (s.bytes > limits_.max_value_bytes)
    return limit_error(pos, "a value of " + std::to_string(s.bytes) + " bytes: larger",
                       limits_.max_value_bytes, "bytes", "max_value_bytes");
  if (s.items > limits_.max_value_items)
    return limit_error(pos, "a value of " + std::to_string(s.items) + " items: more",
                       limits_.max_value_items, "items", "max_value_items");
  if (s.depth > static_cast<uint64_t>(limits_.max_depth))
    return limit_error(pos, "a value nested " + std::to_string(s.depth) + " levels: deeper",
                       static_cast<uint64_t>(limits_.max_depth), "levels", "max_depth");
  return charge(pos, build_steps(v));
}

Status Evaluator::append(SourcePos pos, std::string& out, std::string_view text) {
  const bool root = &out == output_;
  const uint64_t cap = root ? limits_.max_output_bytes : limits_.max_value_bytes;
  if (!fits(out.size(), text.size(), cap)) {
    return root ? limit_error(pos, "output longer", cap, "bytes", "max_output_bytes")
                : limit_error(pos, "a string longer", cap, "bytes", "max_value_bytes");
  }
  CERA_RETURN_IF_ERROR(charge(pos, text.size() / kBytesPerStep));
  out += text;
  return ok_status();
}

Result<Value> Evaluator::lookup(SourcePos pos, const std::string& name) {
  uint64_t compared = 0;  // an upper bound: the whole of each frame searched
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
    compared += (*it)->entries.size();
    if (const Value* v = (*it)->find(name)) {
      CERA_RETURN_IF_ERROR(charge(pos, compared / kEntriesPerStep));
      return *v;
    }
  }
  CERA_RETURN_IF_ERROR(charge(pos, compared / kEntriesPerStep));
  return Value();
}

Status Evaluator::assign(SourcePos pos, const std::string& name, Value value) {
  CERA_RETURN_IF_ERROR(charge(pos, frames_.back()->entries.size() / kEntriesPerStep));
  frames_.back()->set(name, std::move(value));
  return ok_status();
}

Status Evaluator::assign_targets(const std::vector<std::string>& targets, const Value& value,
                                 SourcePos pos) {
  if (targets.size() == 1) return assign(pos, targets[0], value);
  auto items_or = iterate(value, limits_);
  if (!items_or.ok()) return error(pos, items_or.status());
  const Array& items = *items_or;
  if (items.size() != targets.size())
    return error(pos, "cannot unpack " + std::to_string(items.size()) + " values into " +
                          std::to_string(targets.size()) + " names");
  for (size_t i = 0; i < targets.size(); ++i)
    CERA_RETURN_IF_ERROR(assign(pos, targets[i], items[i]));
  return ok_status();
}

Result<Evaluator::Flow> Evaluator::exec(const Body& body, std::string& out) {
  if (body.empty()) return Flow::kNormal;
  Nest nest(depth_);
  if (depth_ > limits_.max_depth)
    return limit_error(body.front()->pos, "nesting deeper",
                       static_cast<uint64_t>(limits_.max_depth), "levels", "max_depth");
  for (const StmtPtr& sp : body) {
    const Stmt& s = *sp;
    CERA_RETURN_IF_ERROR(charge(s.pos, 1));
    switch (s.kind) {
      case StmtKind::kText:
        CERA_RETURN_IF_ERROR(append(s.pos, out, s.text));
        break;
      case StmtKind::kOutput: {
        CERA_ASSIGN_OR_RETURN(Value v, eval(*s.expr));
        if (v.is_string()) {
          CERA_RETURN_IF_ERROR(append(s.pos, out, v.as_string()));
        } else {
          CERA_RETURN_IF_ERROR(charge_reading(s.pos, v));  // printing visits all of it
          CERA_RETURN_IF_ERROR(append(s.pos, out, to_display_string(v)));
        }
        break;
      }
      case StmtKind::kIf: {
        const Body* chosen = &s.else_body;
        for (const Branch& b : s.branches) {
          CERA_ASSIGN_OR_RETURN(Value c, eval(*b.condition));
          if (c.truthy()) {
            chosen = &b.body;
            break;
          }
        }
        CERA_ASSIGN_OR_RETURN(Flow flow, exec(*chosen, out));
        if (flow != Flow::kNormal) return flow;
        break;
      }
      case StmtKind::kFor: {
        CERA_ASSIGN_OR_RETURN(Flow flow, exec_for(s, out));
        (void)flow;
        break;
      }
      case StmtKind::kSet:
        CERA_RETURN_IF_ERROR(exec_set(s));
        break;
      case StmtKind::kMacro:
        CERA_RETURN_IF_ERROR(assign(s.pos, s.text, make_macro(s)));
        break;
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
      case StmtKind::kBlock: {
        CERA_ASSIGN_OR_RETURN(Flow flow, exec(s.body, out));
        if (flow != Flow::kNormal) return flow;
        break;
      }
    }
  }
  return Flow::kNormal;
}

Result<Evaluator::Flow> Evaluator::exec_for(const Stmt& s, std::string& out) {
  CERA_ASSIGN_OR_RETURN(Value iterable, eval(*s.expr));
  if (iterable.is_none()) return error(s.expr->pos, "'NoneType' object is not iterable");
  // A list is walked in place (lists do not change once built); anything else is copied.
  Array copy;
  const Array* items = &copy;
  if (iterable.is_array()) {
    items = &iterable.as_array();
  } else {
    auto items_or = iterate(iterable, limits_);
    if (!items_or.ok()) return error(s.expr->pos, items_or.status());
    copy = std::move(items_or).value();
    CERA_RETURN_IF_ERROR(charge(s.pos, copy.size() * sizeof(Value) / kBytesPerStep));
  }
  const auto next_iteration = [&]() -> Status {
    if (++iterations_ > limits_.max_loop_iterations)
      return limit_error(s.pos, "more loop iterations", limits_.max_loop_iterations, "iterations",
                         "max_loop_iterations");
    return charge(s.pos, kIterationSteps);
  };
  Array kept;
  if (s.filter) {  // the loop filter runs first, so loop.length/last count the kept items
    ScopedFrame frame(frames_);
    for (const Value& item : *items) {
      CERA_RETURN_IF_ERROR(next_iteration());
      frame->entries.clear();
      CERA_RETURN_IF_ERROR(assign_targets(s.targets, item, s.pos));
      CERA_ASSIGN_OR_RETURN(Value keep, eval(*s.filter));
      if (keep.truthy()) kept.push_back(item);
    }
    items = &kept;
  }
  if (items->empty()) return exec(s.else_body, out);  // in the enclosing scope
  ScopedFrame frame(frames_);
  for (size_t i = 0; i < items->size(); ++i) {
    CERA_RETURN_IF_ERROR(next_iteration());
    // A fresh scope per iteration; reusing the frame's storage keeps an iteration cheap.
    frame->entries.clear();
    if (s.uses_loop) {
      CERA_RETURN_IF_ERROR(charge(s.pos, kLoopObjectSteps));
      frame->set("loop", make_loop(*items, i));
    }
    CERA_RETURN_IF_ERROR(assign_targets(s.targets, (*items)[i], s.pos));
    CERA_ASSIGN_OR_RETURN(Flow flow, exec(s.body, out));
    if (flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Status Evaluator::exec_set(const Stmt& s) {
  Value value;
  if (s.expr) {
    CERA_ASSIGN_OR_RETURN(value, eval(*s.expr));
  } else {
    std::string text;
    CERA_ASSIGN_OR_RETURN(Flow flow, exec(s.body, text));
    (void)flow;
    value = Value(std::move(text));
  }
  if (s.attribute.empty()) return assign_targets(s.targets, value, s.pos);
  CERA_ASSIGN_OR_RETURN(Value ns, lookup(s.pos, s.targets[0]));
  if (!ns.is_object() || !ns.as_object().is_namespace)
    return error(s.pos, "cannot assign attribute '" + s.attribute + "' on '" + s.targets[0] +
                            "': only namespace() objects take attribute assignment");
  // A namespace holding a namespace could form a cycle, which sizes (and memory) cannot bound.
  if (value.size().has_namespace)
    return unsupported("chat template " + to_string(s.pos) + ": a namespace inside a namespace");
  CERA_RETURN_IF_ERROR(charge(s.pos, ns.as_object().entries.size() / kEntriesPerStep));
  ns.as_object().set(s.attribute, std::move(value));
  return ok_status();
}

Value Evaluator::make_macro(const Stmt& s) {
  const Stmt* macro = &s;
  // Recursion needs no counter of its own: each call nests its body one level deeper than the
  // call, so max_depth stops runaway recursion as it stops any other nesting.
  return Value::function([this, macro](const CallArgs& args) -> Result<Value> {
    if (args.positional.size() > macro->params.size())
      return error(macro->pos, "macro '" + macro->text + "' takes " +
                                   std::to_string(macro->params.size()) + " arguments, got " +
                                   std::to_string(args.positional.size()));
    // Matching keywords to parameters compares each with each.
    CERA_RETURN_IF_ERROR(
        charge(macro->pos, (macro->params.size() * (args.keyword.size() + 1)) / kEntriesPerStep));
    // A macro sees the globals and its parameters, not the caller's locals.
    std::vector<Frame> saved = std::move(frames_);
    frames_ = {saved.front(), std::make_shared<Object>()};
    auto finish = [&](Status st) -> Status {
      frames_ = std::move(saved);
      return st;
    };
    for (const auto& [k, v] : args.keyword) {
      bool known = false;
      for (const MacroParam& p : macro->params) known = known || p.name == k;
      if (!known)
        return finish(
            error(macro->pos, "macro '" + macro->text + "' has no parameter '" + k + "'"));
    }
    for (size_t i = 0; i < macro->params.size(); ++i) {
      const MacroParam& p = macro->params[i];
      Value v;
      if (i < args.positional.size()) {
        v = args.positional[i];
      } else if (const Value* kw = args.keyword_arg(p.name)) {
        v = *kw;
      } else if (p.default_value) {
        Result<Value> d = eval(*p.default_value);
        if (!d.ok()) return finish(d.status());
        v = std::move(d).value();
      }
      Status st = assign(macro->pos, p.name, std::move(v));
      if (!st.ok()) return finish(st);
    }
    std::string text;
    Result<Flow> flow = exec(macro->body, text);
    Status st = finish(flow.ok() ? ok_status() : flow.status());
    if (!st.ok()) return st;
    return Value(std::move(text));
  });
}

Result<CallArgs> Evaluator::eval_args(const std::vector<Arg>& args) {
  CallArgs out;
  for (const Arg& a : args) {
    CERA_ASSIGN_OR_RETURN(Value v, eval(*a.value));
    if (a.keyword.empty())
      out.positional.push_back(std::move(v));
    else
      out.keyword.emplace_back(a.keyword, std::move(v));
  }
  return out;
}

Result<Value> Evaluator::get_item(const Expr& e, const Value& object, const Value& key) {
  switch (object.kind()) {
    case ValueKind::kUndefined:
      return error(e.pos, "cannot read " +
                              (key.is_string() ? "'" + key.as_string() + "'" : to_repr(key)) +
                              " of an undefined value");
    case ValueKind::kObject: {
      if (!key.is_string()) return Value();
      CERA_RETURN_IF_ERROR(charge(e.pos, object.as_object().entries.size() / kEntriesPerStep));
      const Value* v = object.as_object().find(key.as_string());
      return v != nullptr ? *v : Value();
    }
    case ValueKind::kArray: {
      if (key.kind() != ValueKind::kInt) return Value();
      const Array& a = object.as_array();
      const auto n = static_cast<int64_t>(a.size());
      int64_t i = key.as_int();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value();  // jinja2: out of range is undefined
      return a[static_cast<size_t>(i)];
    }
    case ValueKind::kString: {
      if (key.kind() != ValueKind::kInt) return Value();
      const std::string& s = object.as_string();
      CERA_RETURN_IF_ERROR(charge(e.pos, build_steps(object)));  // code points are counted
      const bool ascii = is_ascii(s);
      const auto n = static_cast<int64_t>(ascii ? s.size() : utf8_length(s));
      int64_t i = key.as_int();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value();
      if (ascii) return Value(std::string(1, s[static_cast<size_t>(i)]));
      size_t at = 0;
      for (int64_t k = 0; k < i; ++k) at = utf8_next(s, at);
      return Value(s.substr(at, utf8_next(s, at) - at));
    }
    default:
      return Value();
  }
}

Result<Value> Evaluator::eval(const Expr& e) {
  Nest nest(depth_);
  if (depth_ > limits_.max_depth)
    return limit_error(e.pos, "nesting deeper", static_cast<uint64_t>(limits_.max_depth), "levels",
                       "max_depth");
  CERA_RETURN_IF_ERROR(charge(e.pos, 1));
  return eval_node(e);
}

// Kept apart from eval_node so that the recursive path keeps a small stack frame.
Result<Value> Evaluator::eval_filter_or_test(const Expr& e) {
  CERA_ASSIGN_OR_RETURN(Value input, eval(*e.children[0]));
  CERA_ASSIGN_OR_RETURN(CallArgs args, eval_args(e.args));
  const bool is_filter = e.kind == ExprKind::kFilter;
  if (is_filter ? !is_constant_time_filter(e.name, input) : test_reads_input(e.name)) {
    CERA_RETURN_IF_ERROR(charge_call(e.pos, input, args,
                                     is_filter ? filter_search_bytes(e.name, input, args)
                                               : test_search_bytes(e.name, input, args)));
  }
  if (!is_filter) {
    auto r = apply_test(e.name, input, args);
    if (!r.ok()) return error(e.pos, r.status());
    return Value(*r != e.negated);
  }
  auto r = apply_filter(e.name, input, args, limits_);
  if (!r.ok()) return error(e.pos, r.status());
  CERA_RETURN_IF_ERROR(built(e.pos, *r));
  return r;
}

Result<Value> Evaluator::eval_node(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kLiteral:
      return e.literal;
    case ExprKind::kName:
      return lookup(e.pos, e.name);
    case ExprKind::kGetAttr: {
      CERA_ASSIGN_OR_RETURN(Value object, eval(*e.children[0]));
      return get_item(e, object, Value(e.name));
    }
    case ExprKind::kGetItem: {
      CERA_ASSIGN_OR_RETURN(Value object, eval(*e.children[0]));
      CERA_ASSIGN_OR_RETURN(Value key, eval(*e.children[1]));
      return get_item(e, object, key);
    }
    case ExprKind::kSlice: {
      CERA_ASSIGN_OR_RETURN(Value object, eval(*e.children[0]));
      Value bounds[3];
      for (int i = 0; i < 3; ++i) {
        if (e.children[i + 1]) {
          CERA_ASSIGN_OR_RETURN(bounds[i], eval(*e.children[i + 1]));
        } else {
          bounds[i] = Value::none();
        }
      }
      CERA_RETURN_IF_ERROR(charge(e.pos, build_steps(object)));
      auto r = slice_value(object, bounds[0], bounds[1], bounds[2]);
      if (!r.ok()) return error(e.pos, r.status().message());
      CERA_RETURN_IF_ERROR(built(e.pos, *r));
      return r;
    }
    case ExprKind::kCall:
      return eval_call(e);
    case ExprKind::kFilter:
    case ExprKind::kTest:
      return eval_filter_or_test(e);
    case ExprKind::kUnary: {
      CERA_ASSIGN_OR_RETURN(Value v, eval(*e.children[0]));
      if (e.op == Op::kNot) return Value(!v.truthy());
      if (!v.is_number())
        return error(e.pos, std::string("bad operand type for unary -/+: '") + v.type_name() + "'");
      if (e.op == Op::kPos) return v;
      if (v.kind() == ValueKind::kFloat) return Value(-v.as_double());
      if (v.as_int() == INT64_MIN) return integer_overflow(e.pos, "-");
      return Value(-v.as_int());
    }
    case ExprKind::kBinary:
      return eval_binary(e);
    case ExprKind::kCondition: {
      CERA_ASSIGN_OR_RETURN(Value c, eval(*e.children[0]));
      if (c.truthy()) return eval(*e.children[1]);
      if (e.children[2]) return eval(*e.children[2]);
      return Value();
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      Array a;
      a.reserve(e.children.size());
      for (const ExprPtr& c : e.children) {
        CERA_ASSIGN_OR_RETURN(Value v, eval(*c));
        a.push_back(std::move(v));
      }
      Value list(std::move(a));
      CERA_RETURN_IF_ERROR(built(e.pos, list));
      return list;
    }
    case ExprKind::kDict: {
      std::vector<std::pair<std::string, Value>> entries;
      entries.reserve(e.children.size() / 2);
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        CERA_ASSIGN_OR_RETURN(Value k, eval(*e.children[i]));
        CERA_ASSIGN_OR_RETURN(Value v, eval(*e.children[i + 1]));
        if (!k.is_string())
          return error(e.children[i]->pos, "unsupported: dict keys other than strings");
        entries.emplace_back(k.as_string(), std::move(v));
      }
      Value dict(make_object(std::move(entries)));
      CERA_RETURN_IF_ERROR(built(e.pos, dict));
      return dict;
    }
  }
  return error(e.pos, "unknown expression");
}

Result<Value> Evaluator::eval_call(const Expr& e) {
  const Expr& callee = *e.children[0];
  if (callee.kind == ExprKind::kGetAttr) {
    CERA_ASSIGN_OR_RETURN(Value object, eval(*callee.children[0]));
    if (has_method(object, callee.name)) {
      CERA_ASSIGN_OR_RETURN(CallArgs args, eval_args(e.args));
      // Methods scan a string; of a dict's, get() searches it and the others copy it.
      CERA_RETURN_IF_ERROR(
          charge_call(e.pos, object, args, method_search_bytes(callee.name, object, args)));
      auto r = call_method(object, callee.name, args, limits_);
      if (!r.ok()) return error(e.pos, r.status());
      CERA_RETURN_IF_ERROR(built(e.pos, *r));
      return r;
    }
    if (!object.is_object() && !object.is_undefined())
      return error(callee.pos, std::string("unsupported: method '") + callee.name + "' of " +
                                   object.type_name());
  }
  CERA_ASSIGN_OR_RETURN(Value f, eval(callee));
  if (f.kind() != ValueKind::kFunction) {
    const std::string what =
        callee.kind == ExprKind::kName ? "'" + callee.name + "'" : "this value";
    if (f.is_undefined()) return error(e.pos, what + " is undefined and cannot be called");
    return error(e.pos, what + " is not callable (" + f.type_name() + ")");
  }
  CERA_ASSIGN_OR_RETURN(CallArgs args, eval_args(e.args));
  CERA_RETURN_IF_ERROR(charge(e.pos, kCallSteps));
  auto r = f.as_function()(args);
  if (!r.ok()) return error(e.pos, r.status());
  CERA_RETURN_IF_ERROR(built(e.pos, *r));
  return r;
}

}  // namespace cera::runtime::chat
