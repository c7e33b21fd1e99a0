// Whole-grammar analyses by fixpoint over the compiled automaton: which states can end their
// rule without consuming input, which can end at all, FIRST bytes, FOLLOW bytes per rule. Left
// recursion is refused because a stack machine would push forever on it; a rule that can never
// end is refused because every path through it would be a dead end that masks cannot foresee.
#include <string>
#include <vector>

#include "runtime/grammar/grammar_compile.h"

namespace cera::runtime::grammar {
namespace {

// The calls a rule can make before consuming any byte (through nullable callees).
std::vector<std::vector<uint32_t>> left_calls(const GrammarParts& g, const std::vector<char>& nullend) {
  const auto& states = g.states;
  std::vector<std::vector<uint32_t>> out(g.rules.size());
  std::vector<uint32_t> stamp(states.size(), UINT32_MAX);
  for (uint32_t r = 0; r < g.rules.size(); ++r) {
    std::vector<uint32_t> todo{g.rules[r].start};
    stamp[g.rules[r].start] = r;
    while (!todo.empty()) {
      const NfaState& s = states[todo.back()];
      todo.pop_back();
      for (uint32_t c = s.calls_begin; c < s.calls_end; ++c) {
        const CallEdge& call = g.call_edges[c];
        out[r].push_back(call.rule);
        if (nullend[g.rules[call.rule].start] && stamp[call.ret] != r) {
          stamp[call.ret] = r;
          todo.push_back(call.ret);
        }
      }
    }
  }
  return out;
}

Status refuse_left_recursion(const GrammarParts& g, const std::vector<std::vector<uint32_t>>& calls) {
  const uint32_t n = static_cast<uint32_t>(g.rules.size());
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  for (uint32_t root = 0; root < n; ++root) {
    if (color[root] != 0) continue;
    std::vector<std::pair<uint32_t, size_t>> path{{root, 0}};
    color[root] = 1;
    while (!path.empty()) {
      auto& [v, next] = path.back();
      if (next < calls[v].size()) {
        const uint32_t w = calls[v][next++];
        if (color[w] == 1) {
          std::string cycle;
          size_t from = 0;
          while (path[from].first != w) ++from;
          for (size_t i = from; i < path.size(); ++i) cycle += g.rules[path[i].first].name + " -> ";
          cycle += g.rules[w].name;
          return invalid_argument("gbnf " + g.rules[w].at.text() + ": left recursion: rule '" +
                                  g.rules[w].name + "' can reach itself without consuming input (" +
                                  cycle + ")");
        }
        if (color[w] == 0) {
          color[w] = 1;
          path.push_back({w, 0});
        }
        continue;
      }
      color[v] = 2;
      path.pop_back();
    }
  }
  return ok_status();
}

// Names a rule that can never end, preferring one on a cycle of such rules (the cause) over
// one that merely calls them (`root ::= x` with an endless x names x).
Status refuse_endless(const GrammarParts& g, const std::vector<char>& ends) {
  const uint32_t n = static_cast<uint32_t>(g.rules.size());
  std::vector<std::vector<uint32_t>> calls(n);
  for (const NfaState& s : g.states) {
    for (uint32_t c = s.calls_begin; c < s.calls_end; ++c) {
      const uint32_t callee = g.call_edges[c].rule;
      if (!ends[g.rules[callee].start]) calls[s.rule].push_back(callee);
    }
  }
  auto on_cycle = [&](uint32_t r) {
    std::vector<char> seen(n, 0);
    std::vector<uint32_t> todo(calls[r].begin(), calls[r].end());
    while (!todo.empty()) {
      const uint32_t v = todo.back();
      todo.pop_back();
      if (v == r) return true;
      if (seen[v]) continue;
      seen[v] = 1;
      todo.insert(todo.end(), calls[v].begin(), calls[v].end());
    }
    return false;
  };
  const CompiledRule* culprit = nullptr;
  for (uint32_t r = 0; r < n; ++r) {
    if (ends[g.rules[r].start]) continue;
    if (culprit == nullptr) culprit = &g.rules[r];
    if (on_cycle(r)) {
      culprit = &g.rules[r];
      break;
    }
  }
  if (culprit == nullptr) return ok_status();
  return invalid_argument("gbnf " + culprit->at.text() + ": rule '" + culprit->name +
                          "' can never end: every way through it needs a rule that never ends "
                          "(recursion without a way out)");
}

}  // namespace

Status check_and_analyze(GrammarParts& g) {
  const auto& states = g.states;
  const size_t n = states.size();
  auto start_of = [&](const CallEdge& c) { return g.rules[c.rule].start; };

  // nullend: the state can reach its rule's end consuming nothing; first: its FIRST bytes.
  std::vector<char> nullend(n, 0);
  std::vector<ByteSet> first(n);
  for (size_t s = 0; s < n; ++s) {
    nullend[s] = states[s].final;
    for (uint32_t e = states[s].bytes_begin; e < states[s].bytes_end; ++e) first[s].merge(g.byte_edges[e].on);
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t s = 0; s < n; ++s) {
      for (uint32_t c = states[s].calls_begin; c < states[s].calls_end; ++c) {
        const CallEdge& call = g.call_edges[c];
        const uint32_t callee = start_of(call);
        ByteSet f = first[s];
        f.merge(first[callee]);
        if (nullend[callee]) {
          f.merge(first[call.ret]);
          if (nullend[call.ret] && !nullend[s]) nullend[s] = 1, changed = true;
        }
        if (!(f == first[s])) first[s] = f, changed = true;
      }
    }
  }

  // Every rule must be able to end (through rules that can end).
  std::vector<char> ends(n, 0);
  for (size_t s = 0; s < n; ++s) ends[s] = states[s].final;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t s = n; s-- > 0;) {
      if (ends[s]) continue;
      bool e = false;
      for (uint32_t b = states[s].bytes_begin; b < states[s].bytes_end && !e; ++b) e = ends[g.byte_edges[b].target];
      for (uint32_t c = states[s].calls_begin; c < states[s].calls_end && !e; ++c) {
        e = ends[start_of(g.call_edges[c])] && ends[g.call_edges[c].ret];
      }
      if (e) ends[s] = 1, changed = true;
    }
  }
  CERA_RETURN_IF_ERROR(refuse_endless(g, ends));

  CERA_RETURN_IF_ERROR(refuse_left_recursion(g, left_calls(g, nullend)));

  // FOLLOW bytes of each rule, and whether the input may end right after it.
  g.follow.assign(g.rules.size(), ByteSet{});
  g.ends_input.assign(g.rules.size(), false);
  g.ends_input[g.root] = true;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t s = 0; s < n; ++s) {
      const uint32_t q = states[s].rule;
      for (uint32_t c = states[s].calls_begin; c < states[s].calls_end; ++c) {
        const CallEdge& call = g.call_edges[c];
        ByteSet f = g.follow[call.rule];
        f.merge(first[call.ret]);
        if (nullend[call.ret]) {
          f.merge(g.follow[q]);
          if (g.ends_input[q] && !g.ends_input[call.rule]) g.ends_input[call.rule] = true, changed = true;
        }
        if (!(f == g.follow[call.rule])) g.follow[call.rule] = f, changed = true;
      }
    }
  }
  return ok_status();
}

}  // namespace cera::runtime::grammar
