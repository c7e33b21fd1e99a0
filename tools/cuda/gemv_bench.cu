// GEMV microbenchmark: times the kernel variants of src/ops/cuda/gemv_kernels.cuh on the 8B and
// 1B layer shapes with CUDA events, rotating among weight copies that together exceed the 60 MB
// L2 (each launch reads its weight from HBM), and checks each variant against v2 (one row per
// warp, the kernel the test suite validates against the CPU). Built by CMake with
// -DCERA_CUDA_BENCH=ON (target gemv_bench); tools/cuda/build.sh writes the register reports.
//   gemv_bench [--quick]      prints one line per (type, shape, tokens, variant)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_fill.cuh"
#include "gemv_v3.cuh"
#include "gemv_v5.cuh"
#include "ops/cuda/gemv_stream.cuh"
#include "ops/cuda/launch.cuh"

using namespace cera;
using namespace cera::ops::cuda;
using namespace cera::ops::cuda::gemv_detail;
using cera::tools::fill;

#define CK(x)                                                                            \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

namespace {

constexpr double kRoofline = 4.3e12;  // bytes/s (PERFORMANCE.md)

uint64_t align256(uint64_t x) { return (x + 255) & ~uint64_t{255}; }

struct Shape { const char* name; int64_t n_in, n_out; };
// 8B: Q/K/V 4096 -> 6144, O 4096 -> 4096, gate/up 4096 -> 2 x 14336, down 14336 -> 4096;
// 1B: Q/K/V 2048 -> 3072, gate/up 2048 -> 16384, down 8192 -> 2048.
constexpr Shape kShapes[] = {{"8b.qkv", 4096, 6144},   {"8b.o", 4096, 4096},     {"8b.gate_up", 4096, 28672},
                             {"8b.down", 14336, 4096}, {"1b.qkv", 2048, 3072},   {"1b.gate_up", 2048, 16384},
                             {"1b.down", 8192, 2048}};

using GemvKernel = void (*)(GemvParams);

enum class Variant { kV2, kV2Unroll8, kV3, kV3TwoTerm, kV5Loop, kV5Loop2, kV7Stream };
const char* variant_name(Variant v) {
  switch (v) {
    case Variant::kV2: return "v2";
    case Variant::kV2Unroll8: return "v2-u8";
    case Variant::kV3: return "v3";
    case Variant::kV5Loop: return "v5-loop";
    case Variant::kV5Loop2: return "v5-loop2";
    case Variant::kV7Stream: return "v7-stream";
    default: return "v3-2term";
  }
}

template <DType T, int B>
GemvKernel kernel_of(Variant v, int& rows) {
  constexpr bool kPlain = T == DType::kF16;
  rows = v == Variant::kV2 || v == Variant::kV2Unroll8 || v == Variant::kV5Loop || v == Variant::kV5Loop2 ? 1 : kRows;
  if (v == Variant::kV7Stream) return nullptr;  // launched by stream_launcher
  if constexpr (kPlain) {
    return v == Variant::kV2 ? gemv_f_kernel<T, B, 8> : v == Variant::kV3 ? gemv_rows_f_kernel<T, B> : nullptr;
  } else {
    switch (v) {
      case Variant::kV5Loop: return gemv_loop_q_kernel<T, B, 1>;
      case Variant::kV5Loop2: return gemv_loop_q_kernel<T, B, 2>;
      case Variant::kV2: return gemv_q_kernel<T, B>;
      case Variant::kV2Unroll8: return gemv_q_kernel<T, B, 8>;
      case Variant::kV3: return gemv_rows_q_kernel<T, B, 1>;
      default: return gemv_rows_q_kernel<T, B, 2>;
    }
  }
}

template <DType T>
GemvKernel kernel_for(Variant v, int b, int& rows) {
  switch (b) {
    case 1: return kernel_of<T, 1>(v, rows);
    case 2: return kernel_of<T, 2>(v, rows);
    case 4: return kernel_of<T, 4>(v, rows);
    case 8: return kernel_of<T, 8>(v, rows);
    default: return nullptr;
  }
}

// v7: the streaming kernel's parameters and plan for one weight copy; false: the shape does not stream.
int32_t* g_queues = nullptr;  // kQueueSlots zeroed queues; launch i takes slot i % kQueueSlots
template <DType T, int B>
bool stream_setup(const GemvParams& g, int sms, gemv_stream::StreamParams& sp, gemv_stream::StreamPlan& plan) {
  sp = {};
  sp.g = g;
  if (g_queues == nullptr) {
    CK(cudaMalloc(&g_queues, 2 * sizeof(int32_t) * gemv_stream::kQueueSlots));
    CK(cudaMemset(g_queues, 0, 2 * sizeof(int32_t) * gemv_stream::kQueueSlots));
  }
  sp.first_row[1] = g.part[0].n_out;
  if (!gemv_stream::plan_stream<T, B>(sp, g.part[0].n_out, sms, plan)) return false;
  CK(cudaFuncSetAttribute(gemv_stream::gemv_stream_kernel<T, B>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          int(plan.smem)));
  return true;
}
template <DType T>
auto stream_kernel(int b) {
  return b == 1 ? gemv_stream::gemv_stream_kernel<T, 1> : gemv_stream::gemv_stream_kernel<T, 2>;
}

struct Layout { uint64_t codes, scales, copy; };
Layout layout_of(DType t, const Shape& s) {
  const int64_t nb = s.n_in / 32;
  if (t == DType::kF16) return {uint64_t(s.n_in * 2 * s.n_out), 0, align256(uint64_t(s.n_in * 2 * s.n_out))};
  const uint64_t codes = uint64_t(nb) * (t == DType::kQ4_0 ? 16 : 32) * s.n_out;
  const uint64_t scales = uint64_t(nb) * 2 * s.n_out;
  return {codes, scales, align256(align256(codes) + scales)};
}

template <DType T>
void bench_type(const char* tname, bool quick, double& worst_err) {
  const int tokens[] = {1, 2, 4, 8};  // the device script prints B = 1, 2
  for (const Shape& s : kShapes) {
    const Layout L = layout_of(T, s);
    const int copies = int(std::max<uint64_t>(2, (512ull << 20) / L.copy + 1));  // > 8x L2
    uint8_t* w = nullptr;
    CK(cudaMalloc(&w, L.copy * copies));
    fill(w, int64_t(L.copy * copies), 12345u, T == DType::kF16 ? 1 : 0);
    if (T != DType::kF16) {
      for (int c = 0; c < copies; ++c) fill(w + c * L.copy + align256(L.codes), int64_t(L.scales), 777u + c, 1);
    }
    // Activations for 8 tokens, two code planes (two-term variant).
    const int64_t nq = 8 * s.n_in;
    int8_t* xq = nullptr;
    float2* xds = nullptr;
    float* xf = nullptr;
    float* out = nullptr;
    CK(cudaMalloc(&xq, 2 * nq));
    CK(cudaMalloc(&xds, 2 * nq / 32 * sizeof(float2)));
    CK(cudaMalloc(&xf, nq * sizeof(float)));
    CK(cudaMalloc(&out, 8 * s.n_out * sizeof(float) * 2));
    fill(xq, 2 * nq, 99u, 0);
    // (d, sum): d = small f16 bit patterns reinterpreted are not floats; write floats on the host.
    {
      std::vector<float2> ds(static_cast<size_t>(2 * nq / 32));
      std::vector<float> xfh(static_cast<size_t>(nq));
      uint32_t r = 1;
      auto rnd = [&r] { r = r * 1664525u + 1013904223u; return float(r >> 8) / float(1 << 24); };
      for (auto& v : ds) v = make_float2(0.001f + 0.01f * rnd(), std::floor(200.0f * rnd() - 100.0f));
      for (auto& v : xfh) v = 2.0f * rnd() - 1.0f;
      CK(cudaMemcpy(xds, ds.data(), ds.size() * sizeof(float2), cudaMemcpyHostToDevice));
      CK(cudaMemcpy(xf, xfh.data(), xfh.size() * sizeof(float), cudaMemcpyHostToDevice));
    }
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int b : tokens) {
      if (quick && b > 2) break;
      std::vector<float> ref;
      for (Variant v : {Variant::kV2, Variant::kV2Unroll8, Variant::kV3, Variant::kV3TwoTerm, Variant::kV5Loop,
                        Variant::kV5Loop2, Variant::kV7Stream}) {
        if (quick && (v == Variant::kV2Unroll8 || v == Variant::kV3 || v == Variant::kV3TwoTerm || v == Variant::kV5Loop ||
                      v == Variant::kV5Loop2)) {
          continue;
        }
        int rows = 1;
        const GemvKernel k = kernel_for<T>(v, b, rows);
        const bool stream = v == Variant::kV7Stream;
        if (k == nullptr && !(stream && b <= gemv_stream::kMaxTokens)) continue;
        const int64_t rows_per_block = int64_t(kWarps) * rows;
        auto params = [&](int c) {
          GemvParams p{};
          p.n_parts = 1;
          GemvPart& q = p.part[0];
          q.w.r0 = w + c * L.copy;
          q.w.r1 = q.w.r0 + align256(L.codes);
          q.w.blocks_per_row = s.n_in / 32;
          q.w.row_stride = s.n_in * 2;
          q.out = out;
          q.out_stride = s.n_out;
          q.n_out = s.n_out;
          p.xq = xq;
          p.xds = xds;
          p.xf = xf;
          p.xf_stride = s.n_in;
          p.n_in = s.n_in;
          p.units_per_row = s.n_in / 32;
          p.xq2_offset = nq;
          return p;
        };
        unsigned blocks = unsigned((s.n_out + rows_per_block - 1) / rows_per_block);
        if (v == Variant::kV5Loop || v == Variant::kV5Loop2) {  // resident blocks only
          int per_sm = 0, sms = 0;
          CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, kWarps * 32, 0));
          CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
          blocks = std::min<unsigned>(blocks, unsigned(per_sm * sms));
        }
        int sms = 0;
        CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
        gemv_stream::StreamPlan plan;
        std::vector<gemv_stream::StreamParams> sps(stream ? copies : 0);
        bool streams = true;
        for (int c = 0; c < int(sps.size()); ++c) {
          streams = streams && (b == 1 ? stream_setup<T, 1>(params(c), sms, sps[c], plan)
                                       : stream_setup<T, 2>(params(c), sms, sps[c], plan));
        }
        if (!streams) continue;
        // Every variant launches with programmatic dependent launch (launch.cuh), as in the decode
        // graph: a launch's blocks may start (and v7 its weight copies) while the previous finishes.
        int launches = 0;
        auto run = [&](int c) {
          if (!stream) return launch(nullptr, k, blocks, kWarps * 32, 0, params(c));
          gemv_stream::StreamParams q = sps[c];
          q.queue = g_queues + 2 * (launches++ % gemv_stream::kQueueSlots);
          launch(nullptr, stream_kernel<T>(b), plan.grid, gemv_stream::kThreads, plan.smem, q);
        };
        // Check on copy 0.
        CK(cudaMemset(out, 0xFF, 8 * s.n_out * sizeof(float)));
        run(0);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<float> got(size_t(b * s.n_out));
        CK(cudaMemcpy(got.data(), out, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
        double err = 0, mag = 0;
        bool finite = true;
        if (v == Variant::kV2) {
          ref = got;
        } else {
          for (size_t i = 0; i < got.size(); ++i) {
            finite = finite && std::isfinite(got[i]);
            mag = std::max(mag, double(std::fabs(ref[i])));
            err = std::max(err, double(std::fabs(got[i] - ref[i])));
          }
          err /= std::max(mag, 1e-30);
          if (v != Variant::kV3TwoTerm) worst_err = std::max(worst_err, finite ? err : INFINITY);
        }
        // Time: warm-up, then 5 repeats of `iters` launches rotating the copies; median.
        const int iters = 4 * copies;
        for (int i = 0; i < copies; ++i) run(i % copies);
        std::vector<float> ms;
        for (int rep = 0; rep < 5; ++rep) {
          CK(cudaEventRecord(e0));
          for (int i = 0; i < iters; ++i) run(i % copies);
          CK(cudaEventRecord(e1));
          CK(cudaEventSynchronize(e1));
          float t = 0;
          CK(cudaEventElapsedTime(&t, e0, e1));
          ms.push_back(t / iters);
        }
        std::sort(ms.begin(), ms.end());
        const double us = ms[2] * 1e3;
        const double bytes = double(L.codes + L.scales);
        std::printf("%-5s %-11s B=%d %-9s %8.2f us %7.0f GB/s %5.1f %% of 4.3 TB/s  err_vs_v2 %.1e%s\n", tname, s.name,
                    b, variant_name(v), us, bytes / us * 1e-3, 100.0 * bytes / (us * 1e-6) / kRoofline,
                    v == Variant::kV2 ? 0.0 : err, finite ? "" : " NONFINITE");
      }
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaFree(w));
    CK(cudaFree(xq));
    CK(cudaFree(xds));
    CK(cudaFree(xf));
    CK(cudaFree(out));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  double worst = 0;
  bench_type<DType::kQ4_0>("q4_0", quick, worst);
  bench_type<DType::kQ8_0>("q8_0", quick, worst);
  bench_type<DType::kF16>("f16", quick, worst);
  std::printf("# worst v3 error vs v2 (max |diff| / max |v2|): %.2e %s\n", worst, worst < 1e-4 ? "PASS" : "FAIL");
  return worst < 1e-4 ? 0 : 1;
}
