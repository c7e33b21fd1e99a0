// matmul and embed of the CPU backend, every weight type x every ISA level x a shape sweep, with
// single-term int8 activations (ActivationPrecision::kInt8; the two-term default is tested in
// cpu_matmul_two_term_test.cpp). Two oracles, both outside the backend:
//  1. quant::vec_dot on the reference-quantized activation rows: the portable level must match
//     it bit for bit; SIMD levels within 1e-5 of S = sum |w_i * a_i| (float accumulation order).
//  2. A double-precision matmul of the dequantized weights and the original float activations:
//     within the activation-quantization error sum |w_i| * |x_i - x̂_i| (computed exactly per
//     output) plus 1e-5 * S.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "core/half.h"
#include "cpu_test_util.h"
#include "quant/quant.h"

namespace cera::ops::test {
namespace {

constexpr DType kWeightTypes[] = {
    DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ4_1,   DType::kQ5_0,
    DType::kQ5_1, DType::kQ8_0, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K,   DType::kQ5_K,
    DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS};

struct Shape {
  int64_t n_in, n_out, n_tokens;
};

std::vector<Shape> shapes_for(DType t) {
  std::vector<int64_t> n_ins;
  const uint32_t bs = dtype_block_size(t);
  if (bs == 1) {
    n_ins = {7, 32, 33, 96, 288, 512};
  } else if (bs == 32) {
    n_ins = {32, 64, 96, 288, 512};
  } else {
    n_ins = {256, 512, 768};
  }
  std::vector<int64_t> n_outs = {1, 3, 17, 64};
  std::vector<int64_t> n_toks = {1, 2, 5, 16, 33};
  if (!kFullSweep) {
    n_ins.resize(3);
    n_outs = {1, 3, 17};
    n_toks = {1, 2, 5};
  }
  std::vector<Shape> out;
  for (int64_t n_in : n_ins) {
    for (int64_t n_out : n_outs) {
      for (int64_t n_tok : n_toks) out.push_back({n_in, n_out, n_tok});
    }
  }
  // The production width: one large case per type (4096 needs a multiple of 256: every type).
  if (kFullSweep) out.push_back({4096, 17, 5});
  return out;
}

class MatmulTest : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulTest, MatchesReferenceAcrossShapesAndIsas) {
  const DType wt = GetParam();
  const DType at = quant::activation_type_for(wt);
  std::mt19937 rng(1234 + static_cast<int>(wt));
  std::vector<IsaBackend> backends = all_backends(2, ActivationPrecision::kInt8);
  int cases = 0;
  for (const Shape& s : shapes_for(wt)) {
    SCOPED_TRACE("n_in=" + std::to_string(s.n_in) + " n_out=" + std::to_string(s.n_out) +
                 " n_tokens=" + std::to_string(s.n_tokens));
    std::vector<std::byte> w = random_weight(rng, wt, s.n_in, s.n_out);
    const int64_t w_row = static_cast<int64_t>(w.size()) / s.n_out;
    // x rows padded by 5 floats (a strided view), out rows by 3 (padding must stay NaN).
    const int64_t x_stride = s.n_in + 5;
    const int64_t o_stride = s.n_out + 3;
    std::vector<float> x = random_floats(rng, static_cast<size_t>(x_stride * s.n_tokens));
    const bool with_bias = s.n_out % 2 == 1;
    std::vector<float> bias = random_floats(rng, static_cast<size_t>(s.n_out));

    // Oracle inputs: dequantized weights, reference-quantized activations and their dequantized
    // floats.
    std::vector<float> wf(static_cast<size_t>(s.n_in * s.n_out));
    for (int64_t r = 0; r < s.n_out; ++r) {
      quant::dequantize_row(wt, w.data() + r * w_row, wf.data() + r * s.n_in, s.n_in);
    }
    const auto act_row = static_cast<int64_t>(*dtype_row_bytes(at, static_cast<uint64_t>(s.n_in)));
    std::vector<std::byte> xq(static_cast<size_t>(act_row * s.n_tokens));
    std::vector<float> xh(static_cast<size_t>(s.n_in * s.n_tokens));
    for (int64_t t = 0; t < s.n_tokens; ++t) {
      quant::quantize_activation_row(at, x.data() + t * x_stride, xq.data() + t * act_row, s.n_in);
      quant::dequantize_activation_row(at, xq.data() + t * act_row, xh.data() + t * s.n_in, s.n_in);
    }
    std::vector<float> ref_exact(static_cast<size_t>(s.n_out * s.n_tokens));
    std::vector<double> ref_f(ref_exact.size()), tol_exact(ref_exact.size()), tol_f(ref_exact.size());
    for (int64_t t = 0; t < s.n_tokens; ++t) {
      for (int64_t r = 0; r < s.n_out; ++r) {
        const size_t i = static_cast<size_t>(t * s.n_out + r);
        float d = quant::vec_dot(wt, w.data() + r * w_row, xq.data() + t * act_row, s.n_in);
        if (with_bias) d += bias[static_cast<size_t>(r)];
        ref_exact[i] = d;
        double sum = 0, mag = 0, qerr = 0;
        for (int64_t k = 0; k < s.n_in; ++k) {
          const double wv = wf[static_cast<size_t>(r * s.n_in + k)];
          const double xv = x[static_cast<size_t>(t * x_stride + k)];
          const double hv = xh[static_cast<size_t>(t * s.n_in + k)];
          sum += wv * xv;
          mag += std::fabs(wv * hv);
          qerr += std::fabs(wv) * std::fabs(xv - hv);
        }
        ref_f[i] = sum + (with_bias ? bias[static_cast<size_t>(r)] : 0.0);
        tol_exact[i] = 1e-5 * mag + 1e-30;
        tol_f[i] = qerr + 1e-5 * mag + 1e-6;
      }
    }
    for (IsaBackend& ib : backends) {
      SCOPED_TRACE(std::string(cpu_isa_name(ib.isa)));
      std::vector<float> out(static_cast<size_t>(o_stride * s.n_tokens), nan_value());
      TensorView wv = make_view(w.data(), wt, {s.n_in, s.n_out, 1, 1});
      TensorView xv = make_view(x.data(), DType::kF32, {s.n_in, s.n_tokens, 1, 1});
      xv.row_stride = x_stride * 4;
      TensorView ov = make_view(out.data(), DType::kF32, {s.n_out, s.n_tokens, 1, 1});
      ov.row_stride = o_stride * 4;
      TensorView bv = make_view(bias.data(), DType::kF32, {s.n_out, 1, 1, 1});
      ib.backend->matmul(ov, wv, xv, with_bias ? &bv : nullptr);
      for (int64_t t = 0; t < s.n_tokens; ++t) {
        for (int64_t r = 0; r < o_stride; ++r) {
          const float got = out[static_cast<size_t>(t * o_stride + r)];
          if (r >= s.n_out) {
            ASSERT_TRUE(is_nan(got)) << "padding written at t=" << t << " r=" << r;
            continue;
          }
          const size_t i = static_cast<size_t>(t * s.n_out + r);
          if (ib.isa == CpuIsa::kPortable) {
            ASSERT_EQ(got, ref_exact[i]) << "t=" << t << " r=" << r;
          } else {
            ASSERT_NEAR(got, ref_exact[i], tol_exact[i]) << "t=" << t << " r=" << r;
          }
          ASSERT_NEAR(got, ref_f[i], tol_f[i]) << "t=" << t << " r=" << r;
        }
      }
      ++cases;
    }
  }
  RecordProperty("cases", cases);
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, MatmulTest, ::testing::ValuesIn(kWeightTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(MatmulTest, LargeBatchSplitsRowsAcrossThreads) {
  // A product big enough for the threaded path at every level, one Q4_0 and one F16.
  std::mt19937 rng(99);
  for (DType wt : {DType::kQ4_0, DType::kF16, DType::kQ6_K}) {
    const int64_t n_in = 512, n_out = 203, n_tok = kFullSweep ? 37 : 9;
    std::vector<std::byte> w = random_weight(rng, wt, n_in, n_out);
    std::vector<float> x = random_floats(rng, static_cast<size_t>(n_in * n_tok));
    const DType at = quant::activation_type_for(wt);
    const auto act_row = static_cast<int64_t>(*dtype_row_bytes(at, n_in));
    const int64_t w_row = static_cast<int64_t>(w.size()) / n_out;
    std::vector<std::byte> xq(static_cast<size_t>(act_row * n_tok));
    for (int64_t t = 0; t < n_tok; ++t) {
      quant::quantize_activation_row(at, x.data() + t * n_in, xq.data() + t * act_row, n_in);
    }
    for (IsaBackend& ib : all_backends(4, ActivationPrecision::kInt8)) {
      std::vector<float> out(static_cast<size_t>(n_out * n_tok), nan_value());
      ib.backend->matmul(make_view(out.data(), DType::kF32, {n_out, n_tok, 1, 1}),
                         make_view(w.data(), wt, {n_in, n_out, 1, 1}),
                         make_view(x.data(), DType::kF32, {n_in, n_tok, 1, 1}));
      for (int64_t t = 0; t < n_tok; ++t) {
        for (int64_t r = 0; r < n_out; ++r) {
          const float ref = quant::vec_dot(wt, w.data() + r * w_row, xq.data() + t * act_row, n_in);
          ASSERT_NEAR(out[static_cast<size_t>(t * n_out + r)], ref, 1e-4f)
              << cpu_isa_name(ib.isa) << " " << dtype_name(wt);
        }
      }
    }
  }
}

// import_weight may return a repacked copy (the R16 layout of Q4_0/Q4_1/Q8_0 at the VNNI level):
// matmul and embed on the imported view must agree with the GGUF layout for every type, row
// counts off the 16-row groups, and every token-tile remainder.
TEST(MatmulTest, ImportedWeightsMatchTheFileLayout) {
  std::mt19937 rng(2024);
  for (DType wt : kWeightTypes) {
    const int64_t n_in = dtype_block_size(wt) == 256 ? 512 : 160;
    for (int64_t n_out : {1, 16, 37}) {
      for (int64_t n_tok : {1, 2, 3, 4, 7}) {
        std::vector<std::byte> w = random_weight(rng, wt, n_in, n_out);
        std::vector<float> x = random_floats(rng, static_cast<size_t>(n_in * n_tok));
        std::vector<float> bias = random_floats(rng, static_cast<size_t>(n_out));
        const TensorView host = make_view(w.data(), wt, {n_in, n_out, 1, 1});
        const TensorView xv = make_view(x.data(), DType::kF32, {n_in, n_tok, 1, 1});
        const TensorView bv = make_view(bias.data(), DType::kF32, {n_out, 1, 1, 1});
        for (IsaBackend& ib : all_backends()) {  // two-term default: pairs in every tile remainder
          SCOPED_TRACE(std::string(dtype_name(wt)) + " " + std::string(cpu_isa_name(ib.isa)) +
                       " n_out=" + std::to_string(n_out) + " n_tok=" + std::to_string(n_tok));
          std::unique_ptr<Buffer> keep;
          auto imported = ib.backend->import_weight(host, keep);
          ASSERT_TRUE(imported.ok());
          std::vector<float> ref(static_cast<size_t>(n_out * n_tok), nan_value());
          std::vector<float> got(ref.size(), nan_value());
          ib.backend->matmul(make_view(ref.data(), DType::kF32, {n_out, n_tok, 1, 1}), host, xv, &bv);
          ib.backend->matmul(make_view(got.data(), DType::kF32, {n_out, n_tok, 1, 1}), *imported, xv, &bv);
          for (size_t i = 0; i < ref.size(); ++i) {
            ASSERT_NEAR(got[i], ref[i], 1e-4f * (1.0f + std::fabs(ref[i]))) << "i=" << i;
          }
          const std::vector<int32_t> tokens = {static_cast<int32_t>(n_out - 1), 0};
          std::vector<float> e_ref(static_cast<size_t>(n_in * 2)), e_got(e_ref.size());
          ib.backend->embed(make_view(e_ref.data(), DType::kF32, {n_in, 2, 1, 1}), host, tokens, 1.0f);
          ib.backend->embed(make_view(e_got.data(), DType::kF32, {n_in, 2, 1, 1}), *imported, tokens, 1.0f);
          ASSERT_EQ(e_got, e_ref);
        }
      }
    }
  }
}

TEST(MatmulTest, SupportsEveryReferenceWeightType) {
  for (IsaBackend& ib : all_backends(1)) {
    for (DType t : kWeightTypes) EXPECT_TRUE(ib.backend->supports_weight(t)) << dtype_name(t);
    EXPECT_FALSE(ib.backend->supports_weight(DType::kIQ2_XXS));
    EXPECT_NE(ib.backend->name().find(std::string(cpu_isa_name(ib.isa))), std::string::npos);
  }
}

TEST(EmbedTest, DequantizesAndScalesRows) {
  std::mt19937 rng(7);
  const int64_t n_vocab = 11;
  const std::vector<int32_t> tokens = {3, 0, 10, 3, 7};
  for (DType t : kWeightTypes) {
    const int64_t n_embd = dtype_block_size(t) == 256 ? 512 : 96;
    std::vector<std::byte> table = random_weight(rng, t, n_embd, n_vocab);
    const int64_t row = static_cast<int64_t>(table.size()) / n_vocab;
    for (IsaBackend& ib : all_backends()) {
      std::vector<float> out(static_cast<size_t>(n_embd * 5), nan_value());
      ib.backend->embed(make_view(out.data(), DType::kF32, {n_embd, 5, 1, 1}),
                        make_view(table.data(), t, {n_embd, n_vocab, 1, 1}), tokens, 1.5f);
      std::vector<float> deq(static_cast<size_t>(n_embd));
      for (size_t i = 0; i < tokens.size(); ++i) {
        quant::dequantize_row(t, table.data() + tokens[i] * row, deq.data(), n_embd);
        for (int64_t k = 0; k < n_embd; ++k) {
          const double ref = 1.5 * static_cast<double>(deq[static_cast<size_t>(k)]);
          ASSERT_NEAR(out[i * static_cast<size_t>(n_embd) + static_cast<size_t>(k)], ref,
                      1e-6 * std::fabs(ref) + 1e-30)
              << dtype_name(t) << " " << cpu_isa_name(ib.isa);
        }
      }
    }
  }
}

}  // namespace
}  // namespace cera::ops::test
