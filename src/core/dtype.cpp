#include "core/dtype.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/check.h"

namespace cera {
namespace {

// Geometry from the GGUF block layouts (FORMATS.md); sorted by id.
constexpr std::array<DTypeTraits, 35> kTable = {{
    {DType::kF32, "F32", 1, 4, false},
    {DType::kF16, "F16", 1, 2, false},
    {DType::kQ4_0, "Q4_0", 32, 18, true},
    {DType::kQ4_1, "Q4_1", 32, 20, true},
    {DType::kQ5_0, "Q5_0", 32, 22, true},
    {DType::kQ5_1, "Q5_1", 32, 24, true},
    {DType::kQ8_0, "Q8_0", 32, 34, true},
    {DType::kQ8_1, "Q8_1", 32, 36, true},
    {DType::kQ2_K, "Q2_K", 256, 84, true},
    {DType::kQ3_K, "Q3_K", 256, 110, true},
    {DType::kQ4_K, "Q4_K", 256, 144, true},
    {DType::kQ5_K, "Q5_K", 256, 176, true},
    {DType::kQ6_K, "Q6_K", 256, 210, true},
    {DType::kQ8_K, "Q8_K", 256, 292, true},
    {DType::kIQ2_XXS, "IQ2_XXS", 256, 66, true},
    {DType::kIQ2_XS, "IQ2_XS", 256, 74, true},
    {DType::kIQ3_XXS, "IQ3_XXS", 256, 98, true},
    {DType::kIQ1_S, "IQ1_S", 256, 50, true},
    {DType::kIQ4_NL, "IQ4_NL", 32, 18, true},
    {DType::kIQ3_S, "IQ3_S", 256, 110, true},
    {DType::kIQ2_S, "IQ2_S", 256, 82, true},
    {DType::kIQ4_XS, "IQ4_XS", 256, 136, true},
    {DType::kI8, "I8", 1, 1, false},
    {DType::kI16, "I16", 1, 2, false},
    {DType::kI32, "I32", 1, 4, false},
    {DType::kI64, "I64", 1, 8, false},
    {DType::kF64, "F64", 1, 8, false},
    {DType::kIQ1_M, "IQ1_M", 256, 56, true},
    {DType::kBF16, "BF16", 1, 2, false},
    {DType::kTQ1_0, "TQ1_0", 256, 54, true},
    {DType::kTQ2_0, "TQ2_0", 256, 66, true},
    {DType::kMXFP4, "MXFP4", 32, 17, true},
    {DType::kNVFP4, "NVFP4", 64, 36, true},
    {DType::kQ1_0, "Q1_0", 128, 18, true},
    {DType::kQ2_0, "Q2_0", 64, 18, true},
}};

const DTypeTraits* find(uint32_t id) {
  auto it = std::lower_bound(kTable.begin(), kTable.end(), id, [](const DTypeTraits& t, uint32_t v) {
    return static_cast<uint32_t>(t.dtype) < v;
  });
  if (it == kTable.end() || static_cast<uint32_t>(it->dtype) != id) return nullptr;
  return &*it;
}

}  // namespace

const DTypeTraits& dtype_traits(DType dtype) {
  const DTypeTraits* t = find(static_cast<uint32_t>(dtype));
  CERA_CHECK_MSG(t != nullptr, "DType value outside the table");
  return *t;
}

std::optional<DType> dtype_from_gguf_id(uint32_t id) {
  const DTypeTraits* t = find(id);
  if (t == nullptr) return std::nullopt;
  return t->dtype;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const DTypeTraits& t : kTable) {
    if (t.name.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < name.size() && same; ++i) {
      same = std::toupper(static_cast<unsigned char>(name[i])) == t.name[i];
    }
    if (same) return t.dtype;
  }
  return std::nullopt;
}

std::optional<uint64_t> dtype_row_bytes(DType dtype, uint64_t n_elements) {
  const DTypeTraits& t = dtype_traits(dtype);
  if (n_elements % t.block_size != 0) return std::nullopt;
  return n_elements / t.block_size * t.type_size;
}

const DTypeTraits* dtype_table_begin() { return kTable.data(); }
const DTypeTraits* dtype_table_end() { return kTable.data() + kTable.size(); }

}  // namespace cera
