// The CPU backend: float32 activations, every weight type of quant.h, kernels chosen at
// construction from the CPU's features (AVX-512 with VNNI, AVX-512, AVX2+FMA, portable scalar).
// The portable level reproduces quant::vec_dot exactly; the SIMD levels agree within rounding.
// Quantized weights take two-term 8-bit activations by default (ActivationPrecision).
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

// How the activations of a matmul with a quantized weight are rounded before the integer dot
// products (float weights always see float activations).
enum class ActivationPrecision : uint8_t {
  kInt8,    // one 8-bit code per element (Q8_0 / Q8_K, as llama.cpp): |error| <= d/2, d = amax/127
  kInt8x2,  // two terms, x ~ d1*q1 + d2*q2 with q2 the residual's codes: |error| <= d2/2 ~ d/254;
            // the weight is still read once, the integer work doubles
};

struct CpuBackendOptions {
  int n_threads = 0;           // 0: every core this process may run on
  CpuIsa isa = CpuIsa::kAuto;  // force a level (tests); an unsupported level is a CheckFailure
  ActivationPrecision activations = ActivationPrecision::kInt8x2;
};

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options = {});

}  // namespace cera::ops
