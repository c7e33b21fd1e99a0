// Thompson construction of each compiled rule (epsilon edges and all), then epsilon removal
// into the final state arrays. Repetition {m,n} is unrolled (m copies, then n-m optional ones
// that may each exit), so counts are exact without counters on the stack; max_states bounds it.
#include "runtime/grammar/grammar_compile.h"

#include <algorithm>
#include <unordered_map>

#include "runtime/grammar/utf8_ranges.h"

namespace cera::runtime::grammar {
namespace {

struct EpsState {
  std::vector<ByteEdge> bytes;
  std::vector<CallEdge> calls;  // ret is a local state id
  std::vector<uint32_t> eps;
};

// What every rule builder needs: the AST, which rules are inlined, compiled ids.
struct CompileContext {
  const GbnfAst& ast;
  const GrammarLimits& limits;
  std::unordered_map<std::string, uint32_t> index;  // rule name -> AST rule index
  std::vector<bool> inlined;
  std::vector<uint32_t> compiled_id;  // AST rule -> Grammar rule (if compiled)
  uint64_t total_states = 0;
};

class RuleBuilder {
 public:
  explicit RuleBuilder(CompileContext& ctx) : ctx_(ctx) {}

  uint32_t new_state() {
    if (++ctx_.total_states > ctx_.limits.max_states && error_.ok()) {
      error_ = out_of_range("gbnf: the compiled grammar needs more than " +
                            std::to_string(ctx_.limits.max_states) +
                            " automaton states (GrammarLimits::max_states)");
    }
    states_.emplace_back();
    return static_cast<uint32_t>(states_.size() - 1);
  }

  uint32_t emit(const Expr& e, uint32_t entry) {
    if (!error_.ok()) return entry;
    switch (e.kind) {
      case ExprKind::kLiteral: {
        uint32_t cur = entry;
        for (unsigned char c : e.text) {
          const uint32_t next = new_state();
          ByteEdge edge{.target = next};
          edge.on.set(c);
          states_[cur].bytes.push_back(edge);
          cur = next;
        }
        return cur;
      }
      case ExprKind::kCharClass: return emit_class(e, entry);
      case ExprKind::kRuleRef: {
        const uint32_t r = ctx_.index.at(e.text);
        if (ctx_.inlined[r]) return emit(ctx_.ast.rules[r].body, entry);
        const uint32_t ret = new_state();
        states_[entry].calls.push_back({.rule = ctx_.compiled_id[r], .ret = ret});
        return ret;
      }
      case ExprKind::kSequence: {
        uint32_t cur = entry;
        for (const Expr& c : e.children) cur = emit(c, cur);
        return cur;
      }
      case ExprKind::kChoice: {
        const uint32_t exit = new_state();
        for (const Expr& c : e.children) {
          const uint32_t s = new_state();
          states_[entry].eps.push_back(s);
          states_[emit(c, s)].eps.push_back(exit);
        }
        return exit;
      }
      case ExprKind::kRepeat: {
        uint32_t cur = entry;
        for (uint32_t i = 0; i < e.min && error_.ok(); ++i) cur = emit(e.children[0], cur);
        if (e.max == kUnbounded) {
          // A fresh loop head: edges into it never reach the entry's other edges.
          const uint32_t loop = new_state();
          states_[cur].eps.push_back(loop);
          states_[emit(e.children[0], loop)].eps.push_back(loop);
          return loop;
        }
        const uint32_t exit = new_state();
        states_[cur].eps.push_back(exit);
        for (uint32_t i = e.min; i < e.max && error_.ok(); ++i) {
          cur = emit(e.children[0], cur);
          states_[cur].eps.push_back(exit);
        }
        return exit;
      }
    }
    return entry;
  }

  // Byte sequences of the class share their leading states where the byte ranges are equal
  // (a trie), so `[α-ω]` is one lead byte then a range, not one path per sequence.
  uint32_t emit_class(const Expr& e, uint32_t entry) {
    const uint32_t first = new_state();
    states_[entry].eps.push_back(first);
    const uint32_t exit = new_state();
    struct Made {
      uint32_t from, to;
      ByteSet on;
    };
    std::vector<Made> made;
    for (const Utf8Sequence& seq : utf8_sequences(e.ranges)) {
      uint32_t cur = first;
      for (int i = 0; i < seq.length; ++i) {
        ByteSet on;
        on.set_range(seq.bytes[i].lo, seq.bytes[i].hi);
        if (i + 1 == seq.length) {
          states_[cur].bytes.push_back({.on = on, .target = exit});
          break;
        }
        auto it = std::find_if(made.begin(), made.end(),
                               [&](const Made& m) { return m.from == cur && m.on == on; });
        if (it != made.end()) {
          cur = it->to;
          continue;
        }
        const uint32_t next = new_state();
        states_[cur].bytes.push_back({.on = on, .target = next});
        made.push_back({cur, next, on});
        cur = next;
      }
    }
    return exit;
  }

  // Removes epsilon edges and unreachable states, appending the rule's states to `g`.
  Status finish(uint32_t start, uint32_t final_state, uint32_t rule_id, GrammarParts& g) {
    CERA_RETURN_IF_ERROR(error_);
    const uint32_t n = static_cast<uint32_t>(states_.size());
    std::vector<uint32_t> global(n, kNone);
    std::vector<uint32_t> order{start};
    global[start] = static_cast<uint32_t>(g.states.size());
    std::vector<uint32_t> stamp(n, kNone), stack;
    std::vector<uint32_t> closure;
    struct Pending {
      std::vector<ByteEdge> bytes;
      std::vector<CallEdge> calls;
      bool final = false;
    };
    std::vector<Pending> pending;
    uint64_t pending_edges = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      const uint32_t s = order[i];
      closure.clear();
      stack.assign(1, s);
      stamp[s] = s;
      while (!stack.empty()) {
        const uint32_t x = stack.back();
        stack.pop_back();
        closure.push_back(x);
        for (uint32_t y : states_[x].eps) {
          if (stamp[y] != s) stamp[y] = s, stack.push_back(y);
        }
      }
      Pending p;
      for (uint32_t x : closure) {
        p.final = p.final || x == final_state;
        for (const ByteEdge& b : states_[x].bytes) p.bytes.push_back(b);
        for (const CallEdge& c : states_[x].calls) p.calls.push_back(c);
      }
      auto reach = [&](uint32_t t) {
        if (global[t] == kNone) {
          global[t] = static_cast<uint32_t>(g.states.size() + order.size());
          order.push_back(t);
        }
      };
      for (const ByteEdge& b : p.bytes) reach(b.target);
      for (const CallEdge& c : p.calls) reach(c.ret);
      pending_edges += p.bytes.size() + p.calls.size();
      pending.push_back(std::move(p));
      if (g.byte_edges.size() + g.call_edges.size() + pending_edges > 4 * ctx_.limits.max_states) {
        return out_of_range("gbnf: the compiled grammar needs more than " +
                            std::to_string(4 * ctx_.limits.max_states) +
                            " automaton edges (4 x GrammarLimits::max_states)");
      }
    }
    for (Pending& p : pending) {
      NfaState st{.rule = rule_id, .final = p.final};
      // One edge per target, its byte sets united.
      for (ByteEdge& b : p.bytes) b.target = global[b.target];
      std::sort(p.bytes.begin(), p.bytes.end(),
                [](const ByteEdge& a, const ByteEdge& b) { return a.target < b.target; });
      st.bytes_begin = static_cast<uint32_t>(g.byte_edges.size());
      for (const ByteEdge& b : p.bytes) {
        if (g.byte_edges.size() > st.bytes_begin && g.byte_edges.back().target == b.target) {
          g.byte_edges.back().on.merge(b.on);
        } else {
          g.byte_edges.push_back(b);
        }
      }
      st.bytes_end = static_cast<uint32_t>(g.byte_edges.size());
      for (CallEdge& c : p.calls) c.ret = global[c.ret];
      std::sort(p.calls.begin(), p.calls.end(), [](const CallEdge& a, const CallEdge& b) {
        return a.rule != b.rule ? a.rule < b.rule : a.ret < b.ret;
      });
      p.calls.erase(std::unique(p.calls.begin(), p.calls.end(),
                                [](const CallEdge& a, const CallEdge& b) {
                                  return a.rule == b.rule && a.ret == b.ret;
                                }),
                    p.calls.end());
      st.calls_begin = static_cast<uint32_t>(g.call_edges.size());
      g.call_edges.insert(g.call_edges.end(), p.calls.begin(), p.calls.end());
      st.calls_end = static_cast<uint32_t>(g.call_edges.size());
      st.exit_only = st.final && !st.has_bytes() && st.calls_end == st.calls_begin;
      g.states.push_back(st);
    }
    return ok_status();
  }

  static constexpr uint32_t kNone = UINT32_MAX;

 private:
  CompileContext& ctx_;
  std::vector<EpsState> states_;
  Status error_;
};

void collect_refs(const Expr& e, std::vector<const Expr*>& out) {
  if (e.kind == ExprKind::kRuleRef) out.push_back(&e);
  for (const Expr& c : e.children) collect_refs(c, out);
}

uint64_t sat_add(uint64_t a, uint64_t b) { return std::min<uint64_t>(a + b, uint64_t{1} << 40); }
uint64_t sat_mul(uint64_t a, uint64_t b) {
  if (a != 0 && b > (uint64_t{1} << 40) / a) return uint64_t{1} << 40;
  return a * b;
}

// An upper bound on the states `e` becomes (callees counted only if inlined).
uint64_t estimate_states(const Expr& e, const CompileContext& ctx, const std::vector<uint64_t>& size) {
  switch (e.kind) {
    case ExprKind::kLiteral: return e.text.size();
    case ExprKind::kCharClass: {
      uint64_t n = 2;
      for (const Utf8Sequence& s : utf8_sequences(e.ranges)) n += s.length;
      return n;
    }
    case ExprKind::kRuleRef: {
      const uint32_t r = ctx.index.at(e.text);
      return ctx.inlined[r] ? size[r] : 1;
    }
    case ExprKind::kSequence:
    case ExprKind::kChoice: {
      uint64_t n = e.children.size() + 1;
      for (const Expr& c : e.children) n = sat_add(n, estimate_states(c, ctx, size));
      return n;
    }
    case ExprKind::kRepeat: {
      const uint64_t child = estimate_states(e.children[0], ctx, size);
      const uint64_t copies = e.max == kUnbounded ? uint64_t{e.min} + 1 : e.max;
      return sat_add(sat_mul(child, copies), 1);
    }
  }
  return 1;
}

// Strongly connected components of the reference graph (iterative Tarjan), callees first.
std::vector<std::vector<uint32_t>> components(const std::vector<std::vector<uint32_t>>& edges) {
  const uint32_t n = static_cast<uint32_t>(edges.size());
  constexpr uint32_t kUnset = UINT32_MAX;
  std::vector<uint32_t> index(n, kUnset), low(n, 0);
  std::vector<bool> on_stack(n, false);
  std::vector<uint32_t> stack;
  std::vector<std::vector<uint32_t>> out;
  uint32_t next = 0;
  struct Frame {
    uint32_t v;
    size_t edge;
  };
  for (uint32_t root = 0; root < n; ++root) {
    if (index[root] != kUnset) continue;
    std::vector<Frame> call{{root, 0}};
    index[root] = low[root] = next++;
    stack.push_back(root);
    on_stack[root] = true;
    while (!call.empty()) {
      Frame& f = call.back();
      if (f.edge < edges[f.v].size()) {
        const uint32_t w = edges[f.v][f.edge++];
        if (index[w] == kUnset) {
          index[w] = low[w] = next++;
          stack.push_back(w);
          on_stack[w] = true;
          call.push_back({w, 0});
        } else if (on_stack[w]) {
          low[f.v] = std::min(low[f.v], index[w]);
        }
        continue;
      }
      const uint32_t v = f.v;
      call.pop_back();
      if (!call.empty()) low[call.back().v] = std::min(low[call.back().v], low[v]);
      if (low[v] == index[v]) {
        std::vector<uint32_t> comp;
        uint32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = false;
          comp.push_back(w);
        } while (w != v);
        out.push_back(std::move(comp));
      }
    }
  }
  return out;
}

}  // namespace

Result<std::shared_ptr<const Grammar>> compile_ast(const GbnfAst& ast, std::string_view root,
                                                   const GrammarLimits& limits) {
  CompileContext ctx{.ast = ast, .limits = limits};
  const uint32_t n = static_cast<uint32_t>(ast.rules.size());
  for (uint32_t r = 0; r < n; ++r) {
    auto [it, fresh] = ctx.index.emplace(ast.rules[r].name, r);
    if (!fresh) {
      return invalid_argument("gbnf " + ast.rules[r].at.text() + ": rule '" + ast.rules[r].name +
                              "' is defined twice (first at " + ast.rules[it->second].at.text() + ")");
    }
  }
  std::vector<std::vector<uint32_t>> edges(n);
  std::vector<bool> self_ref(n, false);
  for (uint32_t r = 0; r < n; ++r) {
    std::vector<const Expr*> refs;
    collect_refs(ast.rules[r].body, refs);
    for (const Expr* ref : refs) {
      auto it = ctx.index.find(ref->text);
      if (it == ctx.index.end()) {
        return invalid_argument("gbnf " + ref->at.text() + ": undefined rule '" + ref->text +
                                "' (no '" + ref->text + " ::= ...' in the grammar)");
      }
      edges[r].push_back(it->second);
      if (it->second == r) self_ref[r] = true;
    }
  }
  auto root_it = ctx.index.find(std::string(root));
  if (root_it == ctx.index.end()) {
    return invalid_argument("gbnf: undefined root rule '" + std::string(root) + "' (no '" +
                            std::string(root) + " ::= ...' in the grammar)");
  }
  // Inline small non-recursive rules, deciding callees first.
  ctx.inlined.assign(n, false);
  std::vector<uint64_t> size(n, 1);
  for (const std::vector<uint32_t>& comp : components(edges)) {
    if (comp.size() != 1 || self_ref[comp[0]]) continue;
    const uint32_t r = comp[0];
    size[r] = estimate_states(ast.rules[r].body, ctx, size);
    ctx.inlined[r] = size[r] <= kInlineStateLimit && r != root_it->second;
  }
  // Compile the root and every rule reachable from it that is not inlined.
  GrammarParts parts;
  ctx.compiled_id.assign(n, RuleBuilder::kNone);
  std::vector<uint32_t> todo{root_it->second}, compiled;
  std::vector<bool> seen(n, false);
  seen[root_it->second] = true;
  while (!todo.empty()) {
    const uint32_t r = todo.back();
    todo.pop_back();
    if (!ctx.inlined[r]) {
      ctx.compiled_id[r] = static_cast<uint32_t>(compiled.size());
      compiled.push_back(r);
    }
    for (uint32_t w : edges[r]) {
      if (!seen[w]) seen[w] = true, todo.push_back(w);
    }
  }
  parts.root = 0;
  for (uint32_t id = 0; id < compiled.size(); ++id) {
    const RuleDef& def = ast.rules[compiled[id]];
    RuleBuilder b(ctx);
    const uint32_t start = b.new_state();
    const uint32_t final_state = b.emit(def.body, start);
    parts.rules.push_back({.name = def.name, .at = def.at, .start = static_cast<uint32_t>(parts.states.size())});
    CERA_RETURN_IF_ERROR(b.finish(start, final_state, id, parts));
  }
  CERA_RETURN_IF_ERROR(check_and_analyze(parts));
  return std::make_shared<const Grammar>(std::move(parts));
}

}  // namespace cera::runtime::grammar
