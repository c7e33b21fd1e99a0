// See cpu_test_util.h.
#include "cpu_test_util.h"

namespace cera::ops::test {

std::vector<IsaBackend> all_backends(int n_threads) {
  std::vector<IsaBackend> out;
  for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAvx512Vnni}) {
    if (!cpu_isa_supported(isa)) continue;
    out.push_back({isa, make_cpu_backend({.n_threads = n_threads, .isa = isa})});
  }
  return out;
}

std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace cera::ops::test
