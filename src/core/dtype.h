// DType: every tensor element type a GGUF file may name, with its block geometry.
// The enum values are the GGUF type ids, so a file's id converts with one range check
// (dtype_from_gguf_id); removed ids (4, 5, 31-33, 36-38) are deliberately absent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cera {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
  kNVFP4 = 40,
  kQ1_0 = 41,
  kQ2_0 = 42,
};

struct DTypeTraits {
  DType dtype;
  std::string_view name;  // GGUF spelling: "F32", "Q4_K", "IQ4_XS"
  uint32_t block_size;    // elements per block (1 for plain types)
  uint32_t type_size;     // bytes per block
  bool quantized;         // block format (scale + codes) rather than plain numbers
};

constexpr uint32_t kQK_K = 256;  // super-block size of the K-quants and most IQ types

const DTypeTraits& dtype_traits(DType dtype);
inline std::string_view dtype_name(DType d) { return dtype_traits(d).name; }
inline uint32_t dtype_block_size(DType d) { return dtype_traits(d).block_size; }
inline uint32_t dtype_type_size(DType d) { return dtype_traits(d).type_size; }

std::optional<DType> dtype_from_gguf_id(uint32_t id);
// Case-insensitive: "q4_k", "Q4_K", "bf16".
std::optional<DType> dtype_from_name(std::string_view name);

// Bytes of one row of n_elements, or nullopt when n_elements is not a multiple of the block size.
std::optional<uint64_t> dtype_row_bytes(DType dtype, uint64_t n_elements);

// Every DType in id order, for tables and sweeps.
const DTypeTraits* dtype_table_begin();
const DTypeTraits* dtype_table_end();

}  // namespace cera
