// decode_cost (decode_cost.h).
#include "decode_cost.h"

#include <string>
#include <string_view>

namespace cera::cli {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

DecodeCost decode_cost(const format::GgufFile& f, const model::HParams& hp) {
  DecodeCost c;
  for (const auto& t : f.tensors()) {
    const bool experts = hp.n_expert > 0 && ends_with(t.name, "_exps.weight") && t.shape.size() == 3 &&
                         t.shape[2] == static_cast<uint64_t>(hp.n_expert);
    const uint64_t used = experts ? static_cast<uint64_t>(hp.n_expert_used) : 1;
    const uint64_t of = experts ? t.shape[2] : 1;
    c.weight_bytes += t.n_bytes / of * used;
    c.weight_elements += t.n_elements() / of * used;
  }
  const auto* embd = f.find_tensor("token_embd.weight");
  if (embd != nullptr && f.find_tensor("output.weight") != nullptr) {
    c.weight_bytes -= embd->n_bytes;
    c.weight_elements -= embd->n_elements();
  }
  return c;
}

}  // namespace cera::cli
