// The parity fixtures as F32 GGUFs for the engine-loop model tests: gemma3's fixture is a GGUF
// already; the others (llama, lfm2, lfm2moe) are converted once per test process.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "convert/hf_convert.h"
#include "convert/parity_fixture.h"
#include "test_paths.h"

namespace cera::test {

inline std::filesystem::path fixture_gguf(const std::string& name) {
  if (name == "gemma3") return parity_fixture_dir(name) / "model.gguf";
  const auto gguf = temp_dir() / (name + "-fixture-f32.gguf");
  if (!std::filesystem::exists(gguf)) {
    auto r = convert::convert_hf({.dir = parity_fixture_dir(name), .output = gguf, .type = DType::kF32});
    EXPECT_TRUE(r.ok()) << r.status().to_string();
  }
  return gguf;
}

}  // namespace cera::test
