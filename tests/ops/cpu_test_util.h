// Helpers for the CPU backend tests: one backend per ISA level this machine runs, seeded random
// data, NaN poisoning, and the sweep size (smaller in Debug / sanitizer builds, where the
// reference loops run ~30x slower; every verb and dtype stays covered).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "ops/backend.h"
#include "ops/cpu/cpu_backend.h"

namespace cera::ops::test {

#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__)
inline constexpr bool kFullSweep = true;
#else
inline constexpr bool kFullSweep = false;
#endif

struct IsaBackend {
  CpuIsa isa;
  std::unique_ptr<Backend> backend;
};

// Every level this CPU supports, each with 2 threads (so the row split is exercised).
std::vector<IsaBackend> all_backends(int n_threads = 2,
                                     ActivationPrecision activations = ActivationPrecision::kInt8x2);

std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f);
// [n_out] rows of n_in elements of type t, random: quantized from random floats where quant has
// a quantizer, else random bytes with small positive fp16 scales.
std::vector<std::byte> random_weight(std::mt19937& rng, DType t, int64_t n_in, int64_t n_out);
inline float nan_value() { return std::nanf(""); }
inline bool is_nan(float x) { return x != x; }

}  // namespace cera::ops::test
