// Reference (scalar) block quantization for the GGUF formats: dequantize, quantize, and dot
// products of a weight row with 8-bit quantized activations. These are the ground truth the fast
// kernels are tested against, so they favour exactness over speed: every dequantizer is
// bit-identical to the gguf Python package (0.19.0), float operations in the same order.
//
// Contracts shared by every function here:
//  - n is an element count >= 0 and a multiple of the type's block size (checked: CheckFailure);
//  - block pointers are aligned to 2 bytes (4 for Q8_K), which every GGUF row satisfies; plain
//    float buffers to alignof(float); buffers do not overlap;
//  - functions are pure and thread-safe; nothing is allocated.
// Dequantization cannot be perturbed by FMA contraction: every product it forms (fp16 scale x
// small integers) is exact in float. The legacy quantizers' x*id + 0.5 can be, so their byte
// equality with gguf assumes no contraction (true on x86-64 baseline; elsewhere build this
// library with -ffp-contract=off).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace cera::quant {

// Dequantization: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
// IQ4_NL, IQ4_XS.
bool has_dequantizer(DType type);
// src: n / block_size blocks of `type`; dst: n floats.
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

// Quantization: F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (byte-identical to the gguf package /
// ggml's reference quantizers), Q4_K, Q5_K, Q6_K (weighted least-squares scale search).
bool has_quantizer(DType type);
// src: n floats; dst: n / block_size blocks of `type`.
void quantize_row(DType type, const float* src, void* dst, int64_t n);

// Dot products. Each dotable weight type pairs with one activation format:
//   F32, F16, BF16                          -> F32 (plain floats, accumulated in double)
//   Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL    -> Q8_0 (32-element blocks)
//   Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS    -> Q8_K (256-element blocks, float d, bsums)
bool has_vec_dot(DType weight);
DType activation_type_for(DType weight);  // precondition: has_vec_dot(weight)

// Activation quantization for the formats above (F32 = copy, Q8_0, Q8_K) and its inverse.
// Q8_K uses d = max|x| / 127 (symmetric range, so SIMD sign tricks on int8 stay valid).
void quantize_activation_row(DType act, const float* src, void* dst, int64_t n);
void dequantize_activation_row(DType act, const void* src, float* dst, int64_t n);

// sum_i w[i] * a[i] over one row of n elements: `w` holds n elements of `weight`, `act` holds n
// elements of activation_type_for(weight). Integer accumulation inside each block, float across
// blocks, like the production kernels.
float vec_dot(DType weight, const void* w, const void* act, int64_t n);

}  // namespace cera::quant
