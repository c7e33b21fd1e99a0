// moe_route, matmul_experts and moe_combine of the CPU backend against naive double references:
// random logits and selection biases, every gating mode; expert stacks of several weight types,
// raw and through import_weight (the R16 repack on AVX-512 VNNI), x shared by a token's slots or
// one row per slot; NaN-poisoned outputs; every ISA level.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "cpu_test_util.h"
#include "quant/quant.h"

namespace cera::ops::test {
namespace {

TEST(MoeRouteTest, MatchesDoubleReference) {
  std::mt19937 rng(11);
  for (RouterGating gating : {RouterGating::kSoftmax, RouterGating::kSigmoid}) {
    for (int64_t n_expert : {1, 4, 9, 64}) {
      for (int64_t k : {1, 2, 8}) {
        if (k > n_expert) continue;
        for (bool normalize : {false, true}) {
          for (bool with_bias : {false, true}) {
            if (with_bias && gating == RouterGating::kSoftmax) continue;
            const int64_t n_tokens = 13;
            std::vector<float> logits =
                random_floats(rng, static_cast<size_t>(n_expert * n_tokens), -4, 4);
            std::vector<float> bias =
                random_floats(rng, static_cast<size_t>(n_expert), -0.5f, 0.5f);
            const TensorView bias_view = make_view(bias.data(), DType::kF32, {n_expert, 1, 1, 1});
            const RouterParams p{.n_expert_used = int32_t(k),
                                 .gating = gating,
                                 .normalize = normalize,
                                 .scale = 1.5f,
                                 .selection_bias = with_bias ? &bias_view : nullptr};
            for (IsaBackend& ib : all_backends()) {
              std::vector<int32_t> ids(static_cast<size_t>(k * n_tokens), -1);
              std::vector<float> w(static_cast<size_t>(k * n_tokens), nan_value());
              ib.backend->moe_route(
                  make_view(ids.data(), DType::kI32, {k, n_tokens, 1, 1}),
                  make_view(w.data(), DType::kF32, {k, n_tokens, 1, 1}),
                  make_view(logits.data(), DType::kF32, {n_expert, n_tokens, 1, 1}), p);
              for (int64_t t = 0; t < n_tokens; ++t) {
                const float* l = logits.data() + t * n_expert;
                std::vector<double> score(static_cast<size_t>(n_expert)),
                    choice(static_cast<size_t>(n_expert));
                const double mx = *std::max_element(l, l + n_expert);
                double total = 0;
                for (int64_t e = 0; e < n_expert; ++e) total += std::exp(l[e] - mx);
                for (int64_t e = 0; e < n_expert; ++e) {
                  score[e] = gating == RouterGating::kSoftmax
                                 ? std::exp(l[e] - mx) / total
                                 : 1.0 / (1.0 + std::exp(-double(l[e])));
                  choice[e] = score[e] + (with_bias ? bias[e] : 0.0);
                }
                std::vector<int> order(static_cast<size_t>(n_expert));
                std::iota(order.begin(), order.end(), 0);
                std::stable_sort(order.begin(), order.end(),
                                 [&](int a, int b) { return choice[a] > choice[b]; });
                double sum = 0;
                for (int64_t j = 0; j < k; ++j) sum += score[order[j]];
                for (int64_t j = 0; j < k; ++j) {
                  const std::string what = std::string(cpu_isa_name(ib.isa)) +
                                           " E=" + std::to_string(n_expert) +
                                           " k=" + std::to_string(k) + " t=" + std::to_string(t);
                  ASSERT_EQ(ids[static_cast<size_t>(t * k + j)], order[j]) << what;
                  const double want = score[order[j]] * (normalize ? 1.5 / sum : 1.5);
                  ASSERT_NEAR(w[static_cast<size_t>(t * k + j)], want, 1e-5 * want + 1e-7) << what;
                }
              }
            }
          }
        }
      }
    }
  }
}

// [n_expert][n_out] rows of n_in elements of type t, from random floats.
std::vector<std::byte> random_experts(std::mt19937& rng, DType t, int64_t n_in, int64_t n_rows) {
  const auto row_bytes = static_cast<int64_t>(*dtype_row_bytes(t, uint64_t(n_in)));
  std::vector<std::byte> w(static_cast<size_t>(row_bytes * n_rows));
  for (int64_t r = 0; r < n_rows; ++r) {
    const std::vector<float> f = random_floats(rng, static_cast<size_t>(n_in));
    if (t == DType::kF32) {
      std::memcpy(w.data() + r * row_bytes, f.data(), static_cast<size_t>(row_bytes));
    } else {
      quant::quantize_row(t, f.data(), w.data() + r * row_bytes, n_in);
    }
  }
  return w;
}

TEST(MatmulExpertsTest, MatchesDoubleReference) {
  std::mt19937 rng(5);
  const DType types[] = {DType::kF32,  DType::kF16,  DType::kQ8_0, DType::kQ4_0,
                         DType::kQ4_1, DType::kQ4_K, DType::kQ6_K};
  struct Shape {
    int64_t n_in, n_out, n_expert, k, n_tokens;
  };
  std::vector<Shape> shapes = {
      {256, 16, 4, 2, 1}, {256, 48, 8, 2, 7}, {512, 32, 5, 3, 33}, {256, 64, 8, 8, 3}};
  if (!kFullSweep) shapes.resize(3);
  for (DType type : types) {
    for (const Shape& s : shapes) {
      const auto row_bytes = static_cast<int64_t>(*dtype_row_bytes(type, uint64_t(s.n_in)));
      std::vector<std::byte> w = random_experts(rng, type, s.n_in, s.n_out * s.n_expert);
      // Dequantized weights, and ids with repeats across tokens and some experts unused.
      std::vector<float> wf(static_cast<size_t>(s.n_in * s.n_out * s.n_expert));
      for (int64_t r = 0; r < s.n_out * s.n_expert; ++r)
        quant::dequantize_row(type, w.data() + r * row_bytes, wf.data() + r * s.n_in, s.n_in);
      std::vector<int32_t> ids(static_cast<size_t>(s.k * s.n_tokens));
      for (int64_t t = 0; t < s.n_tokens; ++t) {
        std::vector<int32_t> e(static_cast<size_t>(s.n_expert));
        std::iota(e.begin(), e.end(), 0);
        std::shuffle(e.begin(), e.end(), rng);
        for (int64_t j = 0; j < s.k; ++j)
          ids[static_cast<size_t>(t * s.k + j)] =
              e[static_cast<size_t>(j)] % std::max<int64_t>(1, s.n_expert - 1);
      }
      for (bool shared : {true, false}) {
        const int64_t n_x = shared ? s.n_tokens : s.k * s.n_tokens;
        std::vector<float> x = random_floats(rng, static_cast<size_t>(s.n_in * n_x));
        // The activations as the kernels see them: quantized to the weight's paired type.
        const DType act = quant::activation_type_for(type);
        std::vector<float> xq(x.size());
        std::vector<std::byte> buf(*dtype_row_bytes(act, uint64_t(s.n_in)));
        for (int64_t r = 0; r < n_x; ++r) {
          quant::quantize_activation_row(act, x.data() + r * s.n_in, buf.data(), s.n_in);
          quant::dequantize_activation_row(act, buf.data(), xq.data() + r * s.n_in, s.n_in);
        }
        // Single-term int8 must match the quantized activations' product; two-term (the default)
        // the float product within 1/50 of the single-term error (its residual bound is ~1/254).
        for (ActivationPrecision precision :
             {ActivationPrecision::kInt8, ActivationPrecision::kInt8x2}) {
          const bool two_term = precision == ActivationPrecision::kInt8x2 && act != DType::kF32;
          for (IsaBackend& ib : all_backends(2, precision)) {
            for (bool imported : {false, true}) {
              TensorView wv = make_view(w.data(), type, {s.n_in, s.n_out, s.n_expert, 1});
              std::unique_ptr<Buffer> keep;
              if (imported) wv = *ib.backend->import_weight(wv, keep);
              std::vector<float> out(static_cast<size_t>(s.n_out * s.k * s.n_tokens), nan_value());
              ib.backend->matmul_experts(
                  make_view(out.data(), DType::kF32, {s.n_out, s.k, s.n_tokens, 1}), wv,
                  shared ? make_view(x.data(), DType::kF32, {s.n_in, s.n_tokens, 1, 1})
                         : make_view(x.data(), DType::kF32, {s.n_in, s.k, s.n_tokens, 1}),
                  make_view(ids.data(), DType::kI32, {s.k, s.n_tokens, 1, 1}));
              const std::string what =
                  std::string(dtype_name(type)) + (two_term ? " int8x2 " : " int8 ") +
                  cpu_isa_name(ib.isa).data() + (imported ? " imported" : " raw") +
                  (shared ? " shared x" : " x per slot") + " n_in=" + std::to_string(s.n_in) +
                  " n_out=" + std::to_string(s.n_out) + " tokens=" + std::to_string(s.n_tokens);
              for (int64_t t = 0; t < s.n_tokens; ++t) {
                for (int64_t j = 0; j < s.k; ++j) {
                  const int64_t e = ids[static_cast<size_t>(t * s.k + j)];
                  const int64_t xrow = (shared ? t : t * s.k + j) * s.n_in;
                  const float* xr = (two_term ? x.data() : xq.data()) + xrow;
                  for (int64_t o = 0; o < s.n_out; ++o) {
                    const float* wr = wf.data() + (e * s.n_out + o) * s.n_in;
                    double ref = 0, mag = 0, int8_error = 0;
                    for (int64_t i = 0; i < s.n_in; ++i) {
                      ref += double(wr[i]) * xr[i];
                      mag += std::fabs(double(wr[i]) * xr[i]);
                      int8_error +=
                          std::fabs(double(wr[i])) * std::fabs(double(x[xrow + i]) - xq[xrow + i]);
                    }
                    const double tol = 2e-5 * mag + 1e-6 + (two_term ? int8_error / 50 : 0.0);
                    ASSERT_NEAR(out[static_cast<size_t>((t * s.k + j) * s.n_out + o)], ref, tol)
                        << what;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(MoeCombineTest, MatchesDoubleReference) {
  std::mt19937 rng(3);
  for (int64_t n : {1, 33, 256}) {
    for (int64_t k : {1, 2, 8}) {
      const int64_t n_tokens = 9;
      const std::vector<float> eo = random_floats(rng, static_cast<size_t>(n * k * n_tokens));
      const std::vector<float> w = random_floats(rng, static_cast<size_t>(k * n_tokens), 0, 1);
      for (IsaBackend& ib : all_backends()) {
        std::vector<float> out(static_cast<size_t>(n * n_tokens), nan_value());
        ib.backend->moe_combine(
            make_view(out.data(), DType::kF32, {n, n_tokens, 1, 1}),
            make_view(const_cast<float*>(eo.data()), DType::kF32, {n, k, n_tokens, 1}),
            make_view(const_cast<float*>(w.data()), DType::kF32, {k, n_tokens, 1, 1}));
        for (int64_t t = 0; t < n_tokens; ++t) {
          for (int64_t i = 0; i < n; ++i) {
            double ref = 0, mag = 0;
            for (int64_t j = 0; j < k; ++j) {
              ref += double(w[static_cast<size_t>(t * k + j)]) *
                     eo[static_cast<size_t>((t * k + j) * n + i)];
              mag += std::fabs(double(w[static_cast<size_t>(t * k + j)]) *
                               eo[static_cast<size_t>((t * k + j) * n + i)]);
            }
            ASSERT_NEAR(out[static_cast<size_t>(t * n + i)], ref, 1e-6 * mag + 1e-7)
                << cpu_isa_name(ib.isa);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace cera::ops::test
