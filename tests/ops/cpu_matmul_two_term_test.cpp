// matmul with two-term 8-bit activations (ActivationPrecision::kInt8x2, the default) against a
// double-precision matmul of the dequantized weights and the original float activations, every
// quantized weight type x every ISA level x odd shapes, GGUF-layout and imported (R16) weights,
// strided x, NaN-poisoned output padding.
//
// The tolerance is derived, not fitted. The first term is the single-term code q1 (quant's
// reference quantizer, d1 its dequantization scale); the residual r = x - d1 * q1 is quantized
// with d2 = max|r| / 127 per activation block and rounded to nearest, so |x - x̂| <= d2 / 2 per
// element and |out - ref| <= sum_i |w_i| * d2_b(i) / 2, plus float accumulation (2e-6 * sum |w x|,
// a few ulps per block). Since |r| <= d1 / 2 (+ the fp16 rounding of d1: 127 * 2^-11 * d1),
// d2 <= 0.562 * d1 / 127: the bound is <= 1/226 of single-term int8's sum_i |w_i| * d1 / 2,
// which the test also checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "cpu_test_util.h"
#include "quant/quant.h"

namespace cera::ops::test {
namespace {

constexpr DType kQuantTypes[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,  DType::kQ5_1,
                                 DType::kQ8_0, DType::kIQ4_NL, DType::kQ2_K, DType::kQ3_K,
                                 DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS};

struct Case {
  int64_t n_in, n_out, n_tokens;
};

std::vector<Case> cases_for(DType t) {
  const bool k = dtype_block_size(t) == 256;
  std::vector<int64_t> n_ins = k ? std::vector<int64_t>{256, 768} : std::vector<int64_t>{32, 96, 288};
  std::vector<int64_t> n_outs = {1, 17, 37};
  std::vector<int64_t> n_toks = {1, 2, 3, 5, 8};
  if (kFullSweep) {
    n_ins.push_back(k ? 4096 : 4064);
    n_toks.push_back(33);
  }
  std::vector<Case> out;
  for (int64_t n_in : n_ins) {
    for (int64_t n_out : n_outs) {
      for (int64_t n_tok : n_toks) out.push_back({n_in, n_out, n_tok});
    }
  }
  return out;
}

// Per element of one activation row: the int8 bound d1 / 2 and the two-term bound d2 / 2 (both
// as the scale of the element's block), computed in double from quant's reference quantizer.
void element_bounds(DType at, const float* x, int64_t n, std::vector<double>& b1, std::vector<double>& b2) {
  const int64_t block = at == DType::kQ8_K ? 256 : 32;
  std::vector<std::byte> q(*dtype_row_bytes(at, static_cast<uint64_t>(n)));
  std::vector<float> xh(static_cast<size_t>(n));
  quant::quantize_activation_row(at, x, q.data(), n);
  quant::dequantize_activation_row(at, q.data(), xh.data(), n);
  b1.assign(static_cast<size_t>(n), 0.0);
  b2.assign(static_cast<size_t>(n), 0.0);
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    double amax = 0, rmax = 0;
    for (int64_t i = b0; i < b0 + block; ++i) {
      amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
      rmax = std::max(rmax, std::fabs(static_cast<double>(x[i]) - xh[static_cast<size_t>(i)]));
    }
    for (int64_t i = b0; i < b0 + block; ++i) {
      b1[static_cast<size_t>(i)] = amax / 127.0 / 2.0;
      b2[static_cast<size_t>(i)] = rmax / 127.0 / 2.0 * (1.0 + 1e-4);  // float d2 and 1/d2
    }
  }
}

class TwoTermMatmulTest : public ::testing::TestWithParam<DType> {};

TEST_P(TwoTermMatmulTest, WithinTheResidualBoundOfTheExactProduct) {
  const DType wt = GetParam();
  const DType at = quant::activation_type_for(wt);
  std::mt19937 rng(4321 + static_cast<int>(wt));
  std::vector<IsaBackend> backends = all_backends(2, ActivationPrecision::kInt8x2);
  double worst = 0;  // largest |out - ref| / tolerance seen
  for (const Case& c : cases_for(wt)) {
    SCOPED_TRACE("n_in=" + std::to_string(c.n_in) + " n_out=" + std::to_string(c.n_out) +
                 " n_tokens=" + std::to_string(c.n_tokens));
    std::vector<std::byte> w = random_weight(rng, wt, c.n_in, c.n_out);
    const int64_t w_row = static_cast<int64_t>(w.size()) / c.n_out;
    std::vector<float> wf(static_cast<size_t>(c.n_in * c.n_out));
    for (int64_t r = 0; r < c.n_out; ++r) {
      quant::dequantize_row(wt, w.data() + r * w_row, wf.data() + r * c.n_in, c.n_in);
    }
    const int64_t x_stride = c.n_in + 3, o_stride = c.n_out + 2;
    // Activations of mixed magnitude, like a residual stream: most blocks O(1), a few tiny.
    std::vector<float> x = random_floats(rng, static_cast<size_t>(x_stride * c.n_tokens), -2.0f, 2.0f);
    for (size_t i = 0; i < x.size(); i += 97) x[i] *= 1e-3f;
    std::vector<float> bias = random_floats(rng, static_cast<size_t>(c.n_out));
    const bool with_bias = c.n_out % 2 == 1;

    std::vector<double> ref(static_cast<size_t>(c.n_out * c.n_tokens)), tol(ref.size());
    std::vector<double> b1, b2;
    for (int64_t t = 0; t < c.n_tokens; ++t) {
      const float* xt = x.data() + t * x_stride;
      element_bounds(at, xt, c.n_in, b1, b2);
      for (int64_t r = 0; r < c.n_out; ++r) {
        const float* wr = wf.data() + r * c.n_in;
        double sum = 0, mag = 0, bound1 = 0, bound2 = 0;
        for (int64_t i = 0; i < c.n_in; ++i) {
          const double wv = wr[i], aw = std::fabs(wv);
          sum += wv * xt[i];
          mag += std::fabs(wv * xt[i]);
          bound1 += aw * b1[static_cast<size_t>(i)];
          bound2 += aw * b2[static_cast<size_t>(i)];
        }
        ASSERT_LE(bound2, bound1 / 200.0) << "the residual bound is not ~1/226 of the int8 bound";
        const size_t k = static_cast<size_t>(t * c.n_out + r);
        ref[k] = sum + (with_bias ? bias[static_cast<size_t>(r)] : 0.0);
        tol[k] = bound2 + 2e-6 * mag + 1e-7;
      }
    }
    const TensorView host = make_view(w.data(), wt, {c.n_in, c.n_out, 1, 1});
    TensorView xv = make_view(x.data(), DType::kF32, {c.n_in, c.n_tokens, 1, 1});
    xv.row_stride = x_stride * 4;
    const TensorView bv = make_view(bias.data(), DType::kF32, {c.n_out, 1, 1, 1});
    for (IsaBackend& ib : backends) {
      for (bool imported : {false, true}) {
        SCOPED_TRACE(std::string(cpu_isa_name(ib.isa)) + (imported ? " imported" : " gguf layout"));
        std::unique_ptr<Buffer> keep;
        TensorView wv = host;
        if (imported) {
          auto v = ib.backend->import_weight(host, keep);
          ASSERT_TRUE(v.ok());
          wv = *v;
        }
        std::vector<float> out(static_cast<size_t>(o_stride * c.n_tokens), nan_value());
        TensorView ov = make_view(out.data(), DType::kF32, {c.n_out, c.n_tokens, 1, 1});
        ov.row_stride = o_stride * 4;
        ib.backend->matmul(ov, wv, xv, with_bias ? &bv : nullptr);
        for (int64_t t = 0; t < c.n_tokens; ++t) {
          for (int64_t r = 0; r < o_stride; ++r) {
            const float got = out[static_cast<size_t>(t * o_stride + r)];
            if (r >= c.n_out) {
              ASSERT_TRUE(is_nan(got)) << "padding written at t=" << t << " r=" << r;
              continue;
            }
            const size_t k = static_cast<size_t>(t * c.n_out + r);
            ASSERT_NEAR(got, ref[k], tol[k]) << "t=" << t << " r=" << r;
            worst = std::max(worst, std::fabs(got - ref[k]) / tol[k]);
          }
        }
      }
    }
  }
  RecordProperty("worst_error_over_tolerance", std::to_string(worst));
}

INSTANTIATE_TEST_SUITE_P(QuantizedWeightTypes, TwoTermMatmulTest, ::testing::ValuesIn(kQuantTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The switch: kInt8x2's total error against the exact product is under 1/50 of kInt8's.
TEST(TwoTermMatmulTest, FarCloserThanSingleTerm) {
  std::mt19937 rng(11);
  const int64_t n_in = 512, n_out = 33, n_tok = 3;
  for (DType wt : {DType::kQ4_1, DType::kQ4_K}) {
    std::vector<std::byte> w = random_weight(rng, wt, n_in, n_out);
    std::vector<float> x = random_floats(rng, static_cast<size_t>(n_in * n_tok));
    const int64_t w_row = static_cast<int64_t>(w.size()) / n_out;
    std::vector<float> wf(static_cast<size_t>(n_in));
    auto one = all_backends(1, ActivationPrecision::kInt8);
    auto two = all_backends(1, ActivationPrecision::kInt8x2);
    for (size_t l = 0; l < one.size(); ++l) {
      std::vector<float> o1(static_cast<size_t>(n_out * n_tok)), o2(o1.size());
      const TensorView wv = make_view(w.data(), wt, {n_in, n_out, 1, 1});
      const TensorView xv = make_view(x.data(), DType::kF32, {n_in, n_tok, 1, 1});
      one[l].backend->matmul(make_view(o1.data(), DType::kF32, {n_out, n_tok, 1, 1}), wv, xv);
      two[l].backend->matmul(make_view(o2.data(), DType::kF32, {n_out, n_tok, 1, 1}), wv, xv);
      double e1 = 0, e2 = 0;
      for (int64_t t = 0; t < n_tok; ++t) {
        for (int64_t r = 0; r < n_out; ++r) {
          quant::dequantize_row(wt, w.data() + r * w_row, wf.data(), n_in);
          double ref = 0;
          for (int64_t i = 0; i < n_in; ++i) ref += static_cast<double>(wf[static_cast<size_t>(i)]) * x[static_cast<size_t>(t * n_in + i)];
          e1 += std::fabs(o1[static_cast<size_t>(t * n_out + r)] - ref);
          e2 += std::fabs(o2[static_cast<size_t>(t * n_out + r)] - ref);
        }
      }
      EXPECT_LT(e2 * 50, e1) << dtype_name(wt) << " " << cpu_isa_name(one[l].isa);
    }
  }
}

}  // namespace
}  // namespace cera::ops::test
