// GFLOP/s of the CPU backend's matmul over plain float weights (F32, F16, BF16) at the shapes of
// small encoders and 1B-class decoders, for 1 to 512 tokens: the dot tiles below the GEMM's
// threshold, the register-blocked GEMM above it (simd_gemm.inc). Weights stay cache-resident
// (an encoder batch reuses each weight for all its tokens); fastest of the runs is reported.
//   bench_float_matmul [n_threads] [isa: avx2|avx512|avx512-vnni] [weight type]
// (built by tools/bench_ops/CMakeLists.txt, beside bench_ops)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ops/cpu/cpu_backend.h"
#include "quant/quant.h"

namespace {

using namespace cera;
using Clock = std::chrono::steady_clock;

ops::CpuIsa isa_from_name(const char* s) {
  for (ops::CpuIsa isa : {ops::CpuIsa::kPortable, ops::CpuIsa::kAvx2, ops::CpuIsa::kAvx512, ops::CpuIsa::kAvx512Vnni}) {
    if (ops::cpu_isa_name(isa) == s) return isa;
  }
  return ops::CpuIsa::kAuto;
}

struct Shape {
  int64_t n_in, n_out;
};

}  // namespace

int main(int argc, char** argv) {
  const int n_threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const ops::CpuIsa isa = argc > 2 ? isa_from_name(argv[2]) : ops::CpuIsa::kAuto;
  const std::optional<DType> only_type = argc > 3 ? dtype_from_name(argv[3]) : std::nullopt;
  auto backend = ops::make_cpu_backend({.n_threads = n_threads, .isa = isa});
  std::printf("%s, %d threads; GFLOP/s (fastest run)\n\n", backend->name().c_str(), n_threads);
  const std::vector<int64_t> n_toks = {1, 4, 8, 16, 32, 64, 128, 512};
  std::printf("| weight | n_in x n_out |");
  for (int64_t t : n_toks) std::printf(" %lld |", (long long)t);
  std::printf("\n|---|---|");
  for (size_t i = 0; i < n_toks.size(); ++i) std::printf("---|");
  std::printf("\n");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    if (only_type && t != *only_type) continue;
    for (Shape s : {Shape{384, 1536}, Shape{1536, 384}, Shape{384, 384}, Shape{2048, 2048}}) {
      const uint64_t row_bytes = *dtype_row_bytes(t, s.n_in);
      std::vector<std::byte> w(row_bytes * s.n_out);
      std::vector<float> row(s.n_in);
      for (int64_t r = 0; r < s.n_out; ++r) {
        for (float& x : row) x = dist(rng);
        if (t == DType::kF32) {
          std::memcpy(w.data() + r * row_bytes, row.data(), row_bytes);
        } else {
          quant::quantize_row(t, row.data(), w.data() + r * row_bytes, s.n_in);
        }
      }
      std::printf("| %s | %lld x %lld |", std::string(dtype_name(t)).c_str(), (long long)s.n_in,
                  (long long)s.n_out);
      for (int64_t n_tok : n_toks) {
        std::vector<float> x(s.n_in * n_tok), out(s.n_out * n_tok);
        for (float& v : x) v = dist(rng);
        const double flops = 2.0 * s.n_in * s.n_out * n_tok;
        const int reps = std::clamp(static_cast<int>(2e9 / flops), 5, 2000);
        double best = 1e30;
        for (int rep = 0; rep < reps + 2; ++rep) {
          const auto t0 = Clock::now();
          backend->matmul(make_view(out.data(), DType::kF32, {s.n_out, n_tok, 1, 1}),
                          make_view(w.data(), t, {s.n_in, s.n_out, 1, 1}),
                          make_view(x.data(), DType::kF32, {s.n_in, n_tok, 1, 1}));
          if (rep >= 2) best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
        }
        std::printf(" %.1f |", flops / best / 1e9);
        std::fflush(stdout);
      }
      std::printf("\n");
    }
  }
  return 0;
}
