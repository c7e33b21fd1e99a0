// Weighted least-squares scale searches for the K-quant quantizers (see scale_search.h).
// Sums are float, as in llama.cpp's reference, so that ties between candidate fits resolve the
// same way; the closed-form fit makes each candidate optimal for its own codes.
#include "quant/k_quants/scale_search.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "quant/internal.h"
#include "quant/k_quants/scale_pack.h"

namespace cera::quant::detail {
namespace {

constexpr float kGroupMaxEps = 1e-15f;  // below this a group is treated as all zero

float weighted_error(const float* x, const float* weights, const uint8_t* codes, int n, float scale,
                     float min) {
  float err = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float diff = scale * codes[i] + min - x[i];
    err += weights[i] * diff * diff;
  }
  return err;
}

}  // namespace

AffineFit fit_affine_codes(const float* x, const float* weights, int n, int nmax, ScaleGrid grid,
                           uint8_t* codes) {
  float min = x[0];
  float max = x[0];
  float sum_w = 0.0f;
  float sum_x = 0.0f;
  for (int i = 0; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  min = std::min(min, 0.0f);  // the format subtracts a non-negative dmin * m: min <= 0
  if (max == min) {
    std::fill(codes, codes + n, uint8_t{0});
    return {0.0f, -min};
  }

  // Start from the plain min/max rounding.
  const float range = max - min;
  float scale = range / static_cast<float>(nmax);
  {
    const float iscale = static_cast<float>(nmax) / range;
    for (int i = 0; i < n; ++i) {
      codes[i] = static_cast<uint8_t>(nearest_clamped(iscale * (x[i] - min), 0, nmax));
    }
    scale = 1.0f / iscale;
  }
  float best_error = weighted_error(x, weights, codes, n, scale, min);

  uint8_t trial[256];
  assert(n <= 256);
  for (int k = 0; k <= grid.nstep; ++k) {
    const float iscale = (grid.rmin + grid.rdelta * static_cast<float>(k) + nmax) / range;
    float sum_l = 0.0f;
    float sum_l2 = 0.0f;
    float sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = nearest_clamped(iscale * (x[i] - min), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      sum_l += weights[i] * l;
      sum_l2 += weights[i] * l * l;
      sum_xl += weights[i] * l * x[i];
    }
    // Normal equations of min_{s,m} sum w (s*l + m - x)^2.
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0.0f)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0.0f) {  // infeasible (min must be <= 0): refit the scale with min = 0
      this_min = 0.0f;
      this_scale = sum_xl / sum_l2;
    }
    const float err = weighted_error(x, weights, trial, n, this_scale, this_min);
    if (err < best_error) {
      std::copy(trial, trial + n, codes);
      best_error = err;
      scale = this_scale;
      min = this_min;
    }
  }
  return {scale, -min};
}

float fit_symmetric_codes(const float* x, int n, int nmax, uint8_t* codes) {
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    std::fill(codes, codes + n, uint8_t{0});
    return 0.0f;
  }
  // For fixed codes l the best scale is sum(w x l) / sum(w l^2) and the error falls as
  // sum(w x l)^2 / sum(w l^2) grows, so candidates compare by that ratio.
  const auto try_scale = [&](float iscale, uint8_t* out, float& sum_lx, float& sum_l2) {
    sum_lx = 0.0f;
    sum_l2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = nearest_clamped(iscale * x[i], -nmax, nmax - 1);
      if (out != nullptr) out[i] = static_cast<uint8_t>(l + nmax);
      const float w = x[i] * x[i];
      sum_lx += w * x[i] * l;
      sum_l2 += w * l * l;
    }
  };
  float sum_lx;
  float sum_l2;
  try_scale(-static_cast<float>(nmax) / max, codes, sum_lx, sum_l2);
  float scale = sum_l2 > 0.0f ? sum_lx / sum_l2 : 0.0f;
  float best = scale * sum_lx;
  for (int k = -9; k <= 9; ++k) {
    if (k == 0) continue;
    const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(k)) / max;
    try_scale(iscale, nullptr, sum_lx, sum_l2);
    if (sum_l2 > 0.0f && sum_lx * sum_lx > best * sum_l2) {
      try_scale(iscale, codes, sum_lx, sum_l2);
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

void quantize_affine_superblock(const float* x, int nmax, ScaleGrid grid, AffineSuperBlock& out) {
  constexpr int kSub = 32;
  float scales[kQK256 / kSub];
  float mins[kQK256 / kSub];
  float max_scale = 0.0f;
  float max_min = 0.0f;
  for (int s = 0; s < kQK256 / kSub; ++s) {
    const float* xs = x + kSub * s;
    float sum_x2 = 0.0f;
    for (int l = 0; l < kSub; ++l) sum_x2 += xs[l] * xs[l];
    const float rms = std::sqrt(sum_x2 / kSub);
    float weights[kSub];
    for (int l = 0; l < kSub; ++l) weights[l] = rms + std::fabs(xs[l]);
    const AffineFit fit = fit_affine_codes(xs, weights, kSub, nmax, grid, out.codes + kSub * s);
    scales[s] = fit.scale;
    mins[s] = fit.neg_min;
    max_scale = std::max(max_scale, fit.scale);
    max_min = std::max(max_min, fit.neg_min);
  }

  // Second level: 6-bit scales of the scales and of the mins.
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  uint8_t ls[8];
  uint8_t lm[8];
  for (int s = 0; s < 8; ++s) {
    ls[s] = static_cast<uint8_t>(nearest_clamped(inv_scale * scales[s], 0, 63));
    lm[s] = static_cast<uint8_t>(nearest_clamped(inv_min * mins[s], 0, 63));
  }
  pack_scale_min_k4(ls, lm, out.scales);
  out.d = float_to_half(max_scale / 63.0f);
  out.dmin = float_to_half(max_min / 63.0f);

  // Re-round every code against the scale and min as dequantization will see them.
  const float d = fp16(out.d);
  const float dmin = fp16(out.dmin);
  for (int s = 0; s < 8; ++s) {
    const float ds = d * static_cast<float>(ls[s]);
    if (ds == 0.0f) continue;  // the codes do not matter: every value is -dmin * m
    const float dm = dmin * static_cast<float>(lm[s]);
    for (int l = 0; l < kSub; ++l) {
      const int e = kSub * s + l;
      out.codes[e] = static_cast<uint8_t>(nearest_clamped((x[e] + dm) / ds, 0, nmax));
    }
  }
}

}  // namespace cera::quant::detail
