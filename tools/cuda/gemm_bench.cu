// Prefill GEMM microbenchmark: the in-kernel-dequantizing tensor-core GEMM (gemm_q.cu) against
// the older path (weight dequantized to an f16 copy, then cuBLAS) on the 8B shapes, timed with
// CUDA events after warm-up (median of the repetitions), reporting TFLOP/s (2 n_in n_out n_tokens
// per call). Both paths include their activation conversion. Built with -DCERA_CUDA_BENCH=ON
// (target gemm_bench); run on the GPU machine:
//   gemm_bench [--types q4_0,q8_0,...] [--tokens 512,4096] [--reps 20] [--check]
// --check also compares the two paths' outputs (max |a - b| / max |b|) on every shape.
// CERA_CUDA_GEMM_Q=wgmma in the environment times gemm_q.cu's wgmma variant instead of mma.sync.
// --serving times the serving-batch kernels instead, on the same shapes: gemm_rows (gemm_rows.cu)
// and, up to 16 rows, the GEMV, for --tokens (default 1,4,8,16,32,64,128,256), reporting the
// weight's bytes over the time (GB/s; 4.3 TB/s is the H200's DRAM) and TFLOP/s. The activation
// conversion is cached after the first call (as Q/K/V share one), so the times are the kernels'.
//   gemm_bench --serving [--types q4_0] [--tokens 16,64] [--reps 50]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gemm_q.h"
#include "ops/cuda/gemm_rows.h"
#include "ops/cuda/weight_layout.h"

using namespace cera;
using namespace cera::ops::cuda;

namespace {

// Deterministic bytes; for block formats the f16 scale fields are overwritten with sane values
// below so the products stay finite (speed does not depend on values, --check does).
__global__ void fill_bytes(uint8_t* p, uint64_t n, uint32_t seed) {
  const uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint32_t h = uint32_t(i) * 2654435761u ^ seed;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  p[i] = uint8_t(h >> 8);
}
__global__ void fill_f16(uint16_t* p, uint64_t n, uint16_t bits, uint32_t stride_halves) {
  const uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i * stride_halves >= n) return;
  p[i * stride_halves] = bits;
}
__global__ void fill_floats(float* p, uint64_t n) {
  const uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint32_t h = uint32_t(i) * 2654435761u;
  h ^= h >> 15;
  h *= 2246822519u;
  p[i] = float(h >> 8) / float(1 << 24) * 2.0f - 1.0f;
}

struct TypeName {
  const char* name;
  DType t;
};
constexpr TypeName kTypes[] = {{"f16", DType::kF16},   {"bf16", DType::kBF16}, {"q4_0", DType::kQ4_0},
                               {"q4_1", DType::kQ4_1}, {"q5_0", DType::kQ5_0}, {"q5_1", DType::kQ5_1},
                               {"q8_0", DType::kQ8_0}, {"q4_k", DType::kQ4_K}, {"q5_k", DType::kQ5_K},
                               {"q6_k", DType::kQ6_K}};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t a = 0;
  while (a <= s.size()) {
    const size_t b = std::min(s.find(',', a), s.size());
    if (b > a) out.push_back(s.substr(a, b - a));
    a = b + 1;
  }
  return out;
}

// Scales of the block formats: every f16 field that scales codes gets a small positive value.
void sane_scales(DType t, uint8_t* w, int64_t n_in, int64_t n_out) {
  const WeightLayout l = weight_layout(t, n_in, n_out);
  const uint64_t blocks = uint64_t(n_in / dtype_block_size(t) * n_out);
  const uint16_t small = 0x1C00;  // 2^-8
  auto fill = [&](uint64_t off, uint64_t n_halves, uint32_t stride) {
    fill_f16<<<unsigned((n_halves / stride + 255) / 256), 256>>>(reinterpret_cast<uint16_t*>(w + off), n_halves, small,
                                                                  stride);
  };
  switch (t) {
    case DType::kQ4_0: case DType::kQ8_0: fill(l.region_offset[1], blocks, 1); break;
    case DType::kQ4_1: fill(l.region_offset[1], 2 * blocks, 1); break;
    case DType::kQ5_0: fill(l.region_offset[2], blocks, 1); break;
    case DType::kQ5_1: fill(l.region_offset[2], 2 * blocks, 1); break;
    case DType::kQ6_K: fill(l.region_offset[1], blocks, 1); break;
    case DType::kQ4_K: fill(0, blocks * 72, 72); fill(2, blocks * 72, 72); break;  // d, dmin of 144-byte blocks
    case DType::kQ5_K: fill(0, blocks * 88, 88); fill(2, blocks * 88, 88); break;
    default: break;
  }
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> types = {"q4_0", "q8_0", "q4_k", "q6_k", "f16"};
  std::vector<int64_t> tokens = {512, 4096};
  int reps = 20;
  bool check = false, serving = false, tokens_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--types" && i + 1 < argc) types = split(argv[++i]);
    else if (a == "--tokens" && i + 1 < argc) {
      tokens.clear();
      tokens_given = true;
      for (const std::string& s : split(argv[++i])) tokens.push_back(std::stoll(s));
    } else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--check") check = true;
    else if (a == "--serving") serving = true;
    else {
      std::fprintf(stderr, "usage: gemm_bench [--types q4_0,...] [--tokens 512,4096] [--reps N] [--check] [--serving]\n");
      return 2;
    }
  }
  if (serving && !tokens_given) tokens = {1, 4, 8, 16, 32, 64, 128, 256};
  for (int64_t nt : tokens) {
    if (serving && (nt < 1 || nt > kRowsMaxLimit)) {
      std::fprintf(stderr, "gemm_bench --serving: --tokens must be 1-%lld\n", (long long)kRowsMaxLimit);
      return 2;
    }
  }
  // gemm() reads this once: from here on it is the cuBLAS path; gemm_q() is called directly.
  setenv("CERA_CUDA_GEMM", "cublas", 1);
  CudaContext ctx(0);
  std::printf("device: %s, %d SMs\n", ctx.device_name().c_str(), ctx.sm_count());
  if (serving) {
    std::printf("| type | n_in | n_out | tokens | gemm_rows us | GB/s | TFLOP/s | GEMV us | GB/s |\n");
    std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  } else {
    std::printf("| type | n_in | n_out | tokens | gemm_q us | gemm_q TFLOP/s | cublas us | cublas TFLOP/s | speedup |%s\n",
                check ? " max|d|/max|ref| |" : "");
    std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |%s\n", check ? " --- |" : "");
  }
  const int64_t shapes[][2] = {{4096, 6144}, {4096, 4096}, {4096, 28672}, {14336, 4096}};
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (const std::string& tn : types) {
    const TypeName* tp = nullptr;
    for (const TypeName& k : kTypes) if (tn == k.name) tp = &k;
    if (tp == nullptr) {
      std::fprintf(stderr, "unknown type %s\n", tn.c_str());
      return 2;
    }
    for (const auto& sh : shapes) {
      const int64_t n_in = sh[0], n_out = sh[1];
      const WeightLayout l = weight_layout(tp->t, n_in, n_out);
      uint8_t* w = nullptr;
      CERA_CUDA_CHECK(cudaMalloc(&w, l.total_bytes));
      fill_bytes<<<unsigned((l.total_bytes + 255) / 256), 256>>>(w, l.total_bytes, 17u);
      if (tp->t == DType::kF16 || tp->t == DType::kBF16) {
        // Plain rows: small finite values (bf16/f16 with exponent bits forced low).
        const uint16_t bits = tp->t == DType::kF16 ? 0x2C00 : 0x3C00;  // f16 2^-4, bf16 2^-7
        fill_f16<<<unsigned((l.total_bytes / 2 + 255) / 256), 256>>>(reinterpret_cast<uint16_t*>(w), l.total_bytes / 2,
                                                                     bits, 1);
      } else {
        sane_scales(tp->t, w, n_in, n_out);
      }
      TensorView wv = make_view(w, tp->t, {n_in, n_out, 1, 1});
      wv.device = Device::kCuda;
      for (int64_t nt : tokens) {
        float *x = nullptr, *out_a = nullptr, *out_b = nullptr;
        CERA_CUDA_CHECK(cudaMalloc(&x, uint64_t(n_in * nt) * 4));
        CERA_CUDA_CHECK(cudaMalloc(&out_a, uint64_t(n_out * nt) * 4));
        CERA_CUDA_CHECK(cudaMalloc(&out_b, uint64_t(n_out * nt) * 4));
        fill_floats<<<unsigned((n_in * nt + 255) / 256), 256>>>(x, uint64_t(n_in * nt));
        TensorView xv = make_view(x, DType::kF32, {n_in, nt, 1, 1});
        TensorView av = make_view(out_a, DType::kF32, {n_out, nt, 1, 1});
        TensorView bv = make_view(out_b, DType::kF32, {n_out, nt, 1, 1});
        xv.device = av.device = bv.device = Device::kCuda;
        auto time = [&](auto&& call) {
          for (int i = 0; i < 3; ++i) call();
          std::vector<float> ms;
          for (int i = 0; i < reps; ++i) {
            cudaEventRecord(e0, ctx.stream());
            call();
            cudaEventRecord(e1, ctx.stream());
            cudaEventSynchronize(e1);
            float m = 0;
            cudaEventElapsedTime(&m, e0, e1);
            ms.push_back(m);
          }
          return median(ms) * 1000.0f;  // us
        };
        if (serving) {
          const double bytes = double(l.total_bytes), flop = 2.0 * double(n_in) * double(n_out) * double(nt);
          const bool rows = gemm_rows_supports(wv);
          const float us_r = rows ? time([&] { gemm_rows(ctx, av, wv, xv, nullptr); }) : 0.0f;
          const bool gemv_ok = nt <= kGemvMaxTokens;
          const float us_g = gemv_ok ? time([&] { gemv(ctx, bv, wv, xv, nullptr); }) : 0.0f;
          CERA_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
          auto cell = [](bool on, double v, const char* f) {
            static char buf[32];
            if (!on) return std::string("-");
            std::snprintf(buf, sizeof buf, f, v);
            return std::string(buf);
          };
          std::printf("| %s | %lld | %lld | %lld | %s | %s | %s | %s | %s |\n", tp->name, (long long)n_in,
                      (long long)n_out, (long long)nt, cell(rows, us_r, "%.1f").c_str(),
                      cell(rows, bytes / us_r * 1e-3, "%.0f").c_str(), cell(rows, flop / us_r * 1e-6, "%.1f").c_str(),
                      cell(gemv_ok, us_g, "%.1f").c_str(), cell(gemv_ok, bytes / us_g * 1e-3, "%.0f").c_str());
          std::fflush(stdout);
          cudaFree(x);
          cudaFree(out_a);
          cudaFree(out_b);
          continue;
        }
        const float us_q = time([&] { gemm_q(ctx, av, wv, xv, nullptr); });
        const float us_c = time([&] { gemm(ctx, bv, wv, xv, nullptr); });
        CERA_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
        const double flop = 2.0 * double(n_in) * double(n_out) * double(nt);
        std::printf("| %s | %lld | %lld | %lld | %.1f | %.1f | %.1f | %.1f | %.2fx |", tp->name, (long long)n_in,
                    (long long)n_out, (long long)nt, us_q, flop / us_q * 1e-6, us_c, flop / us_c * 1e-6, us_c / us_q);
        if (check) {
          std::vector<float> a(size_t(n_out * nt)), b(a.size());
          CERA_CUDA_CHECK(cudaMemcpy(a.data(), out_a, a.size() * 4, cudaMemcpyDeviceToHost));
          CERA_CUDA_CHECK(cudaMemcpy(b.data(), out_b, b.size() * 4, cudaMemcpyDeviceToHost));
          double dmax = 0, rmax = 0;
          for (size_t i = 0; i < a.size(); ++i) {
            dmax = std::max(dmax, std::isnan(a[i]) ? INFINITY : std::fabs(double(a[i]) - b[i]));
            rmax = std::max(rmax, std::fabs(double(b[i])));
          }
          std::printf(" %.2e |", dmax / std::max(rmax, 1e-30));
        }
        std::printf("\n");
        std::fflush(stdout);
        cudaFree(x);
        cudaFree(out_a);
        cudaFree(out_b);
      }
      // Report the freed weight, as the backend does on buffer release: the f16 copies made ahead
      // (dequant_ahead.h) remember weights by address, and the next cudaMalloc may reuse it.
      ctx.memory_changed(w, l.total_bytes);
      cudaFree(w);
    }
  }
  return 0;
}
