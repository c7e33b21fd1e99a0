#include "runtime/embed/pooling.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace cera::runtime::embed {

std::string_view pooling_name(Pooling p) {
  switch (p) {
    case Pooling::kNone: return "none";
    case Pooling::kMean: return "mean";
    case Pooling::kCls: return "cls";
    case Pooling::kLast: return "last";
  }
  return "?";
}

std::optional<Pooling> pooling_from_name(std::string_view name) {
  for (Pooling p : {Pooling::kNone, Pooling::kMean, Pooling::kCls, Pooling::kLast}) {
    if (pooling_name(p) == name) return p;
  }
  return std::nullopt;
}

std::optional<Pooling> pooling_from_gguf(int32_t type) {
  switch (type) {
    case 0: return Pooling::kNone;
    case 1: return Pooling::kMean;
    case 2: return Pooling::kCls;
    case 3: return Pooling::kLast;
    default: return std::nullopt;
  }
}

std::vector<float> pool(std::span<const float> hidden, int32_t n_embd, Pooling p) {
  const size_t width = static_cast<size_t>(n_embd);
  CERA_CHECK(width > 0 && hidden.size() % width == 0 && !hidden.empty());
  const size_t n_tokens = hidden.size() / width;
  switch (p) {
    case Pooling::kNone: return {hidden.begin(), hidden.end()};
    case Pooling::kCls: return {hidden.begin(), hidden.begin() + static_cast<std::ptrdiff_t>(width)};
    case Pooling::kLast: return {hidden.end() - static_cast<std::ptrdiff_t>(width), hidden.end()};
    case Pooling::kMean: break;
  }
  // Summed in double: a long text's mean should not depend on the order of its tokens.
  std::vector<double> sum(width, 0.0);
  for (size_t t = 0; t < n_tokens; ++t) {
    for (size_t i = 0; i < width; ++i) sum[i] += hidden[t * width + i];
  }
  std::vector<float> out(width);
  for (size_t i = 0; i < width; ++i) out[i] = static_cast<float>(sum[i] / static_cast<double>(n_tokens));
  return out;
}

void l2_normalize(std::span<float> values, int32_t n_embd) {
  const size_t width = static_cast<size_t>(n_embd);
  CERA_CHECK(width > 0 && values.size() % width == 0);
  for (size_t base = 0; base < values.size(); base += width) {
    double sq = 0.0;
    for (size_t i = 0; i < width; ++i) sq += double(values[base + i]) * values[base + i];
    const double norm = std::max(std::sqrt(sq), 1e-12);
    for (size_t i = 0; i < width; ++i) values[base + i] = static_cast<float>(values[base + i] / norm);
  }
}

}  // namespace cera::runtime::embed
