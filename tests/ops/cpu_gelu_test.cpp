// The vector erf and GELU of each kernel level (simd_gelu.inc) against double-precision libm:
// erf within 1e-6 absolute over [-10, 10] (erf_inputs), GELU (erf form) within 0.5 |x| 1e-6 plus two float roundings of the result, GELU
// (tanh form) within 4e-7 relative (plus the portable formula's cancellation); and the
// activation verbs route to them (both forms, gated and plain, rows off the vector width).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "cpu_test_util.h"
#include "ops/cpu/kernels.h"

namespace cera::ops::test {
namespace {

struct Level {
  CpuIsa isa;
  const cpu::KernelTable* table;
};

std::vector<Level> levels() {
  std::vector<Level> out = {{CpuIsa::kPortable, &cpu::portable_kernels()}};
#if defined(__x86_64__) || defined(_M_X64)
  if (cpu_isa_supported(CpuIsa::kAvx2)) out.push_back({CpuIsa::kAvx2, &cpu::avx2_kernels()});
  if (cpu_isa_supported(CpuIsa::kAvx512)) out.push_back({CpuIsa::kAvx512, &cpu::avx512_kernels()});
  if (cpu_isa_supported(CpuIsa::kAvx512Vnni)) out.push_back({CpuIsa::kAvx512Vnni, &cpu::avx512_vnni_kernels()});
#endif
  return out;
}

// A 1/4096 grid over [-10, 10], every 509th float of [-1, 1] (both signs: all binades down to
// the subnormals), and the edges of the approximation's pieces.
std::vector<float> erf_inputs() {
  std::vector<float> x;
  for (float v = -10.0f; v <= 10.0f; v += 1.0f / 4096) x.push_back(v);
  for (uint32_t bits = 0; bits <= 0x3f800000u; bits += 509) {
    float v;
    std::memcpy(&v, &bits, sizeof v);
    x.push_back(v);
    x.push_back(-v);
  }
  for (float v : {0.0f, -0.0f, 1.0f, -1.0f, 4.0f, -4.0f, std::nextafter(1.0f, 0.0f), std::nextafter(-1.0f, 0.0f)}) {
    x.push_back(v);
  }
  return x;
}

double gelu_erf_ref(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(GeluTest, ErfWithin1e6OfLibmOnEveryLevel) {
  const std::vector<float> x = erf_inputs();
  for (const Level& l : levels()) {
    std::vector<float> y(x.size(), nan_value());
    l.table->erf(x.data(), y.data(), static_cast<int64_t>(x.size()));
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double err = std::fabs(y[i] - std::erf(static_cast<double>(x[i])));
      worst = std::max(worst, err);
      ASSERT_LE(err, 1e-6) << cpu_isa_name(l.isa) << " x=" << x[i];
    }
    std::printf("%s: erf max abs error %.3g over %zu points\n", std::string(cpu_isa_name(l.isa)).c_str(), worst, x.size());
  }
}

TEST(GeluTest, BothFormsMatchDoubleReference) {
  std::vector<float> x = erf_inputs();
  for (float v = -30.0f; v <= 30.0f; v += 0.01f) x.push_back(v);
  for (const Level& l : levels()) {
    SCOPED_TRACE(std::string(cpu_isa_name(l.isa)));
    std::vector<float> y(x.size(), nan_value());
    l.table->gelu_erf(x.data(), y.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const double ref = gelu_erf_ref(x[i]);
      ASSERT_NEAR(y[i], ref, 0.5 * std::fabs(x[i]) * 1e-6 + 2.5e-7 * std::fabs(ref) + 1e-44) << "x=" << x[i];  // + a subnormal ulp
    }
    l.table->gelu_tanh(x.data(), y.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const double ref = gelu_tanh_ref(x[i]);
      // The portable level's 1 + tanh(y) cancels in float: its error is absolute, ~2 ulp of 1.
      ASSERT_NEAR(y[i], ref, 4e-7 * std::fabs(ref) + 0.5 * std::fabs(x[i]) * 2.4e-7 + 1e-44) << "x=" << x[i];
    }
  }
}

TEST(GeluTest, ActivationVerbsUseThemForAnyRowLength) {
  std::mt19937 rng(3);
  for (int64_t n : {1, 7, 16, 37, 1536}) {
    const int64_t rows = 3;
    std::vector<float> x = random_floats(rng, static_cast<size_t>(n * rows), -6.0f, 6.0f);
    std::vector<float> up = random_floats(rng, x.size());
    for (IsaBackend& ib : all_backends()) {
      for (Activation act : {Activation::kGeluErf, Activation::kGeluTanh}) {
        SCOPED_TRACE(std::string(cpu_isa_name(ib.isa)) + " n=" + std::to_string(n));
        std::vector<float> out(x.size(), nan_value()), gated(x.size(), nan_value());
        ib.backend->activation(make_view(out.data(), DType::kF32, {n, rows, 1, 1}),
                               make_view(x.data(), DType::kF32, {n, rows, 1, 1}), act);
        ib.backend->gated_activation(make_view(gated.data(), DType::kF32, {n, rows, 1, 1}),
                                     make_view(x.data(), DType::kF32, {n, rows, 1, 1}),
                                     make_view(up.data(), DType::kF32, {n, rows, 1, 1}), act);
        for (size_t i = 0; i < x.size(); ++i) {
          const double ref = act == Activation::kGeluErf ? gelu_erf_ref(x[i]) : gelu_tanh_ref(x[i]);
          ASSERT_NEAR(out[i], ref, 1e-6 * (1.0 + std::fabs(ref))) << "i=" << i;
          ASSERT_NEAR(gated[i], ref * up[i], 1e-6 * (1.0 + std::fabs(ref))) << "i=" << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace cera::ops::test
