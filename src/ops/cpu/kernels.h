// The per-ISA kernel table of the CPU backend. Each ISA level is a separate translation unit
// compiled with its own -m flags (CMakeLists.txt) and exposes one KernelTable; the backend picks
// one at construction, so no kernel is chosen per call. Internal to src/ops/cpu.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace cera::ops::cpu {

// The activations of one matmul call, converted once to the weight's paired format
// (quant::activation_type_for): F32 rows are used in place; Q8_0 / Q8_K rows are quantized by the
// reference quantizer, so every ISA level sees the same codes.
struct PackedActivations {
  DType type = DType::kF32;         // F32, Q8_0 or Q8_K
  const std::byte* data = nullptr;  // token t's row at data + t * row_stride
  int64_t row_stride = 0;           // bytes
  // Q8_0 only, [n_tokens][n_blocks] each: the fp16 scale as float, and the block's code sum
  // (offset and minimum terms of the weight formats whose codes are unsigned).
  const float* block_d = nullptr;
  const int32_t* block_sum = nullptr;
  // Activation rows per output token: 1, or 2 for two-term activations (ActivationPrecision::
  // kInt8x2): row 2t holds token t's codes, row 2t + 1 the codes of its residual, both in `type`
  // with their own scales (a residual Q8_0 row's scale is the float in block_d, full precision;
  // its fp16 d field is informational). Kernels treat every row as a token and, on store, add
  // the two rows' results into output token t, so a weight tile is read once for both terms.
  int terms = 1;
};

// out[t][r] = dot(weight row r, activation row t) (+ bias[r]) for rows [row_begin, row_end)
// and every token. Weight rows hold n_in elements, `w_stride` bytes apart. With two-term
// activations out[t][r] = dot(row, act row 2t) + dot(row, act row 2t + 1) (+ bias[r]); kernels
// then run token tiles of even size starting at even rows, so a pair never straddles two tiles.
struct MatmulArgs {
  DType weight_type = DType::kF32;
  const std::byte* weight = nullptr;
  int64_t w_stride = 0;
  int64_t n_in = 0;
  int64_t n_out = 0;
  int64_t n_tokens = 0;  // activation rows: output tokens * act.terms
  PackedActivations act;
  float* out = nullptr;
  int64_t out_stride = 0;  // floats between tokens' output rows
  const float* bias = nullptr;  // [n_out] or null
  // KernelTable::gemm_for kernels only: the activations as KernelTable::gemm_pack wrote them
  // (packed once per call and shared by every thread's chunk of columns).
  const float* gemm_x = nullptr;
};

using MatmulRowsFn = void (*)(const MatmulArgs& args, int64_t row_begin, int64_t row_end);

// One (token, kv-head) unit of attention: the n_group query heads that share kv head `kv_head`.
struct AttentionUnit {
  const float* q;         // n_group consecutive heads of head_dim floats
  float* out;             // same layout as q
  int32_t n_group;
  int32_t kv_head;
  int32_t first;          // visible logical entries [first, last]
  int32_t last;
  const int32_t* table;   // the sequence's block table
};

struct AttentionArgs {
  const std::byte* k = nullptr;  // cache rows of n_head_kv * head_dim elements (F32 or F16)
  const std::byte* v = nullptr;
  int64_t k_stride = 0;  // bytes between slots
  int64_t v_stride = 0;
  int32_t block_size = 0;
  int32_t head_dim = 0;
  float scale = 0.0f;
  float softcap = 0.0f;
};

using AttentionFn = void (*)(const AttentionArgs& args, const AttentionUnit& unit);

struct KernelTable {
  const char* name;
  int tile_rows;                           // weight rows per tile: the row split's granularity
  MatmulRowsFn (*matmul_for)(DType weight);  // null for a weight type without a kernel
  AttentionFn attention;      // F32 K/V rows
  AttentionFn attention_f16;  // F16 K/V rows (converted to float on load; math in float)
  // Kernels over weights in the R16 layout of repack.h (rows split in multiples of kR16Rows;
  // MatmulArgs::w_stride unused); null for a type this level does not repack.
  MatmulRowsFn (*r16_matmul_for)(DType weight);
  // Quantizes n floats (a multiple of 32) to Q8_0 blocks exactly as quant's reference does, and
  // writes each block's scale as float and its code sum (PackedActivations::block_d/block_sum).
  void (*quantize_q8_0)(const float* x, int64_t n, void* blocks, float* block_d, int32_t* block_sum);
  // The second term of a two-term Q8_0 row: given x and its first-term blocks `q1` (from
  // quantize_q8_0), quantizes per block r = x - fp16(d1) * q1 with d2 = max|r| / 127 (float),
  // codes nearbyint(r / d2) clamped to [-127, 127], and writes codes, d2 and the code sums.
  // Every level computes the same codes (same float operations, round half to even).
  void (*quantize_q8_0_residual)(const float* x, int64_t n, const void* q1, void* blocks,
                                 float* block_d, int32_t* block_sum);
  // y[i] = fp16(x[i]) for i < n, round to nearest even, bit-exact with float_to_half (core/half.h).
  void (*f32_to_f16)(const float* x, uint16_t* y, int64_t n);
  // The register-blocked GEMM over plain float weights (F32, F16, BF16; simd_gemm.inc), used
  // instead of matmul_for's dot tiles from gemm_min_tokens activation rows on; null for other
  // types and on the portable level. Rows split in multiples of gemm_cols; F32 activations only.
  // Before it runs, gemm_pack writes token blocks [block_begin, block_end) (gemm_tokens tokens
  // each, the last one short) of a.act to dst, n_in * gemm_tokens floats per block, and
  // MatmulArgs::gemm_x points there.
  MatmulRowsFn (*gemm_for)(DType weight);
  int gemm_cols;
  int gemm_min_tokens;
  int gemm_tokens;
  void (*gemm_pack)(const MatmulArgs& a, int64_t block_begin, int64_t block_end, float* dst);
  // y[i] = f(x[i]) for i < n (x == y allowed): erf, and GELU in its erf and tanh forms. The SIMD
  // levels use simd_gelu.inc's approximations (erf within 1e-6 of std::erf), portable libm.
  void (*erf)(const float* x, float* y, int64_t n);
  void (*gelu_erf)(const float* x, float* y, int64_t n);
  void (*gelu_tanh)(const float* x, float* y, int64_t n);
};

const KernelTable& portable_kernels();
const KernelTable& avx2_kernels();
const KernelTable& avx512_kernels();
const KernelTable& avx512_vnni_kernels();

}  // namespace cera::ops::cpu
