// Fixture reading and shared helpers for the quant tests (see fixture.h).
#include "fixture.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "test_paths.h"

namespace cera::quant::test {

std::filesystem::path fixture_path(FixtureKind kind, DType type) {
  const std::string prefix = kind == FixtureKind::kDequantize ? "dequant_" : "quant_";
  return cera::test::source_dir() / "tests/fixtures/quant" /
         (prefix + std::string(dtype_name(type)) + ".bin");
}

std::optional<Fixture> load_fixture(FixtureKind kind, DType type) {
  std::ifstream in(fixture_path(kind, type), std::ios::binary);
  if (!in) return std::nullopt;
  char magic[8];
  uint32_t header32[2];
  uint64_t header64[3];
  in.read(magic, sizeof magic);
  in.read(reinterpret_cast<char*>(header32), sizeof header32);
  in.read(reinterpret_cast<char*>(header64), sizeof header64);
  EXPECT_TRUE(in && std::memcmp(magic, "CERAQFX1", 8) == 0) << "bad fixture header";
  EXPECT_EQ(header32[0], static_cast<uint32_t>(kind));
  EXPECT_EQ(header32[1], static_cast<uint32_t>(type));
  Fixture f{kind, type, static_cast<int64_t>(header64[0]), static_cast<int64_t>(header64[2]),
            {},   {}};
  const std::optional<uint64_t> row_bytes = dtype_row_bytes(type, header64[0]);
  EXPECT_TRUE(row_bytes.has_value() && *row_bytes == header64[1]) << "inconsistent sizes";
  if (!row_bytes || *row_bytes != header64[1]) return std::nullopt;
  f.blocks.resize(header64[1]);
  f.floats.resize(header64[0]);
  const auto read_blocks = [&] {
    in.read(reinterpret_cast<char*>(f.blocks.data()), f.blocks.size());
  };
  const auto read_floats = [&] {
    in.read(reinterpret_cast<char*>(f.floats.data()), f.floats.size() * sizeof(float));
  };
  if (kind == FixtureKind::kDequantize) {
    read_blocks();
    read_floats();
  } else {
    read_floats();
    read_blocks();
  }
  EXPECT_TRUE(in && in.peek() == std::char_traits<char>::eof()) << "truncated or long fixture";
  return f;
}

double rmse(const float* a, const float* b, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    sum += d * d;
  }
  return n > 0 ? std::sqrt(sum / static_cast<double>(n)) : 0.0;
}

std::vector<float> random_normal(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace cera::quant::test
