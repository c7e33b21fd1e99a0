// The CPU backend: float32 activations, every weight type of quant.h, kernels chosen at
// construction from the CPU's features (AVX-512 with VNNI, AVX-512, AVX2+FMA, portable scalar).
// The portable level reproduces quant::vec_dot exactly; the SIMD levels agree within rounding.
#pragma once

#include <memory>
#include <string_view>

#include "ops/backend.h"

namespace cera::ops {

// Kernel sets, in increasing order of what they require of the CPU.
enum class CpuIsa : uint8_t {
  kAuto,        // the best level this CPU supports
  kPortable,    // plain C++: the reference dot products of src/quant
  kAvx2,        // AVX2 + FMA + F16C
  kAvx512,      // AVX-512 F/BW/VL/DQ
  kAvx512Vnni,  // AVX-512 + VNNI (vpdpbusd for the 8-bit dot products)
};

std::string_view cpu_isa_name(CpuIsa isa);  // "portable", "avx2", "avx512", "avx512-vnni"
bool cpu_isa_supported(CpuIsa isa);         // can this CPU run the level? (kAuto: true)
CpuIsa cpu_best_isa();

struct CpuBackendOptions {
  int n_threads = 0;           // 0: every core this process may run on
  CpuIsa isa = CpuIsa::kAuto;  // force a level (tests); an unsupported level is a CheckFailure
};

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options = {});

}  // namespace cera::ops
