// Reader for the quantization fixtures in tests/fixtures/quant/, written by
// tools/quant/make_fixtures.py from the gguf Python package (the format is documented there).
// Also the small numeric helpers the quant tests share.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace cera::quant::test {

enum class FixtureKind : uint32_t { kDequantize = 1, kQuantize = 2 };

struct Fixture {
  FixtureKind kind;
  DType type;
  int64_t n;                    // elements
  int64_t n_random;             // the first n_random elements are random; the rest are edge cases
  std::vector<uint8_t> blocks;  // n / block_size blocks of `type`
  std::vector<float> floats;    // [n] gguf's dequantized output, or the quantizer's input
};

std::filesystem::path fixture_path(FixtureKind kind, DType type);
// nullopt when the file is missing; a malformed file fails the calling test.
std::optional<Fixture> load_fixture(FixtureKind kind, DType type);

// Root-mean-square of a[i] - b[i] over the first n elements, in double.
double rmse(const float* a, const float* b, int64_t n);

// n normal(0, 1) floats from a fixed seed.
std::vector<float> random_normal(int64_t n, uint64_t seed);

}  // namespace cera::quant::test
