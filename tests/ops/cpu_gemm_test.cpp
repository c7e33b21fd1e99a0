// matmul over plain float weights (F32, F16, BF16) at many tokens, where the SIMD levels take the
// register-blocked GEMM (simd_gemm.inc) instead of the dot tiles: every level this CPU runs
// against a double-precision product of the same (exactly converted) weights. The sweep covers
// every token count 1..70 (all tails of the token blocks and the switch from dot tiles to the
// GEMM), column counts off the 16/32-column panels and past one packed chunk, input counts off
// the 8/16-element transposes and past one k block, strided activations and outputs (the
// padding must stay NaN), with and without bias; and batch invariance, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "core/half.h"
#include "cpu_test_util.h"
#include "quant/quant.h"

namespace cera::ops::test {
namespace {

struct Shape {
  int64_t n_in, n_out, n_tokens;
};

std::vector<Shape> gemm_shapes() {
  std::vector<Shape> out;
  for (int64_t t = 1; t <= 70; ++t) out.push_back({300, 95, t});
  const std::vector<int64_t> n_ins = kFullSweep ? std::vector<int64_t>{1, 7, 16, 33, 256, 520}
                                                : std::vector<int64_t>{7, 33, 520};
  const std::vector<int64_t> n_outs = kFullSweep ? std::vector<int64_t>{1, 16, 17, 32, 33, 64, 530}
                                                 : std::vector<int64_t>{1, 33, 530};
  for (int64_t n_in : n_ins) {
    for (int64_t n_out : n_outs) {
      for (int64_t t : {5, 32, 45, 70}) out.push_back({n_in, n_out, t});
    }
  }
  return out;
}

std::vector<std::byte> float_weight(std::mt19937& rng, DType t, int64_t n_in, int64_t n_out) {
  const std::vector<float> f = random_floats(rng, static_cast<size_t>(n_in * n_out));
  std::vector<std::byte> w(*dtype_row_bytes(t, static_cast<uint64_t>(n_in)) * static_cast<size_t>(n_out));
  if (t == DType::kF32) {
    std::memcpy(w.data(), f.data(), w.size());
  } else {
    quant::quantize_row(t, f.data(), w.data(), n_in * n_out);
  }
  return w;
}

class FloatGemmTest : public ::testing::TestWithParam<DType> {};

TEST_P(FloatGemmTest, MatchesDoubleReference) {
  const DType wt = GetParam();
  std::mt19937 rng(77 + static_cast<int>(wt));
  std::vector<IsaBackend> backends = all_backends(2);
  int cases = 0;
  for (const Shape& s : gemm_shapes()) {
    SCOPED_TRACE("n_in=" + std::to_string(s.n_in) + " n_out=" + std::to_string(s.n_out) +
                 " n_tokens=" + std::to_string(s.n_tokens));
    std::vector<std::byte> w = float_weight(rng, wt, s.n_in, s.n_out);
    std::vector<float> wf(static_cast<size_t>(s.n_in * s.n_out));
    quant::dequantize_row(wt, w.data(), wf.data(), s.n_in * s.n_out);
    const int64_t x_stride = s.n_in + 5;
    const int64_t o_stride = s.n_out + 3;
    std::vector<float> x = random_floats(rng, static_cast<size_t>(x_stride * s.n_tokens));
    std::vector<float> bias = random_floats(rng, static_cast<size_t>(s.n_out));
    const bool with_bias = (s.n_tokens + s.n_out) % 2 == 1;
    // Recursive float summation of n terms with FMA is within n * 2^-24 * sum |terms| of the
    // exact sum; the bias add adds one more rounding.
    std::vector<double> ref(static_cast<size_t>(s.n_out * s.n_tokens)), tol(ref.size());
    for (int64_t t = 0; t < s.n_tokens; ++t) {
      for (int64_t r = 0; r < s.n_out; ++r) {
        double sum = 0, mag = 0;
        for (int64_t k = 0; k < s.n_in; ++k) {
          const double p = static_cast<double>(wf[static_cast<size_t>(r * s.n_in + k)]) *
                           x[static_cast<size_t>(t * x_stride + k)];
          sum += p;
          mag += std::fabs(p);
        }
        const double b = with_bias ? bias[static_cast<size_t>(r)] : 0.0;
        ref[static_cast<size_t>(t * s.n_out + r)] = sum + b;
        tol[static_cast<size_t>(t * s.n_out + r)] = (s.n_in + 2) * 0x1p-24 * (mag + std::fabs(b)) + 1e-30;
      }
    }
    for (IsaBackend& ib : backends) {
      SCOPED_TRACE(std::string(cpu_isa_name(ib.isa)));
      std::vector<float> out(static_cast<size_t>(o_stride * s.n_tokens), nan_value());
      TensorView xv = make_view(x.data(), DType::kF32, {s.n_in, s.n_tokens, 1, 1});
      xv.row_stride = x_stride * 4;
      TensorView ov = make_view(out.data(), DType::kF32, {s.n_out, s.n_tokens, 1, 1});
      ov.row_stride = o_stride * 4;
      const TensorView bv = make_view(bias.data(), DType::kF32, {s.n_out, 1, 1, 1});
      ib.backend->matmul(ov, make_view(w.data(), wt, {s.n_in, s.n_out, 1, 1}), xv, with_bias ? &bv : nullptr);
      for (int64_t t = 0; t < s.n_tokens; ++t) {
        for (int64_t r = 0; r < o_stride; ++r) {
          const float got = out[static_cast<size_t>(t * o_stride + r)];
          if (r >= s.n_out) {
            ASSERT_TRUE(is_nan(got)) << "padding written at t=" << t << " r=" << r;
            continue;
          }
          const size_t i = static_cast<size_t>(t * s.n_out + r);
          ASSERT_NEAR(got, ref[i], tol[i]) << "t=" << t << " r=" << r;
        }
      }
      ++cases;
    }
  }
  RecordProperty("cases", cases);
}

INSTANTIATE_TEST_SUITE_P(FloatWeights, FloatGemmTest, ::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// A token's outputs are the same bits at any batch size (the GEMM sums in the dot tiles' order):
// every token of a GEMM-sized call against the same token alone, and in a 3-token call.
TEST_P(FloatGemmTest, TokensGiveTheSameBitsAtAnyBatchSize) {
  const DType wt = GetParam();
  std::mt19937 rng(11 + static_cast<int>(wt));
  for (int64_t n_in : {16, 33, 384, 1000}) {
    const int64_t n_out = 70, n_tok = 41;  // the GEMM from 32 tokens on, dot tiles below
    std::vector<std::byte> w = float_weight(rng, wt, n_in, n_out);
    std::vector<float> x = random_floats(rng, static_cast<size_t>(n_in * n_tok));
    std::vector<float> bias = random_floats(rng, static_cast<size_t>(n_out));
    const TensorView wv = make_view(w.data(), wt, {n_in, n_out, 1, 1});
    const TensorView bv = make_view(bias.data(), DType::kF32, {n_out, 1, 1, 1});
    for (IsaBackend& ib : all_backends(2)) {
      SCOPED_TRACE(std::string(cpu_isa_name(ib.isa)) + " n_in=" + std::to_string(n_in));
      for (const TensorView* b : {&bv, static_cast<const TensorView*>(nullptr)}) {
        std::vector<float> all(static_cast<size_t>(n_out * n_tok), nan_value());
        ib.backend->matmul(make_view(all.data(), DType::kF32, {n_out, n_tok, 1, 1}), wv,
                           make_view(x.data(), DType::kF32, {n_in, n_tok, 1, 1}), b);
        for (int64_t t = 0; t < n_tok; ++t) {
          const int64_t n = t + 3 <= n_tok ? 3 : 1;
          std::vector<float> few(static_cast<size_t>(n_out * n), nan_value());
          ib.backend->matmul(make_view(few.data(), DType::kF32, {n_out, n, 1, 1}), wv,
                             make_view(x.data() + t * n_in, DType::kF32, {n_in, n, 1, 1}), b);
          for (int64_t r = 0; r < n_out; ++r) {
            const float got = all[static_cast<size_t>(t * n_out + r)];
            const float want = few[static_cast<size_t>(r)];
            ASSERT_EQ(std::memcmp(&got, &want, sizeof got), 0) << "t=" << t << " r=" << r << " " << got << " " << want;
          }
        }
      }
    }
  }
}

// The GEMM's row split: many threads over a product with columns off the chunk size, so chunks
// end inside a panel and one thread's packed columns must never be stored by another.
TEST(FloatGemmTest, ThreadsSplitColumnsWithoutOverlap) {
  std::mt19937 rng(5);
  const int64_t n_in = 200, n_out = 1001, n_tok = 50;
  std::vector<std::byte> w = float_weight(rng, DType::kF16, n_in, n_out);
  std::vector<float> x = random_floats(rng, static_cast<size_t>(n_in * n_tok));
  std::vector<float> wf(static_cast<size_t>(n_in * n_out));
  quant::dequantize_row(DType::kF16, w.data(), wf.data(), n_in * n_out);
  for (IsaBackend& ib : all_backends(4)) {
    std::vector<float> out(static_cast<size_t>(n_out * n_tok), nan_value());
    ib.backend->matmul(make_view(out.data(), DType::kF32, {n_out, n_tok, 1, 1}),
                       make_view(w.data(), DType::kF16, {n_in, n_out, 1, 1}),
                       make_view(x.data(), DType::kF32, {n_in, n_tok, 1, 1}));
    for (int64_t t = 0; t < n_tok; ++t) {
      for (int64_t r = 0; r < n_out; ++r) {
        double ref = 0;
        for (int64_t k = 0; k < n_in; ++k) {
          ref += static_cast<double>(wf[static_cast<size_t>(r * n_in + k)]) * x[static_cast<size_t>(t * n_in + k)];
        }
        ASSERT_NEAR(out[static_cast<size_t>(t * n_out + r)], ref, 1e-4) << cpu_isa_name(ib.isa) << " t=" << t << " r=" << r;
      }
    }
  }
}

}  // namespace
}  // namespace cera::ops::test
