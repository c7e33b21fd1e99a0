// The table that maps each DType to its reference dequantizer, quantizer and dot product, and the
// public entry points that validate arguments once before calling a format's block loop.
// A closed table (not a registry): adding a format means adding a row here and a family file.
#include <array>
#include <cstring>
#include <string>

#include "core/check.h"
#include "quant/blocks.h"
#include "quant/internal.h"
#include "quant/quant.h"

namespace cera::quant {
namespace {

using namespace detail;

struct TypeOps {
  DType type;
  DequantizeFn dequantize;  // nullptr: no dequantizer
  QuantizeFn quantize;      // nullptr: no quantizer
  VecDotFn vec_dot;         // nullptr: no dot product
  DType activation;         // format of vec_dot's activation operand
};

constexpr std::array kOps = {
    TypeOps{DType::kF32, dequantize_f32, nullptr, vec_dot_f32, DType::kF32},
    TypeOps{DType::kF16, dequantize_f16, quantize_f16, vec_dot_f16, DType::kF32},
    TypeOps{DType::kBF16, dequantize_bf16, quantize_bf16, vec_dot_bf16, DType::kF32},
    TypeOps{DType::kQ4_0, dequantize_q4_0, quantize_q4_0, vec_dot_q4_0, DType::kQ8_0},
    TypeOps{DType::kQ4_1, dequantize_q4_1, quantize_q4_1, vec_dot_q4_1, DType::kQ8_0},
    TypeOps{DType::kQ5_0, dequantize_q5_0, quantize_q5_0, vec_dot_q5_0, DType::kQ8_0},
    TypeOps{DType::kQ5_1, dequantize_q5_1, quantize_q5_1, vec_dot_q5_1, DType::kQ8_0},
    TypeOps{DType::kQ8_0, dequantize_q8_0, quantize_q8_0, vec_dot_q8_0, DType::kQ8_0},
    TypeOps{DType::kQ2_K, dequantize_q2_k, nullptr, vec_dot_q2_k, DType::kQ8_K},
    TypeOps{DType::kQ3_K, dequantize_q3_k, nullptr, vec_dot_q3_k, DType::kQ8_K},
    TypeOps{DType::kQ4_K, dequantize_q4_k, quantize_q4_k, vec_dot_q4_k, DType::kQ8_K},
    TypeOps{DType::kQ5_K, dequantize_q5_k, quantize_q5_k, vec_dot_q5_k, DType::kQ8_K},
    TypeOps{DType::kQ6_K, dequantize_q6_k, quantize_q6_k, vec_dot_q6_k, DType::kQ8_K},
    TypeOps{DType::kIQ4_NL, dequantize_iq4_nl, nullptr, vec_dot_iq4_nl, DType::kQ8_0},
    TypeOps{DType::kIQ4_XS, dequantize_iq4_xs, nullptr, vec_dot_iq4_xs, DType::kQ8_K},
};

const TypeOps* find_ops(DType type) {
  for (const TypeOps& ops : kOps) {
    if (ops.type == type) return &ops;
  }
  return nullptr;
}

// Checks the shared contract and returns the number of blocks in n elements.
int64_t checked_blocks(DType type, int64_t n, const void* blocks, const void* other) {
  const DTypeTraits& t = dtype_traits(type);
  CERA_CHECK_MSG(n >= 0 && n % t.block_size == 0,
                 std::string(t.name) + ": element count " + std::to_string(n) +
                     " is not a multiple of the block size " + std::to_string(t.block_size));
  const auto align = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
  const uintptr_t need = type == DType::kQ8_K || type == DType::kF32 ? 4 : 2;
  CERA_CHECK_MSG(n == 0 || (align(blocks) % need == 0 && align(other) % alignof(float) == 0),
                 std::string(t.name) + ": misaligned buffer");
  return n / t.block_size;
}

const TypeOps& require(DType type, bool ok, const char* what) {
  const TypeOps* ops = find_ops(type);
  CERA_CHECK_MSG(ops != nullptr && ok,
                 std::string("no reference ") + what + " for " + std::string(dtype_name(type)));
  return *ops;
}

}  // namespace

bool has_dequantizer(DType type) {
  const TypeOps* ops = find_ops(type);
  return ops != nullptr && ops->dequantize != nullptr;
}

bool has_quantizer(DType type) {
  const TypeOps* ops = find_ops(type);
  return ops != nullptr && ops->quantize != nullptr;
}

bool has_vec_dot(DType weight) {
  const TypeOps* ops = find_ops(weight);
  return ops != nullptr && ops->vec_dot != nullptr;
}

DType activation_type_for(DType weight) {
  return require(weight, has_vec_dot(weight), "dot product").activation;
}

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  const TypeOps& ops = require(type, has_dequantizer(type), "dequantizer");
  ops.dequantize(src, dst, checked_blocks(type, n, src, dst));
}

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
  const TypeOps& ops = require(type, has_quantizer(type), "quantizer");
  ops.quantize(src, dst, checked_blocks(type, n, dst, src));
}

void quantize_activation_row(DType act, const float* src, void* dst, int64_t n) {
  const int64_t n_blocks = checked_blocks(act, n, dst, src);
  switch (act) {
    case DType::kF32:
      if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kQ8_0:
      quantize_q8_0(src, dst, n_blocks);
      return;
    case DType::kQ8_K:
      quantize_q8_k(src, dst, n_blocks);
      return;
    default:
      break;
  }
  CERA_CHECK_MSG(false, "not an activation format: " + std::string(dtype_name(act)));
}

void dequantize_activation_row(DType act, const void* src, float* dst, int64_t n) {
  const int64_t n_blocks = checked_blocks(act, n, src, dst);
  switch (act) {
    case DType::kF32:
      dequantize_f32(src, dst, n_blocks);
      return;
    case DType::kQ8_0:
      dequantize_q8_0(src, dst, n_blocks);
      return;
    case DType::kQ8_K:
      dequantize_q8_k(src, dst, n_blocks);
      return;
    default:
      break;
  }
  CERA_CHECK_MSG(false, "not an activation format: " + std::string(dtype_name(act)));
}

float vec_dot(DType weight, const void* w, const void* act, int64_t n) {
  const TypeOps& ops = require(weight, has_vec_dot(weight), "dot product");
  const int64_t n_blocks = checked_blocks(weight, n, w, nullptr);
  checked_blocks(ops.activation, n, act, nullptr);
  return ops.vec_dot(w, act, n_blocks);
}

}  // namespace cera::quant
