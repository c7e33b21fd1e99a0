// rms_norm, rope, gated_activation, add_scaled and scale of the CPU backend against naive
// double-precision references, every ISA level, odd and even widths, strided rows and aliasing.
// Tolerances: 1e-5 relative (+1e-6 absolute) for the float math; rope 2e-6 absolute on unit-range
// inputs (cos/sin rounded to float once).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "cpu_test_util.h"

namespace cera::ops::test {
namespace {

constexpr double kRel = 1e-5;

void expect_close(double got, double ref, const std::string& what) {
  ASSERT_NEAR(got, ref, kRel * std::fabs(ref) + 1e-6) << what;
}

TEST(RmsNormTest, MatchesDoubleReference) {
  std::mt19937 rng(1);
  for (int64_t n : {1, 7, 64, 96, 4099}) {
    const int64_t rows = 5;
    std::vector<float> x = random_floats(rng, static_cast<size_t>(n * rows), -3, 3);
    std::vector<float> w = random_floats(rng, static_cast<size_t>(n), 0.5f, 1.5f);
    for (IsaBackend& ib : all_backends()) {
      for (bool in_place : {false, true}) {
        std::vector<float> xin = x;
        std::vector<float> out(x.size(), nan_value());
        float* dst = in_place ? xin.data() : out.data();
        ib.backend->rms_norm(make_view(dst, DType::kF32, {n, rows, 1, 1}),
                             make_view(xin.data(), DType::kF32, {n, rows, 1, 1}),
                             make_view(w.data(), DType::kF32, {n, 1, 1, 1}), 1e-5f);
        for (int64_t r = 0; r < rows; ++r) {
          double ss = 0;
          for (int64_t i = 0; i < n; ++i) ss += double(x[r * n + i]) * x[r * n + i];
          const double inv = 1.0 / std::sqrt(ss / n + 1e-5);
          for (int64_t i = 0; i < n; ++i) {
            expect_close(dst[r * n + i], x[r * n + i] * inv * w[i],
                         std::string(cpu_isa_name(ib.isa)) + " n=" + std::to_string(n));
          }
        }
      }
    }
  }
}

// Reference rope of one head vector in double.
void rope_ref(std::vector<double>& x, int64_t pos, const RopeParams& p) {
  const int64_t half = p.n_rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    double theta = pos * double(p.freq_scale) * std::pow(double(p.freq_base), -2.0 * i / p.n_rot);
    if (p.freq_factors) theta /= p.freq_factors[i];
    const int64_t a = p.kind == RopeKind::kNorm ? 2 * i : i;
    const int64_t b = p.kind == RopeKind::kNorm ? 2 * i + 1 : i + half;
    const double x0 = x[a], x1 = x[b];
    x[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
    x[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
  }
}

TEST(RopeTest, MatchesDoubleReferenceForBothKinds) {
  std::mt19937 rng(2);
  const std::vector<float> factors = random_floats(rng, 64, 1.0f, 8.0f);
  const std::vector<int32_t> positions = {0, 1, 17, 511, 5000};
  const int64_t n_tok = static_cast<int64_t>(positions.size());
  for (RopeKind kind : {RopeKind::kNorm, RopeKind::kNeox}) {
    for (int64_t head_dim : {64, 128}) {
      for (int32_t n_rot : {32, static_cast<int32_t>(head_dim)}) {
        for (bool with_factors : {false, true}) {
          RopeParams p{.kind = kind, .n_rot = n_rot, .freq_base = 500000.0f, .freq_scale = 0.5f,
                       .freq_factors = with_factors ? factors.data() : nullptr};
          const int64_t n_heads = 3;
          const std::vector<float> x = random_floats(rng, static_cast<size_t>(head_dim * n_heads * n_tok));
          for (IsaBackend& ib : all_backends()) {
            std::vector<float> y = x;
            ib.backend->rope(make_view(y.data(), DType::kF32, {head_dim, n_heads, n_tok, 1}), positions, p);
            for (int64_t t = 0; t < n_tok; ++t) {
              for (int64_t h = 0; h < n_heads; ++h) {
                const int64_t off = (t * n_heads + h) * head_dim;
                std::vector<double> ref(x.begin() + off, x.begin() + off + head_dim);
                rope_ref(ref, positions[static_cast<size_t>(t)], p);
                for (int64_t i = 0; i < head_dim; ++i) {
                  ASSERT_NEAR(y[static_cast<size_t>(off + i)], ref[static_cast<size_t>(i)], 2e-6)
                      << cpu_isa_name(ib.isa) << " kind=" << int(kind) << " n_rot=" << n_rot
                      << " t=" << t << " i=" << i;
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(GatedActivationTest, SiluAndGeluMatchDoubleReference) {
  std::mt19937 rng(3);
  for (int64_t n : {5, 64, 333}) {
    const int64_t rows = 3;
    const std::vector<float> g = random_floats(rng, static_cast<size_t>(n * rows), -6, 6);
    const std::vector<float> u = random_floats(rng, static_cast<size_t>(n * rows), -2, 2);
    for (Activation act : {Activation::kSilu, Activation::kGeluTanh}) {
      for (IsaBackend& ib : all_backends()) {
        std::vector<float> out(g.size(), nan_value());
        std::vector<float> gate = g;  // also run aliased: out == gate
        ib.backend->gated_activation(make_view(out.data(), DType::kF32, {n, rows, 1, 1}),
                                     make_view(gate.data(), DType::kF32, {n, rows, 1, 1}),
                                     make_view(const_cast<float*>(u.data()), DType::kF32, {n, rows, 1, 1}), act);
        ib.backend->gated_activation(make_view(gate.data(), DType::kF32, {n, rows, 1, 1}),
                                     make_view(gate.data(), DType::kF32, {n, rows, 1, 1}),
                                     make_view(const_cast<float*>(u.data()), DType::kF32, {n, rows, 1, 1}), act);
        for (size_t i = 0; i < g.size(); ++i) {
          const double x = g[i];
          const double a = act == Activation::kSilu
                               ? x / (1 + std::exp(-x))
                               : 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
          expect_close(out[i], a * u[i], std::string(cpu_isa_name(ib.isa)));
          expect_close(gate[i], a * u[i], "aliased");
        }
      }
    }
  }
}

TEST(AddScaledTest, StridedRowsAndScale) {
  std::mt19937 rng(4);
  const int64_t n = 37, rows = 4, stride = 41;
  const std::vector<float> a = random_floats(rng, static_cast<size_t>(stride * rows));
  const std::vector<float> b = random_floats(rng, static_cast<size_t>(n * rows));
  for (IsaBackend& ib : all_backends()) {
    std::vector<float> out(static_cast<size_t>(stride * rows), nan_value());
    TensorView av = make_view(const_cast<float*>(a.data()), DType::kF32, {n, rows, 1, 1});
    av.row_stride = stride * 4;
    TensorView ov = make_view(out.data(), DType::kF32, {n, rows, 1, 1});
    ov.row_stride = stride * 4;
    ib.backend->add_scaled(ov, av, make_view(const_cast<float*>(b.data()), DType::kF32, {n, rows, 1, 1}), -0.75f);
    ib.backend->scale(ov, 3.0f);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < stride; ++i) {
        const float got = out[static_cast<size_t>(r * stride + i)];
        if (i >= n) {
          ASSERT_TRUE(is_nan(got));
          continue;
        }
        expect_close(got, 3.0 * (a[r * stride + i] - 0.75 * double(b[r * n + i])), "add_scaled");
      }
    }
  }
}

}  // namespace
}  // namespace cera::ops::test
