// See cpu_test_util.h.
#include "cpu_test_util.h"

#include <cstring>

#include "core/half.h"
#include "quant/quant.h"

namespace cera::ops::test {

std::vector<IsaBackend> all_backends(int n_threads, ActivationPrecision activations) {
  std::vector<IsaBackend> out;
  for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAvx512Vnni}) {
    if (!cpu_isa_supported(isa)) continue;
    out.push_back({isa, make_cpu_backend({.n_threads = n_threads, .isa = isa, .activations = activations})});
  }
  return out;
}

std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Byte offsets of the fp16 scale fields of the formats without a reference quantizer; their
// weights are random bytes with these fields set to small positive scales.
static std::vector<int> scale_fields(DType t) {
  switch (t) {
    case DType::kQ2_K: return {80, 82};
    case DType::kQ3_K: return {108};
    case DType::kIQ4_NL:
    case DType::kIQ4_XS: return {0};
    default: return {};
  }
}

// [n_out] rows of n_in elements of type t, random.
std::vector<std::byte> random_weight(std::mt19937& rng, DType t, int64_t n_in, int64_t n_out) {
  const auto row_bytes = static_cast<int64_t>(*dtype_row_bytes(t, static_cast<uint64_t>(n_in)));
  std::vector<std::byte> w(static_cast<size_t>(row_bytes * n_out));
  if (t == DType::kF32) {
    const std::vector<float> f = random_floats(rng, static_cast<size_t>(n_in * n_out));
    std::memcpy(w.data(), f.data(), w.size());
  } else if (quant::has_quantizer(t)) {
    for (int64_t r = 0; r < n_out; ++r) {
      const std::vector<float> f = random_floats(rng, static_cast<size_t>(n_in));
      quant::quantize_row(t, f.data(), w.data() + r * row_bytes, n_in);
    }
  } else {
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(0.002f, 0.02f);
    for (std::byte& b : w) b = static_cast<std::byte>(byte(rng));
    const int64_t block_bytes = dtype_type_size(t);
    for (int64_t off = 0; off < static_cast<int64_t>(w.size()); off += block_bytes) {
      for (int field : scale_fields(t)) {
        const uint16_t h = float_to_half(scale(rng));
        std::memcpy(w.data() + off + field, &h, sizeof h);
      }
    }
  }
  return w;
}

}  // namespace cera::ops::test
