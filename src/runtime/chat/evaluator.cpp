// Statement execution and expression evaluation. Python semantics where templates rely on them:
// `and`/`or` return an operand, `in` on str/list/dict, // and % floor toward -inf, undefined is
// falsy and prints nothing but fails on attribute access (as jinja2's default Undefined does).
#include "runtime/chat/evaluator.h"

#include <cmath>

#include "runtime/chat/builtins.h"

namespace cera::runtime::chat {
namespace {

constexpr int kMaxCallDepth = 200;  // macro recursion; deeper is a runaway template

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

Evaluator::Evaluator(Object globals) {
  frames_.push_back(std::make_shared<Object>(std::move(globals)));
}

Status Evaluator::error(SourcePos pos, const std::string& what) {
  return invalid_argument("chat template " + to_string(pos) + ": " + what);
}

Status Evaluator::render(const Body& body, std::string& out) {
  CERA_ASSIGN_OR_RETURN(Flow flow, exec(body, out));
  (void)flow;
  return ok_status();
}

Value Evaluator::lookup(const std::string& name) const {
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it)
    if (const Value* v = (*it)->find(name)) return *v;
  return Value();
}

Status Evaluator::assign_targets(const std::vector<std::string>& targets, const Value& value,
                                 SourcePos pos) {
  if (targets.size() == 1) {
    assign(targets[0], value);
    return ok_status();
  }
  CERA_ASSIGN_OR_RETURN(Array items, iterate(value));
  if (items.size() != targets.size())
    return error(pos, "cannot unpack " + std::to_string(items.size()) + " values into " +
                          std::to_string(targets.size()) + " names");
  for (size_t i = 0; i < targets.size(); ++i) assign(targets[i], items[i]);
  return ok_status();
}

Result<Evaluator::Flow> Evaluator::exec(const Body& body, std::string& out) {
  for (const StmtPtr& sp : body) {
    const Stmt& s = *sp;
    switch (s.kind) {
      case StmtKind::kText:
        out += s.text;
        break;
      case StmtKind::kOutput: {
        CERA_ASSIGN_OR_RETURN(Value v, eval(*s.expr));
        out += to_display_string(v);
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
        assign(s.text, make_macro(s));
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
  auto items_or = iterate(iterable);
  if (!items_or.ok()) return error(s.expr->pos, items_or.status().message());
  Array items = std::move(items_or).value();
  if (s.filter) {  // the loop filter runs first, so loop.length/last count the kept items
    Array kept;
    for (const Value& item : items) {
      frames_.push_back(std::make_shared<Object>());
      Status st = assign_targets(s.targets, item, s.pos);
      Result<Value> keep = st.ok() ? eval(*s.filter) : Result<Value>(st);
      frames_.pop_back();
      if (!keep.ok()) return keep.status();
      if (keep->truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec(s.else_body, out);
  const auto n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    Object loop;
    loop.set("index0", Value(i));
    loop.set("index", Value(i + 1));
    loop.set("revindex0", Value(n - 1 - i));
    loop.set("revindex", Value(n - i));
    loop.set("first", Value(i == 0));
    loop.set("last", Value(i == n - 1));
    loop.set("length", Value(n));
    loop.set("depth", Value(int64_t{1}));
    loop.set("depth0", Value(int64_t{0}));
    loop.set("previtem", i > 0 ? items[i - 1] : Value());
    loop.set("nextitem", i + 1 < n ? items[i + 1] : Value());
    loop.set("cycle", Value::function([i](const CallArgs& args) -> Result<Value> {
               if (args.positional.empty())
                 return invalid_argument("loop.cycle() needs at least one value");
               return args.positional[static_cast<size_t>(i) % args.positional.size()];
             }));
    frames_.push_back(std::make_shared<Object>());
    frames_.back()->set("loop", Value(std::move(loop)));
    Status st = assign_targets(s.targets, items[i], s.pos);
    Result<Flow> flow = st.ok() ? exec(s.body, out) : Result<Flow>(st);
    frames_.pop_back();
    if (!flow.ok()) return flow.status();
    if (*flow == Flow::kBreak) break;
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
  Value ns = lookup(s.targets[0]);
  if (!ns.is_object() || !ns.as_object().is_namespace)
    return error(s.pos, "cannot assign attribute '" + s.attribute + "' on '" + s.targets[0] +
                            "': only namespace() objects take attribute assignment");
  ns.as_object().set(s.attribute, std::move(value));
  return ok_status();
}

Value Evaluator::make_macro(const Stmt& s) {
  const Stmt* macro = &s;
  return Value::function([this, macro](const CallArgs& args) -> Result<Value> {
    if (call_depth_ >= kMaxCallDepth)
      return error(macro->pos, "macro recursion deeper than 200 calls");
    if (args.positional.size() > macro->params.size())
      return error(macro->pos, "macro '" + macro->text + "' takes " +
                                   std::to_string(macro->params.size()) + " arguments, got " +
                                   std::to_string(args.positional.size()));
    // A macro sees the globals and its parameters, not the caller's locals.
    std::vector<Frame> saved = std::move(frames_);
    frames_ = {saved.front(), std::make_shared<Object>()};
    ++call_depth_;
    auto finish = [&](Status st) -> Status {
      --call_depth_;
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
      assign(p.name, std::move(v));
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
      const Value* v = object.as_object().find(key.as_string());
      return v != nullptr ? *v : Value();
    }
    case ValueKind::kArray:
    case ValueKind::kString: {
      if (key.kind() != ValueKind::kInt) return Value();
      const bool is_string = object.is_string();
      std::vector<std::string> chars;
      if (is_string) chars = utf8_chars(object.as_string());
      const auto n = static_cast<int64_t>(is_string ? chars.size() : object.as_array().size());
      int64_t i = key.as_int();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value();  // jinja2: out of range is undefined
      return is_string ? Value(chars[static_cast<size_t>(i)])
                       : object.as_array()[static_cast<size_t>(i)];
    }
    default:
      return Value();
  }
}

Result<Value> Evaluator::eval(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kLiteral:
      return e.literal;
    case ExprKind::kName:
      return lookup(e.name);
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
      auto r = slice_value(object, bounds[0], bounds[1], bounds[2]);
      if (!r.ok()) return error(e.pos, r.status().message());
      return r;
    }
    case ExprKind::kCall:
      return eval_call(e);
    case ExprKind::kFilter: {
      CERA_ASSIGN_OR_RETURN(Value input, eval(*e.children[0]));
      CERA_ASSIGN_OR_RETURN(CallArgs args, eval_args(e.args));
      auto r = apply_filter(e.name, input, args);
      if (!r.ok()) return error(e.pos, r.status().message());
      return r;
    }
    case ExprKind::kTest: {
      CERA_ASSIGN_OR_RETURN(Value input, eval(*e.children[0]));
      CERA_ASSIGN_OR_RETURN(CallArgs args, eval_args(e.args));
      auto r = apply_test(e.name, input, args);
      if (!r.ok()) return error(e.pos, r.status().message());
      return Value(*r != e.negated);
    }
    case ExprKind::kUnary: {
      CERA_ASSIGN_OR_RETURN(Value v, eval(*e.children[0]));
      if (e.op == Op::kNot) return Value(!v.truthy());
      if (!v.is_number())
        return error(e.pos, std::string("bad operand type for unary -/+: '") + v.type_name() + "'");
      if (e.op == Op::kPos) return v;
      if (v.kind() == ValueKind::kFloat) return Value(-v.as_double());
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
      for (const ExprPtr& c : e.children) {
        CERA_ASSIGN_OR_RETURN(Value v, eval(*c));
        a.push_back(std::move(v));
      }
      return Value(std::move(a));
    }
    case ExprKind::kDict: {
      Object o;
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        CERA_ASSIGN_OR_RETURN(Value k, eval(*e.children[i]));
        CERA_ASSIGN_OR_RETURN(Value v, eval(*e.children[i + 1]));
        if (!k.is_string())
          return error(e.children[i]->pos, "unsupported: dict keys other than strings");
        o.set(k.as_string(), std::move(v));
      }
      return Value(std::move(o));
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
      auto r = call_method(object, callee.name, args);
      if (!r.ok()) return error(e.pos, r.status().message());
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
  auto r = f.as_function()(args);
  if (!r.ok()) {
    // Errors from macros already carry a position; builtins' errors get the call's.
    if (r.status().message().rfind("chat template ", 0) == 0) return r.status();
    return error(e.pos, r.status().message());
  }
  return r;
}

Result<Value> Evaluator::eval_binary(const Expr& e) {
  CERA_ASSIGN_OR_RETURN(Value a, eval(*e.children[0]));
  if (e.op == Op::kAnd) return a.truthy() ? eval(*e.children[1]) : a;
  if (e.op == Op::kOr) return a.truthy() ? a : eval(*e.children[1]);
  CERA_ASSIGN_OR_RETURN(Value b, eval(*e.children[1]));
  const auto type_error = [&](const char* op) {
    return error(e.pos, std::string("unsupported operand types for ") + op + ": '" + a.type_name() +
                            "' and '" + b.type_name() + "'");
  };
  const bool both_ints = (a.kind() == ValueKind::kInt || a.kind() == ValueKind::kBool) &&
                         (b.kind() == ValueKind::kInt || b.kind() == ValueKind::kBool);
  const bool both_numbers = a.is_number() && b.is_number();
  switch (e.op) {
    case Op::kConcat:
      return Value(to_display_string(a) + to_display_string(b));
    case Op::kAdd:
      if (both_ints) return Value(a.as_int() + b.as_int());
      if (both_numbers) return Value(a.as_double() + b.as_double());
      if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
      if (a.is_array() && b.is_array()) {
        Array r = a.as_array();
        r.insert(r.end(), b.as_array().begin(), b.as_array().end());
        return Value(std::move(r));
      }
      return type_error("+");
    case Op::kSub:
      if (both_ints) return Value(a.as_int() - b.as_int());
      if (both_numbers) return Value(a.as_double() - b.as_double());
      return type_error("-");
    case Op::kMul:
      if (both_ints) return Value(a.as_int() * b.as_int());
      if (both_numbers) return Value(a.as_double() * b.as_double());
      if ((a.is_string() && b.kind() == ValueKind::kInt) ||
          (a.kind() == ValueKind::kInt && b.is_string())) {
        const std::string& s = a.is_string() ? a.as_string() : b.as_string();
        const int64_t n = a.is_string() ? b.as_int() : a.as_int();
        std::string r;
        for (int64_t i = 0; i < n; ++i) r += s;
        return Value(std::move(r));
      }
      return type_error("*");
    case Op::kDiv:
      if (!both_numbers) return type_error("/");
      if (b.as_double() == 0) return error(e.pos, "division by zero");
      return Value(a.as_double() / b.as_double());
    case Op::kFloorDiv:
    case Op::kMod:
      if (!both_numbers) return type_error(e.op == Op::kMod ? "%" : "//");
      if (b.as_double() == 0) return error(e.pos, "division by zero");
      if (both_ints) {
        const int64_t q = floor_div(a.as_int(), b.as_int());
        return e.op == Op::kFloorDiv ? Value(q) : Value(a.as_int() - q * b.as_int());
      } else {
        const double q = std::floor(a.as_double() / b.as_double());
        return e.op == Op::kFloorDiv ? Value(q) : Value(a.as_double() - q * b.as_double());
      }
    case Op::kPow:
      if (both_ints && b.as_int() >= 0) {
        int64_t r = 1;
        for (int64_t i = 0; i < b.as_int(); ++i) r *= a.as_int();
        return Value(r);
      }
      if (both_numbers) return Value(std::pow(a.as_double(), b.as_double()));
      return type_error("**");
    case Op::kEq:
      return Value(a.equals(b));
    case Op::kNe:
      return Value(!a.equals(b));
    case Op::kLt:
    case Op::kLe:
    case Op::kGt:
    case Op::kGe: {
      int cmp = 0;
      if (both_numbers)
        cmp = a.as_double() < b.as_double() ? -1 : a.as_double() > b.as_double() ? 1 : 0;
      else if (a.is_string() && b.is_string())
        cmp = a.as_string().compare(b.as_string());
      else
        return type_error(e.op == Op::kLt   ? "<"
                          : e.op == Op::kLe ? "<="
                          : e.op == Op::kGt ? ">"
                                            : ">=");
      const bool r = e.op == Op::kLt   ? cmp < 0
                     : e.op == Op::kLe ? cmp <= 0
                     : e.op == Op::kGt ? cmp > 0
                                       : cmp >= 0;
      return Value(r);
    }
    case Op::kIn:
    case Op::kNotIn: {
      bool found = false;
      if (b.is_string()) {
        if (!a.is_string()) return error(e.pos, "'in <string>' requires string as left operand");
        found = b.as_string().find(a.as_string()) != std::string::npos;
      } else if (b.is_object()) {
        found = a.is_string() && b.as_object().find(a.as_string()) != nullptr;
      } else if (b.is_array()) {
        for (const Value& v : b.as_array()) found = found || v.equals(a);
      } else if (!b.is_undefined()) {
        return error(e.pos,
                     std::string("argument of type '") + b.type_name() + "' is not iterable");
      }
      return Value(found != (e.op == Op::kNotIn));
    }
    default:
      return error(e.pos, "unknown operator");
  }
}

Result<Value> slice_value(const Value& v, const Value& start, const Value& stop,
                          const Value& step) {
  const bool is_string = v.is_string();
  if (!is_string && !v.is_array())
    return invalid_argument(std::string("cannot slice a ") + v.type_name());
  std::vector<std::string> chars;
  if (is_string) chars = utf8_chars(v.as_string());
  const auto n = static_cast<int64_t>(is_string ? chars.size() : v.as_array().size());
  for (const Value* b : {&start, &stop, &step})
    if (!b->is_none() && b->kind() != ValueKind::kInt)
      return invalid_argument("slice indices must be integers");
  const int64_t st = step.is_none() ? 1 : step.as_int();
  if (st == 0) return invalid_argument("slice step cannot be zero");
  // Python's PySlice_AdjustIndices.
  const auto adjust = [&](const Value& b, int64_t dflt) {
    if (b.is_none()) return dflt;
    int64_t i = b.as_int();
    if (i < 0) {
      i += n;
      if (i < 0) i = st < 0 ? -1 : 0;
    } else if (i >= n) {
      i = st < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t lo = adjust(start, st < 0 ? n - 1 : 0);
  const int64_t hi = adjust(stop, st < 0 ? -1 : n);
  std::string s;
  Array a;
  for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) {
    if (is_string)
      s += chars[static_cast<size_t>(i)];
    else
      a.push_back(v.as_array()[static_cast<size_t>(i)]);
  }
  return is_string ? Value(std::move(s)) : Value(std::move(a));
}

}  // namespace cera::runtime::chat
