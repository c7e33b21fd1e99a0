// Binary operators with Python's semantics on the engine's values: int64 arithmetic where an
// overflow is an error (Python would grow a big integer), // and % flooring toward -inf, `+`
// and `~` joining strings and lists, `in` searching strings, lists and dicts. What an operator
// could build beyond max_value_bytes / max_value_items is refused before it is built.
#include <cmath>

#include "runtime/chat/costs.h"
#include "runtime/chat/evaluator.h"

namespace cera::runtime::chat {
namespace {

using cost::kSearchBytesPerStep;
using cost::saturating_mul;

int64_t floor_div(int64_t a, int64_t b) {  // b != 0, and not INT64_MIN / -1
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// a ** b for b >= 0 by squaring: O(log b) steps, false on overflow.
bool int_pow(int64_t a, int64_t b, int64_t& r) {
  r = 1;
  while (b > 0) {
    if ((b & 1) != 0 && __builtin_mul_overflow(r, a, &r)) return false;
    b >>= 1;
    if (b > 0 && __builtin_mul_overflow(a, a, &a)) return false;
  }
  return true;
}

}  // namespace

Status integer_overflow(SourcePos pos, const char* op) {
  return out_of_range("chat template " + to_string(pos) + ": integer overflow in '" + op + "'");
}

Result<Value> Evaluator::eval_binary(const Expr& e) {
  CERA_ASSIGN_OR_RETURN(Value a, eval(*e.children[0]));
  if (e.op == Op::kAnd) return a.truthy() ? eval(*e.children[1]) : a;
  if (e.op == Op::kOr) return a.truthy() ? a : eval(*e.children[1]);
  CERA_ASSIGN_OR_RETURN(Value b, eval(*e.children[1]));
  // Reading the operands: comparing, printing or searching them. Joining two strings or lists
  // costs what the result costs to build, charged when it is checked (built()).
  const bool joins =
      (e.op == Op::kAdd && a.kind() == b.kind() && (a.is_string() || a.is_array())) ||
      e.op == Op::kConcat;
  for (const Value* v : {&a, &b})
    if (!joins || (e.op == Op::kConcat && !v->is_string()))
      CERA_RETURN_IF_ERROR(charge_reading(e.pos, *v));
  if ((e.op == Op::kIn || e.op == Op::kNotIn) && b.is_string())  // a substring search
    CERA_RETURN_IF_ERROR(
        charge(e.pos, saturating_mul(a.size().bytes, b.size().bytes) / kSearchBytesPerStep));
  const auto type_error = [&](const char* op) {
    return error(e.pos, std::string("unsupported operand types for ") + op + ": '" + a.type_name() +
                            "' and '" + b.type_name() + "'");
  };
  // Sizes are checked before building what could not be kept anyway.
  const auto too_large = [&](uint64_t bytes) {
    return limit_error(e.pos, "a string of " + std::to_string(bytes) + " bytes: larger",
                       limits_.max_value_bytes, "bytes", "max_value_bytes");
  };
  const bool both_ints = (a.kind() == ValueKind::kInt || a.kind() == ValueKind::kBool) &&
                         (b.kind() == ValueKind::kInt || b.kind() == ValueKind::kBool);
  const bool both_numbers = a.is_number() && b.is_number();
  int64_t r = 0;
  Value result;
  switch (e.op) {
    case Op::kConcat: {
      const std::string sa = to_display_string(a), sb = to_display_string(b);
      if (!fits(sa.size(), sb.size(), limits_.max_value_bytes))
        return too_large(sa.size() + sb.size());
      result = Value(sa + sb);
      break;
    }
    case Op::kAdd:
      if (both_ints) {
        if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) return integer_overflow(e.pos, "+");
        return Value(r);
      }
      if (both_numbers) return Value(a.as_double() + b.as_double());
      if (a.is_string() && b.is_string()) {
        if (!fits(a.as_string().size(), b.as_string().size(), limits_.max_value_bytes))
          return too_large(a.as_string().size() + b.as_string().size());
        result = Value(a.as_string() + b.as_string());
        break;
      }
      if (a.is_array() && b.is_array()) {
        const uint64_t items = a.size().items + b.size().items;
        if (items > limits_.max_value_items)
          return limit_error(e.pos, "a list of " + std::to_string(items) + " items: more",
                             limits_.max_value_items, "items", "max_value_items");
        Array joined = a.as_array();
        joined.insert(joined.end(), b.as_array().begin(), b.as_array().end());
        result = Value(std::move(joined));
        break;
      }
      return type_error("+");
    case Op::kSub:
      if (both_ints) {
        if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) return integer_overflow(e.pos, "-");
        return Value(r);
      }
      if (both_numbers) return Value(a.as_double() - b.as_double());
      return type_error("-");
    case Op::kMul:
      if (both_ints) {
        if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) return integer_overflow(e.pos, "*");
        return Value(r);
      }
      if (both_numbers) return Value(a.as_double() * b.as_double());
      if ((a.is_string() && b.kind() == ValueKind::kInt) ||
          (a.kind() == ValueKind::kInt && b.is_string())) {
        const std::string& s = a.is_string() ? a.as_string() : b.as_string();
        const int64_t n = a.is_string() ? b.as_int() : a.as_int();
        if (n <= 0 || s.empty()) return Value(std::string());
        const uint64_t bytes = saturating_mul(s.size(), static_cast<uint64_t>(n));
        if (bytes > limits_.max_value_bytes) return too_large(bytes);
        std::string repeated;
        repeated.reserve(bytes);
        for (int64_t i = 0; i < n; ++i) repeated += s;
        result = Value(std::move(repeated));
        break;
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
        if (b.as_int() == -1) {  // INT64_MIN / -1 overflows (and traps on x86)
          if (e.op == Op::kMod) return Value(int64_t{0});
          if (a.as_int() == INT64_MIN) return integer_overflow(e.pos, "//");
          return Value(-a.as_int());
        }
        const int64_t q = floor_div(a.as_int(), b.as_int());
        return e.op == Op::kFloorDiv ? Value(q) : Value(a.as_int() - q * b.as_int());
      } else {
        const double q = std::floor(a.as_double() / b.as_double());
        return e.op == Op::kFloorDiv ? Value(q) : Value(a.as_double() - q * b.as_double());
      }
    case Op::kPow:
      if (both_ints && b.as_int() >= 0) {
        if (!int_pow(a.as_int(), b.as_int(), r)) return integer_overflow(e.pos, "**");
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
      const bool less_or_equal = e.op == Op::kLt   ? cmp < 0
                                 : e.op == Op::kLe ? cmp <= 0
                                 : e.op == Op::kGt ? cmp > 0
                                                   : cmp >= 0;
      return Value(less_or_equal);
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
  CERA_RETURN_IF_ERROR(built(e.pos, result));
  return result;
}

}  // namespace cera::runtime::chat
