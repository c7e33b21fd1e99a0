// The truncation of a first prompt longer than the context (llama-server's rule), shared by
// Session's appends and LoopSession: its first n_keep tokens (at most half the context; at least
// BOS when it starts with one) and its last (n_ctx - those) / 2 tokens, so half the context is
// left for generation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace cera::runtime {

// Writes the kept tokens into `kept`; returns how many were dropped. Precondition: tokens.size() > n_ctx.
inline int64_t truncate_long_prompt(std::span<const int32_t> tokens, int64_t n_ctx, int64_t n_keep, int32_t bos,
                                    std::vector<int32_t>& kept) {
  int64_t head = std::clamp<int64_t>(n_keep, 0, n_ctx / 2);
  if (head == 0 && tokens[0] == bos) head = 1;
  const int64_t tail = std::max<int64_t>(1, (n_ctx - head) / 2);
  kept.assign(tokens.begin(), tokens.begin() + head);
  kept.insert(kept.end(), tokens.end() - tail, tokens.end());
  return static_cast<int64_t>(tokens.size()) - head - tail;
}

}  // namespace cera::runtime
