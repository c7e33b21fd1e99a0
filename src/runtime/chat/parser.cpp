// Recursive-descent parser over the lexer's tokens. Statement tags are parsed by name; block
// statements collect their body until one of the closing names they expect. Every recursion and
// every link of a left-deep chain (`a + b + c`, `x | f | g`, `a.b.c`) takes one level of the
// depth budget, so neither the parser's stack nor the tree's height can grow without bound.
#include "runtime/chat/parser.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <initializer_list>

namespace cera::runtime::chat {
namespace {

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const TemplateLimits& limits)
      : t_(tokens), max_depth_(limits.max_depth) {}

  Result<Body> parse_all() {
    std::string end;
    CERA_ASSIGN_OR_RETURN(Body body, parse_body({}, end));
    return body;
  }

 private:
  // Levels taken from the depth budget, given back when the object goes out of scope. A chain
  // takes one more level per link (take()); a recursion takes one on entry.
  class Levels {
   public:
    explicit Levels(Parser& p) : p_(p) {}
    Levels(const Levels&) = delete;
    Levels& operator=(const Levels&) = delete;
    ~Levels() { p_.depth_ -= taken_; }
    Status take() {
      ++taken_;
      if (++p_.depth_ > p_.max_depth_)
        return limit_error(p_.peek().pos, "nesting deeper", static_cast<uint64_t>(p_.max_depth_),
                           "levels", "max_depth");
      return ok_status();
    }

   private:
    Parser& p_;
    int taken_ = 0;
  };

  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool at_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kOperator && peek(ahead).text == op;
  }
  bool at_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kName && peek(ahead).text == name;
  }
  Status error_at(const Token& t, const std::string& what) const {
    return invalid_argument("chat template " + to_string(t.pos) + ": " + what);
  }
  Status expect_op(std::string_view op) {
    if (!at_op(op)) return error_at(peek(), "expected '" + std::string(op) + "'" + found());
    ++i_;
    return ok_status();
  }
  Status expect_stmt_end() {
    if (peek().kind != TokenKind::kStmtEnd) return error_at(peek(), "expected '%}'" + found());
    ++i_;
    return ok_status();
  }
  std::string found() const {
    const Token& t = peek();
    switch (t.kind) {
      case TokenKind::kEnd:
        return ", found the end of the template";
      case TokenKind::kStmtEnd:
        return ", found '%}'";
      case TokenKind::kExprEnd:
        return ", found '}}'";
      case TokenKind::kText:
        return ", found text";
      default:
        return ", found '" + t.text + "'";
    }
  }
  Result<std::string> expect_name() {
    if (peek().kind != TokenKind::kName) return error_at(peek(), "expected a name" + found());
    return next().text;
  }

  static ExprPtr make(ExprKind kind, SourcePos pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }

  // Statements until a {% name %} with name in `ends`; `ended_by` receives that name. An empty
  // `ends` parses to the end of the template.
  Result<Body> parse_body(std::initializer_list<std::string_view> ends, std::string& ended_by) {
    Levels level(*this);
    CERA_RETURN_IF_ERROR(level.take());
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.kind == TokenKind::kEnd) {
        if (ends.size() == 0) return body;
        return error_at(t, "missing {% " + std::string(*(ends.end() - 1)) + " %}");
      }
      if (t.kind == TokenKind::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kText;
        s->pos = t.pos;
        s->text = t.text;
        body.push_back(std::move(s));
        ++i_;
      } else if (t.kind == TokenKind::kExprBegin) {
        ++i_;
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kOutput;
        s->pos = t.pos;
        CERA_ASSIGN_OR_RETURN(s->expr, parse_expression());
        if (peek().kind != TokenKind::kExprEnd) return error_at(peek(), "expected '}}'" + found());
        ++i_;
        body.push_back(std::move(s));
      } else if (t.kind == TokenKind::kStmtBegin) {
        const Token& name = peek(1);
        if (name.kind != TokenKind::kName)
          return error_at(name, "expected a statement name" + found());
        if (std::find(ends.begin(), ends.end(), name.text) != ends.end()) {
          ended_by = name.text;
          i_ += 2;
          return body;
        }
        i_ += 2;
        CERA_ASSIGN_OR_RETURN(StmtPtr s, parse_statement(name));
        body.push_back(std::move(s));
      } else {
        return error_at(t, "unexpected token" + found());
      }
    }
  }

  Result<StmtPtr> parse_statement(const Token& name) {
    auto s = std::make_unique<Stmt>();
    s->pos = name.pos;
    const std::string& n = name.text;
    std::string ended_by;
    if (n == "if") {
      s->kind = StmtKind::kIf;
      while (true) {
        Branch b;
        CERA_ASSIGN_OR_RETURN(b.condition, parse_expression());
        CERA_RETURN_IF_ERROR(expect_stmt_end());
        CERA_ASSIGN_OR_RETURN(b.body, parse_body({"elif", "else", "endif"}, ended_by));
        s->branches.push_back(std::move(b));
        if (ended_by != "elif") break;
      }
      if (ended_by == "else") {
        CERA_RETURN_IF_ERROR(expect_stmt_end());
        CERA_ASSIGN_OR_RETURN(s->else_body, parse_body({"endif"}, ended_by));
      }
      CERA_RETURN_IF_ERROR(expect_stmt_end());
      return s;
    }
    if (n == "for") {
      s->kind = StmtKind::kFor;
      CERA_RETURN_IF_ERROR(parse_targets(s->targets));
      if (!at_name("in")) return error_at(peek(), "expected 'in'" + found());
      ++i_;
      // The iterable stops before a trailing `if` (the loop filter), so no inline-if here; it
      // takes the level parse_expression() would have.
      {
        Levels level(*this);
        CERA_RETURN_IF_ERROR(level.take());
        CERA_ASSIGN_OR_RETURN(s->expr, parse_or());
      }
      if (at_name("if")) {
        ++i_;
        CERA_ASSIGN_OR_RETURN(s->filter, parse_expression());
      }
      if (at_name("recursive")) return error_at(peek(), "unsupported: recursive loops");
      CERA_RETURN_IF_ERROR(expect_stmt_end());
      const uint64_t loop_names_before = loop_names_;
      CERA_ASSIGN_OR_RETURN(s->body, parse_body({"else", "endfor"}, ended_by));
      s->uses_loop = loop_names_ != loop_names_before;
      if (ended_by == "else") {
        CERA_RETURN_IF_ERROR(expect_stmt_end());
        CERA_ASSIGN_OR_RETURN(s->else_body, parse_body({"endfor"}, ended_by));
      }
      CERA_RETURN_IF_ERROR(expect_stmt_end());
      return s;
    }
    if (n == "set") {
      s->kind = StmtKind::kSet;
      if (peek().kind == TokenKind::kName && at_op(".", 1)) {
        s->targets.push_back(next().text);
        ++i_;
        CERA_ASSIGN_OR_RETURN(s->attribute, expect_name());
      } else {
        CERA_RETURN_IF_ERROR(parse_targets(s->targets));
      }
      if (peek().kind == TokenKind::kStmtEnd) {  // block set: {% set x %}...{% endset %}
        if (!s->attribute.empty() || s->targets.size() != 1)
          return error_at(peek(), "block set needs one name");
        ++i_;
        CERA_ASSIGN_OR_RETURN(s->body, parse_body({"endset"}, ended_by));
        CERA_RETURN_IF_ERROR(expect_stmt_end());
        return s;
      }
      CERA_RETURN_IF_ERROR(expect_op("="));
      CERA_ASSIGN_OR_RETURN(s->expr, parse_tuple_or_expression());
      CERA_RETURN_IF_ERROR(expect_stmt_end());
      return s;
    }
    if (n == "macro") {
      s->kind = StmtKind::kMacro;
      CERA_ASSIGN_OR_RETURN(s->text, expect_name());
      CERA_RETURN_IF_ERROR(expect_op("("));
      while (!at_op(")")) {
        MacroParam p;
        CERA_ASSIGN_OR_RETURN(p.name, expect_name());
        if (at_op("=")) {
          ++i_;
          CERA_ASSIGN_OR_RETURN(p.default_value, parse_expression());
        }
        s->params.push_back(std::move(p));
        if (!at_op(",")) break;
        ++i_;
      }
      CERA_RETURN_IF_ERROR(expect_op(")"));
      CERA_RETURN_IF_ERROR(expect_stmt_end());
      CERA_ASSIGN_OR_RETURN(s->body, parse_body({"endmacro"}, ended_by));
      CERA_RETURN_IF_ERROR(expect_stmt_end());
      return s;
    }
    if (n == "break" || n == "continue") {
      s->kind = n == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      CERA_RETURN_IF_ERROR(expect_stmt_end());
      return s;
    }
    if (n == "generation") {  // transformers' assistant-mask marker: renders its body unchanged
      s->kind = StmtKind::kBlock;
      CERA_RETURN_IF_ERROR(expect_stmt_end());
      CERA_ASSIGN_OR_RETURN(s->body, parse_body({"endgeneration"}, ended_by));
      CERA_RETURN_IF_ERROR(expect_stmt_end());
      return s;
    }
    return error_at(name, "unsupported statement '{% " + n + " %}'");
  }

  Status parse_targets(std::vector<std::string>& targets) {
    const bool paren = at_op("(");
    if (paren) ++i_;
    while (true) {
      CERA_ASSIGN_OR_RETURN(std::string t, expect_name());
      targets.push_back(std::move(t));
      if (!at_op(",")) break;
      ++i_;
    }
    if (paren) CERA_RETURN_IF_ERROR(expect_op(")"));
    return ok_status();
  }

  // `a, b` without parentheses is a tuple in set statements.
  Result<ExprPtr> parse_tuple_or_expression() {
    const SourcePos pos = peek().pos;
    Levels level(*this);  // a tuple nests its elements one level deeper
    CERA_RETURN_IF_ERROR(level.take());
    CERA_ASSIGN_OR_RETURN(ExprPtr first, parse_expression());
    if (!at_op(",")) return first;
    ExprPtr tuple = make(ExprKind::kTuple, pos);
    tuple->children.push_back(std::move(first));
    while (at_op(",")) {
      ++i_;
      CERA_ASSIGN_OR_RETURN(ExprPtr e, parse_expression());
      tuple->children.push_back(std::move(e));
    }
    return tuple;
  }

  Result<ExprPtr> parse_expression() {
    Levels levels(*this);
    CERA_RETURN_IF_ERROR(levels.take());
    CERA_ASSIGN_OR_RETURN(ExprPtr e, parse_or());
    while (at_name("if")) {
      CERA_RETURN_IF_ERROR(levels.take());
      const SourcePos pos = next().pos;
      ExprPtr cond = make(ExprKind::kCondition, pos);
      CERA_ASSIGN_OR_RETURN(ExprPtr test, parse_or());
      ExprPtr otherwise;
      if (at_name("else")) {
        ++i_;
        CERA_ASSIGN_OR_RETURN(otherwise, parse_expression());
      }
      cond->children.push_back(std::move(test));
      cond->children.push_back(std::move(e));
      cond->children.push_back(std::move(otherwise));
      e = std::move(cond);
    }
    return e;
  }

  ExprPtr binary(Op op, SourcePos pos, ExprPtr lhs, ExprPtr rhs) {
    ExprPtr e = make(ExprKind::kBinary, pos);
    e->op = op;
    e->children.push_back(std::move(lhs));
    e->children.push_back(std::move(rhs));
    return e;
  }

  Result<ExprPtr> parse_or() {
    Levels chain(*this);
    CERA_ASSIGN_OR_RETURN(ExprPtr e, parse_and());
    while (at_name("or")) {
      CERA_RETURN_IF_ERROR(chain.take());
      const SourcePos pos = next().pos;
      CERA_ASSIGN_OR_RETURN(ExprPtr r, parse_and());
      e = binary(Op::kOr, pos, std::move(e), std::move(r));
    }
    return e;
  }

  Result<ExprPtr> parse_and() {
    Levels chain(*this);
    CERA_ASSIGN_OR_RETURN(ExprPtr e, parse_not());
    while (at_name("and")) {
      CERA_RETURN_IF_ERROR(chain.take());
      const SourcePos pos = next().pos;
      CERA_ASSIGN_OR_RETURN(ExprPtr r, parse_not());
      e = binary(Op::kAnd, pos, std::move(e), std::move(r));
    }
    return e;
  }

  Result<ExprPtr> parse_not() {
    if (at_name("not")) {
      Levels level(*this);
      CERA_RETURN_IF_ERROR(level.take());
      const SourcePos pos = next().pos;
      CERA_ASSIGN_OR_RETURN(ExprPtr operand, parse_not());
      ExprPtr e = make(ExprKind::kUnary, pos);
      e->op = Op::kNot;
      e->children.push_back(std::move(operand));
      return e;
    }
    return parse_compare();
  }

  Result<ExprPtr> parse_compare() {
    Levels chain(*this);
    CERA_ASSIGN_OR_RETURN(ExprPtr e, parse_math1());
    while (true) {
      const SourcePos pos = peek().pos;
      Op op = Op::kNone;
      if (at_op("=="))
        op = Op::kEq;
      else if (at_op("!="))
        op = Op::kNe;
      else if (at_op("<"))
        op = Op::kLt;
      else if (at_op("<="))
        op = Op::kLe;
      else if (at_op(">"))
        op = Op::kGt;
      else if (at_op(">="))
        op = Op::kGe;
      else if (at_name("in"))
        op = Op::kIn;
      else if (at_name("not") && at_name("in", 1))
        op = Op::kNotIn;
      if (op == Op::kNone) return e;
      CERA_RETURN_IF_ERROR(chain.take());
      i_ += op == Op::kNotIn ? 2 : 1;
      CERA_ASSIGN_OR_RETURN(ExprPtr r, parse_math1());
      e = binary(op, pos, std::move(e), std::move(r));
    }
  }

  Result<ExprPtr> parse_math1() {
    Levels chain(*this);
    CERA_ASSIGN_OR_RETURN(ExprPtr e, parse_concat());
    while (at_op("+") || at_op("-")) {
      CERA_RETURN_IF_ERROR(chain.take());
      const Token& t = next();
      CERA_ASSIGN_OR_RETURN(ExprPtr r, parse_concat());
      e = binary(t.text == "+" ? Op::kAdd : Op::kSub, t.pos, std::move(e), std::move(r));
    }
    return e;
  }

  Result<ExprPtr> parse_concat() {
    Levels chain(*this);
    CERA_ASSIGN_OR_RETURN(ExprPtr e, parse_math2());
    while (at_op("~")) {
      CERA_RETURN_IF_ERROR(chain.take());
      const SourcePos pos = next().pos;
      CERA_ASSIGN_OR_RETURN(ExprPtr r, parse_math2());
      e = binary(Op::kConcat, pos, std::move(e), std::move(r));
    }
    return e;
  }

  Result<ExprPtr> parse_math2() {
    Levels chain(*this);
    CERA_ASSIGN_OR_RETURN(ExprPtr e, parse_pow());
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      CERA_RETURN_IF_ERROR(chain.take());
      const Token& t = next();
      const Op op = t.text == "*"    ? Op::kMul
                    : t.text == "/"  ? Op::kDiv
                    : t.text == "//" ? Op::kFloorDiv
                                     : Op::kMod;
      CERA_ASSIGN_OR_RETURN(ExprPtr r, parse_pow());
      e = binary(op, t.pos, std::move(e), std::move(r));
    }
    return e;
  }

  Result<ExprPtr> parse_pow() {
    Levels chain(*this);
    CERA_ASSIGN_OR_RETURN(ExprPtr e, parse_unary(true));
    while (at_op("**")) {
      CERA_RETURN_IF_ERROR(chain.take());
      const SourcePos pos = next().pos;
      CERA_ASSIGN_OR_RETURN(ExprPtr r, parse_unary(true));
      e = binary(Op::kPow, pos, std::move(e), std::move(r));
    }
    return e;
  }

  Result<ExprPtr> parse_unary(bool with_filter) {
    ExprPtr e;
    Levels level(*this);
    if (at_op("-") || at_op("+")) {
      CERA_RETURN_IF_ERROR(level.take());
      const Token& t = next();
      CERA_ASSIGN_OR_RETURN(ExprPtr operand, parse_unary(false));
      e = make(ExprKind::kUnary, t.pos);
      e->op = t.text == "-" ? Op::kNeg : Op::kPos;
      e->children.push_back(std::move(operand));
    } else {
      CERA_ASSIGN_OR_RETURN(e, parse_primary());
    }
    CERA_ASSIGN_OR_RETURN(e, parse_postfix(std::move(e)));
    if (with_filter) return parse_filters_and_tests(std::move(e));
    return e;
  }

  Result<ExprPtr> parse_primary() {
    const Token& t = peek();
    switch (t.kind) {
      case TokenKind::kName: {
        ++i_;
        ExprPtr e = make(ExprKind::kLiteral, t.pos);
        if (t.text == "true" || t.text == "True")
          e->literal = Value(true);
        else if (t.text == "false" || t.text == "False")
          e->literal = Value(false);
        else if (t.text == "none" || t.text == "None")
          e->literal = Value::none();
        else {
          e->kind = ExprKind::kName;
          e->name = t.text;
          if (e->name == "loop") ++loop_names_;
        }
        return e;
      }
      case TokenKind::kString: {
        ++i_;
        std::string s = t.text;
        while (peek().kind == TokenKind::kString) s += next().text;  // "a" "b" concatenates
        ExprPtr e = make(ExprKind::kLiteral, t.pos);
        e->literal = Value(std::move(s));
        return e;
      }
      case TokenKind::kInt: {
        ++i_;
        int64_t v = 0;
        auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
        if (r.ec != std::errc()) return error_at(t, "integer literal out of range");
        ExprPtr e = make(ExprKind::kLiteral, t.pos);
        e->literal = Value(v);
        return e;
      }
      case TokenKind::kFloat: {
        ++i_;
        ExprPtr e = make(ExprKind::kLiteral, t.pos);
        // strtod, not stod: 1e999 is inf (as in Python), not an exception.
        e->literal = Value(std::strtod(t.text.c_str(), nullptr));
        return e;
      }
      case TokenKind::kOperator:
        if (t.text == "(") return parse_paren();
        if (t.text == "[") return parse_list();
        if (t.text == "{") return parse_dict();
        break;
      default:
        break;
    }
    return error_at(t, "expected an expression" + found());
  }

  Result<ExprPtr> parse_paren() {
    const SourcePos pos = next().pos;
    if (at_op(")")) {
      ++i_;
      return make(ExprKind::kTuple, pos);
    }
    CERA_ASSIGN_OR_RETURN(ExprPtr first, parse_expression());
    if (at_op(")")) {
      ++i_;
      return first;
    }
    ExprPtr tuple = make(ExprKind::kTuple, pos);
    tuple->children.push_back(std::move(first));
    while (at_op(",")) {
      ++i_;
      if (at_op(")")) break;
      CERA_ASSIGN_OR_RETURN(ExprPtr e, parse_expression());
      tuple->children.push_back(std::move(e));
    }
    CERA_RETURN_IF_ERROR(expect_op(")"));
    return tuple;
  }

  Result<ExprPtr> parse_list() {
    ExprPtr list = make(ExprKind::kList, next().pos);
    while (!at_op("]")) {
      CERA_ASSIGN_OR_RETURN(ExprPtr e, parse_expression());
      list->children.push_back(std::move(e));
      if (!at_op(",")) break;
      ++i_;
    }
    CERA_RETURN_IF_ERROR(expect_op("]"));
    return list;
  }

  Result<ExprPtr> parse_dict() {
    ExprPtr dict = make(ExprKind::kDict, next().pos);
    while (!at_op("}")) {
      CERA_ASSIGN_OR_RETURN(ExprPtr k, parse_expression());
      CERA_RETURN_IF_ERROR(expect_op(":"));
      CERA_ASSIGN_OR_RETURN(ExprPtr v, parse_expression());
      dict->children.push_back(std::move(k));
      dict->children.push_back(std::move(v));
      if (!at_op(",")) break;
      ++i_;
    }
    CERA_RETURN_IF_ERROR(expect_op("}"));
    return dict;
  }

  Status parse_call_args(std::vector<Arg>& args) {
    CERA_RETURN_IF_ERROR(expect_op("("));
    while (!at_op(")")) {
      Arg a;
      if (peek().kind == TokenKind::kName && at_op("=", 1)) {
        a.keyword = next().text;
        ++i_;
      } else if (at_op("*") || at_op("**")) {
        return error_at(peek(), "unsupported: *args / **kwargs in calls");
      }
      CERA_ASSIGN_OR_RETURN(a.value, parse_expression());
      args.push_back(std::move(a));
      if (!at_op(",")) break;
      ++i_;
    }
    return expect_op(")");
  }

  Result<ExprPtr> parse_postfix(ExprPtr e) {
    Levels chain(*this);
    while (true) {
      if (at_op(".") || at_op("[") || at_op("(")) CERA_RETURN_IF_ERROR(chain.take());
      if (at_op(".")) {
        const SourcePos pos = next().pos;
        ExprPtr g = make(ExprKind::kGetAttr, pos);
        if (peek().kind == TokenKind::kInt) {  // foo.0 means foo[0] in jinja
          g->kind = ExprKind::kGetItem;
          ExprPtr idx = make(ExprKind::kLiteral, pos);
          const Token& index = next();
          int64_t v = 0;
          auto r = std::from_chars(index.text.data(), index.text.data() + index.text.size(), v);
          if (r.ec != std::errc()) return error_at(index, "integer literal out of range");
          idx->literal = Value(v);
          g->children.push_back(std::move(e));
          g->children.push_back(std::move(idx));
        } else {
          CERA_ASSIGN_OR_RETURN(g->name, expect_name());
          g->children.push_back(std::move(e));
        }
        e = std::move(g);
      } else if (at_op("[")) {
        CERA_ASSIGN_OR_RETURN(e, parse_subscript(std::move(e)));
      } else if (at_op("(")) {
        ExprPtr c = make(ExprKind::kCall, peek().pos);
        c->children.push_back(std::move(e));
        CERA_RETURN_IF_ERROR(parse_call_args(c->args));
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  Result<ExprPtr> parse_subscript(ExprPtr e) {
    const SourcePos pos = next().pos;
    ExprPtr parts[3];
    int n_colons = 0;
    for (int part = 0; part < 3; ++part) {
      if (!at_op(":") && !at_op("]")) {
        CERA_ASSIGN_OR_RETURN(parts[part], parse_expression());
      }
      if (at_op(":") && n_colons < 2) {
        ++i_;
        ++n_colons;
        continue;
      }
      break;
    }
    CERA_RETURN_IF_ERROR(expect_op("]"));
    ExprPtr g = make(n_colons == 0 ? ExprKind::kGetItem : ExprKind::kSlice, pos);
    g->children.push_back(std::move(e));
    if (n_colons == 0) {
      if (!parts[0]) return error_at(t_[i_ - 1], "empty subscript");
      g->children.push_back(std::move(parts[0]));
    } else {
      for (auto& p : parts) g->children.push_back(std::move(p));
    }
    return g;
  }

  Result<ExprPtr> parse_filters_and_tests(ExprPtr e) {
    Levels chain(*this);
    while (true) {
      if (at_op("|") || at_name("is")) CERA_RETURN_IF_ERROR(chain.take());
      if (at_op("|")) {
        const SourcePos pos = next().pos;
        ExprPtr f = make(ExprKind::kFilter, pos);
        CERA_ASSIGN_OR_RETURN(f->name, expect_name());
        if (at_op("(")) CERA_RETURN_IF_ERROR(parse_call_args(f->args));
        f->children.push_back(std::move(e));
        e = std::move(f);
      } else if (at_name("is")) {
        const SourcePos pos = next().pos;
        ExprPtr t = make(ExprKind::kTest, pos);
        if (at_name("not")) {
          ++i_;
          t->negated = true;
        }
        // Test names may be keywords (none, true, false).
        if (peek().kind != TokenKind::kName)
          return error_at(peek(), "expected a test name" + found());
        t->name = next().text;
        if (at_op("(")) {
          CERA_RETURN_IF_ERROR(parse_call_args(t->args));
        } else if ((peek().kind == TokenKind::kName && !at_name("else") && !at_name("or") &&
                    !at_name("and") && !at_name("if") && !at_name("in") && !at_name("is") &&
                    !at_name("not")) ||
                   peek().kind == TokenKind::kString || peek().kind == TokenKind::kInt ||
                   peek().kind == TokenKind::kFloat || at_op("[") || at_op("{")) {
          // `x is equalto 'y'`, `x is divisibleby 3`: one argument without parentheses.
          Arg a;
          CERA_ASSIGN_OR_RETURN(a.value, parse_primary());
          CERA_ASSIGN_OR_RETURN(a.value, parse_postfix(std::move(a.value)));
          t->args.push_back(std::move(a));
        }
        t->children.push_back(std::move(e));
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  const int max_depth_;
  int depth_ = 0;            // levels taken now (see Levels)
  uint64_t loop_names_ = 0;  // `loop` names parsed so far (for Stmt::uses_loop)
};

}  // namespace

Result<Body> parse_template(const std::vector<Token>& tokens, const TemplateLimits& limits) {
  return Parser(tokens, limits).parse_all();
}

}  // namespace cera::runtime::chat
