#include "cuda_test_util.h"

#include <cstdlib>

#include "ops/cpu/cpu_backend.h"
#include "ops/cuda/cuda_backend.h"

namespace cera::ops::test {
namespace {
std::string g_reason;
}

Backends& backends() {
  static Backends b = [] {
    Backends r;
    // The CUDA GEMV path quantizes activations to one 8-bit term (Q8_0 / Q8_K), so the reference
    // is the CPU in that mode (its default became two terms, ActivationPrecision::kInt8x2): block
    // integer dots then agree exactly and the 2e-5 GEMV tolerance stays meaningful.
    r.cpu = make_cpu_backend({.n_threads = 0, .activations = ActivationPrecision::kInt8});
    auto cuda = make_cuda_backend({});
    if (cuda.ok()) {
      r.cuda = std::move(cuda).value();
    } else {
      g_reason = cuda.status().to_string();
    }
    return r;
  }();
  return b;
}

std::string cuda_unavailable_reason() { return g_reason; }

Tensor make_tensor(Backend& b, std::array<int64_t, 4> ne, const std::vector<float>& values) {
  Tensor t;
  const int64_t n = ne[0] * ne[1] * ne[2] * ne[3];
  auto buf = b.allocate(static_cast<uint64_t>(n) * sizeof(float));
  CERA_CHECK(buf.ok());
  t.buffer = std::move(buf).value();
  t.view = t.buffer->view(DType::kF32, ne, b.device());
  CERA_CHECK(static_cast<int64_t>(values.size()) == n);
  b.upload(t.view, values.data());
  return t;
}

std::vector<float> read_tensor(Backend& b, const TensorView& v) {
  std::vector<float> out(static_cast<size_t>(v.n_elements()));
  b.download(out.data(), v);
  return out;
}

void poison(Backend& b, const TensorView& v) {
  const std::vector<float> nan(static_cast<size_t>(v.n_elements()), std::nanf(""));
  b.upload(v, nan.data());
}

bool quick_sweep() {
  const char* v = std::getenv("CERA_CUDA_TEST_QUICK");
  return v != nullptr && v[0] == '1';
}

std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

Comparison compare(const std::vector<float>& got, const std::vector<float>& ref) {
  Comparison c;
  CERA_CHECK(got.size() == ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && !std::isnan(ref[i])) {
      if (c.first_nan < 0) c.first_nan = static_cast<int64_t>(i);
      ++c.nan_count;
      continue;
    }
    const double d = double(got[i]) - double(ref[i]);
    num += d * d;
    den += double(ref[i]) * double(ref[i]);
  }
  c.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  if (c.nan_count > 0) c.rel_l2 = INFINITY;
  return c;
}

}  // namespace cera::ops::test
