// The kernel tables' Q8_0 activation quantizer against quant's reference, code for code: random
// rows, exact rounding ties (amax 127 makes 1/d exactly 1), NaN, all-zero blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "cpu_test_util.h"
#include "ops/cpu/kernels.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace cera::ops::test {
namespace {

std::vector<const cpu::KernelTable*> tables() {
  std::vector<const cpu::KernelTable*> t = {&cpu::portable_kernels()};
#if defined(__x86_64__)
  if (cpu_isa_supported(CpuIsa::kAvx2)) t.push_back(&cpu::avx2_kernels());
  if (cpu_isa_supported(CpuIsa::kAvx512)) t.push_back(&cpu::avx512_kernels());
  if (cpu_isa_supported(CpuIsa::kAvx512Vnni)) t.push_back(&cpu::avx512_vnni_kernels());
#endif
  return t;
}

TEST(QuantizeQ8_0, MatchesReferenceCodeForCode) {
  std::mt19937 rng(5);
  const int64_t n = 32 * 40;
  std::vector<float> x = random_floats(rng, static_cast<size_t>(n), -3.0f, 3.0f);
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(j)] = static_cast<float>(j % 2 ? j : -j) + 0.5f;  // ties
  x[0] = 127.0f;
  for (int j = 32; j < 64; ++j) x[static_cast<size_t>(j)] = 0.0f;  // d = 0
  x[70] = nan_value();
  x[100] = 1e30f;
  std::vector<quant::BlockQ8_0> ref(static_cast<size_t>(n / 32));
  quant::quantize_activation_row(DType::kQ8_0, x.data(), ref.data(), n);
  for (const cpu::KernelTable* t : tables()) {
    SCOPED_TRACE(t->name);
    std::vector<quant::BlockQ8_0> got(ref.size());
    std::vector<float> d(ref.size());
    std::vector<int32_t> sum(ref.size());
    t->quantize_q8_0(x.data(), n, got.data(), d.data(), sum.data());
    for (size_t b = 0; b < ref.size(); ++b) {
      ASSERT_EQ(got[b].d, ref[b].d) << "block " << b;
      int32_t s = 0;
      for (int j = 0; j < 32; ++j) {
        ASSERT_EQ(got[b].qs[j], ref[b].qs[j]) << "block " << b << " j " << j;
        s += ref[b].qs[j];
      }
      ASSERT_EQ(sum[b], s);
      ASSERT_EQ(d[b], half_to_float(ref[b].d));
    }
  }
}

// The two-term residual quantizer (kernels.h): every level writes the portable level's codes,
// float scales and sums, and the residual it encodes is within d2 / 2 of x - d1 * q1.
TEST(QuantizeQ8_0, ResidualIsTheSameOnEveryLevel) {
  std::mt19937 rng(6);
  const int64_t n = 32 * 40;
  std::vector<float> x = random_floats(rng, static_cast<size_t>(n), -3.0f, 3.0f);
  for (int j = 32; j < 64; ++j) x[static_cast<size_t>(j)] = 0.0f;          // d1 = d2 = 0
  for (int j = 64; j < 96; ++j) x[static_cast<size_t>(j)] = static_cast<float>(j - 80);
  x[64] = 127.0f;  // d1 = 1 and integer x: r = 0
  for (int j = 96; j < 128; ++j) x[static_cast<size_t>(j)] *= 1e-6f;       // tiny: fp16 d1 subnormal
  x[170] = nan_value();  // block 5
  std::vector<quant::BlockQ8_0> q1(static_cast<size_t>(n / 32));
  quant::quantize_activation_row(DType::kQ8_0, x.data(), q1.data(), n);
  std::vector<quant::BlockQ8_0> ref(q1.size());
  std::vector<float> ref_d(q1.size());
  std::vector<int32_t> ref_sum(q1.size());
  cpu::portable_kernels().quantize_q8_0_residual(x.data(), n, q1.data(), ref.data(), ref_d.data(), ref_sum.data());
  for (size_t b = 0; b < ref.size(); ++b) {
    if (b == 5) continue;  // the NaN block
    const float d1 = half_to_float(q1[b].d);
    for (int j = 0; j < 32; ++j) {
      const double r = static_cast<double>(x[b * 32 + static_cast<size_t>(j)]) - static_cast<double>(d1) * q1[b].qs[j];
      ASSERT_LE(std::fabs(r - static_cast<double>(ref_d[b]) * ref[b].qs[j]), 0.5001 * ref_d[b] + 1e-30)
          << "block " << b << " j " << j;
    }
  }
  EXPECT_EQ(ref_d[1], 0.0f);
  EXPECT_EQ(ref_d[2], 0.0f);
  EXPECT_GT(ref_d[3], 0.0f);  // a float scale: no fp16 underflow for tiny residuals
  for (const cpu::KernelTable* t : tables()) {
    SCOPED_TRACE(t->name);
    std::vector<quant::BlockQ8_0> got(ref.size());
    std::vector<float> d(ref.size());
    std::vector<int32_t> sum(ref.size());
    t->quantize_q8_0_residual(x.data(), n, q1.data(), got.data(), d.data(), sum.data());
    for (size_t b = 0; b < ref.size(); ++b) {
      ASSERT_EQ(got[b].d, ref[b].d) << "block " << b;
      ASSERT_EQ(d[b], ref_d[b]) << "block " << b;
      ASSERT_EQ(sum[b], ref_sum[b]) << "block " << b;
      for (int j = 0; j < 32; ++j) ASSERT_EQ(got[b].qs[j], ref[b].qs[j]) << "block " << b << " j " << j;
    }
  }
}

}  // namespace
}  // namespace cera::ops::test
