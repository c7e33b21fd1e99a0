// Helpers for the CPU backend tests: one backend per ISA level this machine runs, seeded random
// data, NaN poisoning, and the sweep size (smaller in Debug / sanitizer builds, where the
// reference loops run ~30x slower; every verb and dtype stays covered).
#pragma once

#include <cmath>
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
std::vector<IsaBackend> all_backends(int n_threads = 2);

std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f);
inline float nan_value() { return std::nanf(""); }
inline bool is_nan(float x) { return x != x; }

}  // namespace cera::ops::test
