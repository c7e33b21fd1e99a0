#include "ops/top_k.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"

namespace cera::ops {

float select_top_k(std::span<const float> logits, const TopKParams& params, std::span<int32_t> ids,
                   std::span<float> values) {
  const int64_t n = static_cast<int64_t>(logits.size());
  const int32_t k = params.k;
  CERA_CHECK(k >= 1 && k <= n && static_cast<size_t>(k) <= ids.size() && static_cast<size_t>(k) <= values.size());
  std::vector<float> v(logits.begin(), logits.end());
  if (params.softcap > 0.0f) {
    // A masked logit (Backend::mask_logits: -inf) stays forbidden.
    for (float& x : v) x = std::isinf(x) && x < 0 ? x : params.softcap * std::tanh(x / params.softcap);
  }
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) order[i] = i;
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  for (int32_t j = 0; j < k; ++j) {
    ids[j] = order[j];
    values[j] = v[order[j]];
  }
  const float m = values[0];
  double sum = 0;
  for (float x : v) sum += std::exp(static_cast<double>(x) - m);
  return m + static_cast<float>(std::log(sum));
}

}  // namespace cera::ops
