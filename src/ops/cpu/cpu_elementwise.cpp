// Row-wise and elementwise verbs: rms_norm, layer_norm, rope, activation, gated_activation,
// add_scaled, scale. Plain C++
// (the compiler vectorizes the baseline loops) except GELU, which takes the kernel level's vector
// erf/tanh forms (kernels.h); these move n_embd or n_ff floats per token, which
// is small next to the matmuls, so they are split across threads only for large batches.
// RoPE angles are computed in double: theta grows with the position, and a float angle at
// position 10^4 would already be off by ~1e-3 rad.
#include <algorithm>
#include <cmath>
#include <string>

#include "ops/cpu/cpu_context.h"

namespace cera::ops::cpu {
namespace {

constexpr int64_t kParallelElements = 1 << 15;  // below this a verb runs on the calling thread

// Calls fn(row) for every row of an [n, rows] problem, in parallel when it is large.
template <class Fn>
void for_rows(CpuContext& ctx, int64_t n_rows, int64_t row_elems, Fn&& fn) {
  const int64_t grain = n_rows * row_elems < kParallelElements
                            ? n_rows
                            : std::max<int64_t>(1, kParallelElements / std::max<int64_t>(row_elems, 1));
  ctx.pool.parallel_for(n_rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) fn(r);
  });
}

void check_same_shape(const TensorView& a, const TensorView& b, const char* what) {
  CERA_CHECK_MSG(a.cols() == b.cols() && a.rows() == b.rows(), std::string(what) + ": shape mismatch");
}

// o[i] = act(x[i]) for i < n (o == x allowed). GELU runs through the level's vector kernels
// (kernels.h): libm's scalar erff was 12 % of a BERT embedding run.
void activate_row(const KernelTable& k, Activation act, const float* x, float* o, int64_t n) {
  switch (act) {
    case Activation::kSilu:
      for (int64_t i = 0; i < n; ++i) o[i] = x[i] / (1.0f + std::exp(-x[i]));
      return;
    case Activation::kGeluTanh: k.gelu_tanh(x, o, n); return;
    case Activation::kGeluErf: k.gelu_erf(x, o, n); return;
  }
}

}  // namespace

void layer_norm(CpuContext& ctx, const TensorView& out, const TensorView& x, const TensorView& weight,
                const TensorView& bias, float eps) {
  check_f32_cpu(out, "layer_norm out");
  check_f32_cpu(x, "layer_norm x");
  check_f32_cpu(weight, "layer_norm weight");
  check_f32_cpu(bias, "layer_norm bias");
  check_same_shape(out, x, "layer_norm");
  const int64_t n = x.cols();
  CERA_CHECK(weight.n_elements() == n && weight.packed() && bias.n_elements() == n && bias.packed());
  const float* w = weight.row_as<const float>(0);
  const float* b = bias.row_as<const float>(0);
  for_rows(ctx, x.rows(), n, [&](int64_t r) {
    const float* src = x.row_as<const float>(r);
    float* dst = out.row_as<float>(r);
    // Two passes (mean, then the centred squares): one pass of sum and sum of squares would
    // cancel catastrophically for rows with a large mean. Eight partial sums each, as rms_norm:
    // a single running sum is a chain of dependent adds the compiler may not vectorize (it was
    // 4 % of a BERT embedding run).
    float part[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      for (int j = 0; j < 8; ++j) part[j] += src[i + j];
    }
    float sum = 0.0f;
    for (; i < n; ++i) sum += src[i];
    for (float p : part) sum += p;
    const float mean = sum / static_cast<float>(n);
    float sq_part[8] = {};
    for (i = 0; i + 8 <= n; i += 8) {
      for (int j = 0; j < 8; ++j) sq_part[j] += (src[i + j] - mean) * (src[i + j] - mean);
    }
    float sq = 0.0f;
    for (; i < n; ++i) sq += (src[i] - mean) * (src[i] - mean);
    for (float p : sq_part) sq += p;
    const float inv = 1.0f / std::sqrt(sq / static_cast<float>(n) + eps);
    for (int64_t k = 0; k < n; ++k) dst[k] = (src[k] - mean) * inv * w[k] + b[k];
  });
}

void activation(CpuContext& ctx, const TensorView& out, const TensorView& x, Activation act) {
  check_f32_cpu(out, "activation out");
  check_f32_cpu(x, "activation x");
  check_same_shape(out, x, "activation");
  const int64_t n = out.cols();
  for_rows(ctx, out.rows(), n, [&](int64_t r) {
    activate_row(*ctx.kernels, act, x.row_as<const float>(r), out.row_as<float>(r), n);
  });
}

void rms_norm(CpuContext& ctx, const TensorView& out, const TensorView& x, const TensorView& weight,
              float eps) {
  check_f32_cpu(out, "rms_norm out");
  check_f32_cpu(x, "rms_norm x");
  check_f32_cpu(weight, "rms_norm weight");
  check_same_shape(out, x, "rms_norm");
  const int64_t n = x.cols();
  CERA_CHECK(weight.n_elements() == n && weight.packed());
  const float* w = weight.row_as<const float>(0);
  for_rows(ctx, x.rows(), n, [&](int64_t r) {
    const float* src = x.row_as<const float>(r);
    float* dst = out.row_as<float>(r);
    // Eight partial sums: a fixed order the compiler can vectorize without -ffast-math.
    float part[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      for (int j = 0; j < 8; ++j) part[j] += src[i + j] * src[i + j];
    }
    float sum = 0.0f;
    for (; i < n; ++i) sum += src[i] * src[i];
    for (float p : part) sum += p;
    const float inv = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
    for (int64_t k = 0; k < n; ++k) dst[k] = src[k] * inv * w[k];
  });
}

void rope_heads(CpuContext& ctx, std::span<const int32_t> positions, int64_t n_heads,
                const RopeParams& p, HeadPtrFn head_ptr, const void* head_ctx) {
  CERA_CHECK_MSG(p.n_rot > 0 && p.n_rot % 2 == 0, "rope: n_rot must be even and positive");
  const int64_t half = p.n_rot / 2;
  const auto n_tokens = static_cast<int64_t>(positions.size());
  ctx.rope_cs.resize(static_cast<size_t>(2 * half * n_tokens));
  float* cs = ctx.rope_cs.data();
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      double theta = static_cast<double>(positions[static_cast<size_t>(t)]) * p.freq_scale *
                     std::pow(static_cast<double>(p.freq_base), -2.0 * static_cast<double>(i) / p.n_rot);
      if (p.freq_factors != nullptr) theta /= p.freq_factors[i];
      cs[2 * (t * half + i)] = static_cast<float>(std::cos(theta));
      cs[2 * (t * half + i) + 1] = static_cast<float>(std::sin(theta));
    }
  }
  // Adjacent pairs (2i, 2i+1) for kNorm; (i, i + n_rot/2) for kNeox.
  const int64_t stride = p.kind == RopeKind::kNorm ? 2 : 1;
  const int64_t partner = p.kind == RopeKind::kNorm ? 1 : half;
  for_rows(ctx, n_tokens * n_heads, p.n_rot, [&](int64_t row) {
    const int64_t t = row / n_heads;
    float* x = head_ptr(head_ctx, t, row % n_heads);
    const float* c = cs + 2 * t * half;
    for (int64_t i = 0; i < half; ++i) {
      float* a = x + i * stride;
      const float x0 = a[0];
      const float x1 = a[partner];
      a[0] = x0 * c[2 * i] - x1 * c[2 * i + 1];
      a[partner] = x0 * c[2 * i + 1] + x1 * c[2 * i];
    }
  });
}

void rope(CpuContext& ctx, const TensorView& x, std::span<const int32_t> positions,
          const RopeParams& params) {
  check_f32_cpu(x, "rope x");
  const auto n_tokens = static_cast<int64_t>(positions.size());
  CERA_CHECK_MSG(n_tokens > 0 && x.rows() % n_tokens == 0, "rope: rows are not heads x tokens");
  CERA_CHECK_MSG(params.n_rot <= x.cols(), "rope: n_rot exceeds head_dim");
  const int64_t n_heads = x.rows() / n_tokens;
  struct Ctx {
    const TensorView* x;
    int64_t n_heads;
  } hc{&x, n_heads};
  rope_heads(ctx, positions, n_heads, params, [](const void* c, int64_t t, int64_t h) {
    const auto* hc = static_cast<const Ctx*>(c);
    return hc->x->row_as<float>(t * hc->n_heads + h);
  }, &hc);
}

void gated_activation(CpuContext& ctx, const TensorView& out, const TensorView& gate,
                      const TensorView& up, Activation act) {
  check_f32_cpu(out, "gated_activation out");
  check_f32_cpu(gate, "gated_activation gate");
  check_f32_cpu(up, "gated_activation up");
  check_same_shape(out, gate, "gated_activation");
  check_same_shape(out, up, "gated_activation");
  const int64_t n = out.cols();
  for_rows(ctx, out.rows(), n, [&](int64_t r) {
    const float* g = gate.row_as<const float>(r);
    const float* u = up.row_as<const float>(r);
    float* o = out.row_as<float>(r);
    if (act == Activation::kSilu) {
      for (int64_t i = 0; i < n; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    } else {
      // o may alias u: each element reads its u before the product overwrites it.
      if (o == u) {
        for (int64_t i0 = 0; i0 < n; i0 += 256) {
          float a[256];
          const int64_t m = std::min<int64_t>(256, n - i0);
          activate_row(*ctx.kernels, act, g + i0, a, m);
          for (int64_t i = 0; i < m; ++i) o[i0 + i] = a[i] * u[i0 + i];
        }
      } else {
        activate_row(*ctx.kernels, act, g, o, n);
        for (int64_t i = 0; i < n; ++i) o[i] *= u[i];
      }
    }
  });
}

void add_scaled(CpuContext& ctx, const TensorView& out, const TensorView& a, const TensorView& b,
                float scale) {
  check_f32_cpu(out, "add_scaled out");
  check_f32_cpu(a, "add_scaled a");
  check_f32_cpu(b, "add_scaled b");
  check_same_shape(out, a, "add_scaled");
  check_same_shape(out, b, "add_scaled");
  const int64_t n = out.cols();
  for_rows(ctx, out.rows(), n, [&](int64_t r) {
    const float* x = a.row_as<const float>(r);
    const float* y = b.row_as<const float>(r);
    float* o = out.row_as<float>(r);
    for (int64_t i = 0; i < n; ++i) o[i] = x[i] + scale * y[i];
  });
}

void scale(CpuContext& ctx, const TensorView& x, float s) {
  check_f32_cpu(x, "scale x");
  const int64_t n = x.cols();
  for_rows(ctx, x.rows(), n, [&](int64_t r) {
    float* o = x.row_as<float>(r);
    for (int64_t i = 0; i < n; ++i) o[i] *= s;
  });
}

}  // namespace cera::ops::cpu
