// Prints matmul throughput of the CPU backend (weight GB/s and GFLOP/s, fastest of runs) for a few
// weight types at 4096 x 4096, and the machine's read bandwidth, so decode speed can be stated
// as a share of the memory roofline. Weights rotate through copies larger than the L3 cache, so
// every call reads them from DRAM as a real decode step would.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "ops/cpu/cpu_backend.h"
#include "quant/quant.h"

namespace {

using namespace cera;
using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Read bandwidth: each thread sums its half of a 1 GiB array (eight partial sums vectorize).
double read_bandwidth_gbs(int n_threads) {
  const size_t n = (size_t{1} << 30) / sizeof(float);
  std::vector<float> a(n, 1.0f);
  ThreadPool pool(n_threads);
  std::vector<double> times;
  volatile float sink = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    std::vector<float> partial(static_cast<size_t>(n_threads) * 16, 0.0f);
    pool.parallel_for(n_threads, 1, [&](int64_t b, int64_t) {
      const size_t lo = n / n_threads * b, hi = lo + n / n_threads;
      // 64 partial sums: enough independent adds to hide the add latency at baseline SSE2.
      float s[64] = {};
      for (size_t i = lo; i < hi; i += 64) {
        for (int j = 0; j < 64; ++j) s[j] += a[i + j];
      }
      for (int j = 0; j < 64; ++j) partial[b * 16] += s[j];
    });
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    sink = sink + partial[0];
  }
  return n * sizeof(float) / median(times) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  // bench_ops [n_threads] [weight type] [n_tokens]: the last two narrow the table (for perf stat).
  const int n_threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const std::optional<DType> only_type = argc > 2 ? dtype_from_name(argv[2]) : std::nullopt;
  const int64_t only_tokens = argc > 3 ? std::atoll(argv[3]) : 0;
  const int64_t n_in = 4096, n_out = 4096;
  if (!only_type)
    std::printf("read bandwidth (%d threads, 1 GiB): %.1f GB/s\n", n_threads,
                read_bandwidth_gbs(n_threads));
  // Both activation precisions of quantized weights (cpu_backend.h), one backend each.
  using ops::ActivationPrecision;
  auto int8 =
      ops::make_cpu_backend({.n_threads = n_threads, .activations = ActivationPrecision::kInt8});
  auto int8x2 =
      ops::make_cpu_backend({.n_threads = n_threads, .activations = ActivationPrecision::kInt8x2});
  std::printf("%s, matmul %lld x %lld\n\n", int8->name().c_str(), (long long)n_in,
              (long long)n_out);
  std::printf(
      "| weight | activations | n_tokens | ms | weight GB/s | GFLOP/s "
      "|\n|---|---|---|---|---|---|\n");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> row(n_in);
  for (DType t :
       {DType::kQ4_0, DType::kQ4_1, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K, DType::kF16}) {
    for (ops::Backend* backend : {int8.get(), int8x2.get()}) {
      if (only_type && t != *only_type) continue;
      if (t == DType::kF16 && backend == int8x2.get()) continue;  // float activations either way
      const char* act = backend == int8.get() ? "int8" : "int8x2";
      const uint64_t row_bytes = *dtype_row_bytes(t, n_in);
      const uint64_t bytes = row_bytes * n_out;
      const int copies = static_cast<int>(std::max<uint64_t>(2, (256ull << 20) / bytes));
      std::vector<std::vector<std::byte>> w(copies, std::vector<std::byte>(bytes));
      for (int64_t r = 0; r < n_out; ++r) {
        for (float& x : row) x = dist(rng);
        quant::quantize_row(t, row.data(), w[0].data() + r * row_bytes, n_in);
      }
      for (int c = 1; c < copies; ++c) w[c] = w[0];
      // As the model loader does: the backend may repack (and then owns the copy it reads).
      std::vector<TensorView> wv(copies);
      std::vector<std::unique_ptr<ops::Buffer>> keep(copies);
      for (int c = 0; c < copies; ++c) {
        wv[c] = *backend->import_weight(make_view(w[c].data(), t, {n_in, n_out, 1, 1}), keep[c]);
        if (keep[c]) std::vector<std::byte>().swap(w[c]);
      }
      for (int64_t n_tok : {1, 64}) {
        if (only_tokens != 0 && n_tok != only_tokens) continue;
        std::vector<float> x(n_in * n_tok), out(n_out * n_tok);
        for (float& v : x) v = dist(rng);
        std::vector<double> times;
        const int reps = n_tok == 1 ? 200 : 8;
        for (int rep = 0; rep < reps + 2; ++rep) {
          const auto t0 = Clock::now();
          backend->matmul(make_view(out.data(), DType::kF32, {n_out, n_tok, 1, 1}),
                          wv[rep % copies], make_view(x.data(), DType::kF32, {n_in, n_tok, 1, 1}));
          if (rep >= 2) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        }
        // The fastest run: on a shared machine the median mostly measures the neighbours.
        const double s = *std::min_element(times.begin(), times.end());
        std::printf("| %s | %s | %lld | %.3f | %.1f | %.1f |\n", std::string(dtype_name(t)).c_str(),
                    act, (long long)n_tok, s * 1e3, bytes / s / 1e9,
                    2.0 * n_in * n_out * n_tok / s / 1e9);
      }
    }
  }
  // Dispatch cost: back-to-back parallel_for calls with empty chunks, as ~300 small verbs per
  // decode step make them.
  ThreadPool pool(n_threads);
  std::vector<double> times;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    for (int i = 0; i < 10000; ++i) pool.parallel_for(2 * n_threads, 1, [](int64_t, int64_t) {});
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / 10000);
  }
  std::printf("\nthread pool dispatch (%d threads): %.2f us\n", n_threads, median(times) * 1e6);
  return 0;
}
