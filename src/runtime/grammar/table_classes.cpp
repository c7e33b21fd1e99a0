// Refinement: class_0 separates states by rule (its FOLLOW set decides escapes), finality and
// exact call edges (a call continues in the callee and then at a return state, so equal calls
// make everything after them equal); class_k adds each byte edge's set and target's class_{k-1}.
// A state's own previous class is part of its signature, so partitions only refine and a round
// that splits nothing ends the loop early (most grammars settle in a few rounds).
#include "runtime/grammar/table_classes.h"

#include <algorithm>
#include <numeric>

namespace cera::runtime::grammar {
namespace {

// Dense ids for equal signatures (exact: signatures are compared, never only hashed).
uint32_t number(std::vector<std::vector<uint64_t>>& sig, std::vector<uint32_t>& out) {
  std::vector<uint32_t> order(sig.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return sig[a] < sig[b]; });
  uint32_t next = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i > 0 && sig[order[i]] != sig[order[i - 1]]) ++next;
    out[order[i]] = next;
  }
  return order.empty() ? 0 : next + 1;
}

}  // namespace

std::vector<uint32_t> table_classes(const Grammar& g, uint32_t depth) {
  const auto& states = g.states();
  const size_t n = states.size();
  std::vector<std::vector<uint64_t>> sig(n);
  std::vector<uint32_t> cls(n), prev(n);
  for (size_t s = 0; s < n; ++s) {
    const NfaState& st = states[s];
    sig[s] = {st.rule, st.final ? 1u : 0u};
    for (uint32_t c = st.calls_begin; c < st.calls_end; ++c) {
      sig[s].push_back((uint64_t{g.call_edges()[c].rule} << 32) | g.call_edges()[c].ret);
    }
  }
  uint32_t count = number(sig, cls);
  std::vector<std::pair<uint32_t, uint32_t>> edges;  // (target class, edge index)
  for (uint32_t round = 0; round < depth; ++round) {
    prev = cls;
    for (size_t s = 0; s < n; ++s) {
      const NfaState& st = states[s];
      edges.clear();
      for (uint32_t e = st.bytes_begin; e < st.bytes_end; ++e) edges.push_back({prev[g.byte_edges()[e].target], e});
      std::sort(edges.begin(), edges.end(), [&](const auto& a, const auto& b) {
        if (a.first != b.first) return a.first < b.first;
        const ByteSet& x = g.byte_edges()[a.second].on;
        const ByteSet& y = g.byte_edges()[b.second].on;
        return std::lexicographical_compare(x.words, x.words + 4, y.words, y.words + 4);
      });
      sig[s].assign(1, prev[s]);
      for (const auto& [target, e] : edges) {
        const ByteSet& on = g.byte_edges()[e].on;
        sig[s].insert(sig[s].end(), on.words, on.words + 4);
        sig[s].push_back(target);
      }
    }
    const uint32_t refined = number(sig, cls);
    if (refined == count) break;
    count = refined;
  }
  return cls;
}

}  // namespace cera::runtime::grammar
