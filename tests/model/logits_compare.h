// The whole-model logit comparison of the parity tests (parity_test.cpp, sliding_window_test.cpp)
// and the engine configurations each device runs, with their bounds:
//  - F32 KV cache (every device): max |delta| / max |logit| < 1e-4 and the same argmax;
//  - F16 KV cache (cuda only, --kv-type f16): 5e-3, since K and V are rounded to f16 (relative
//    2^-11) before attention and the rounding goes through softmax and the later layers; argmax
//    must agree except where the token cera picks has a reference logit within that bound of the
//    best one (a near tie the rounding may flip).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "api/engine.h"

namespace cera::test {

struct Comparison {
  float rel = 0;               // max |got - want| / max |want|
  int argmax_mismatches = 0;
};

// A position's argmax counts as a mismatch unless the token got picks has a reference logit
// within tie * max|logit| of the reference's best (tie = 0: strictly the same token).
inline Comparison compare_logits(std::span<const float> got, std::span<const float> want, uint32_t n_vocab,
                                 float tie = 0.0f) {
  EXPECT_EQ(got.size(), want.size());
  const size_t n = std::min(got.size(), want.size());
  float max_delta = 0, max_ref = 0;
  for (size_t i = 0; i < n; ++i) {
    max_delta = std::max(max_delta, std::fabs(got[i] - want[i]));
    max_ref = std::max(max_ref, std::fabs(want[i]));
  }
  int mismatches = 0;
  for (size_t row = 0; row < n / n_vocab; ++row) {
    const float* g = got.data() + row * n_vocab;
    const float* w = want.data() + row * n_vocab;
    uint32_t ag = 0, aw = 0;
    for (uint32_t i = 0; i < n_vocab; ++i) {
      if (g[i] > g[ag]) ag = i;
      if (w[i] > w[aw]) aw = i;
    }
    mismatches += ag != aw && w[aw] - w[ag] > tie * max_ref;
  }
  return {max_delta / max_ref, mismatches};
}

// One engine configuration under test and its bounds (see the header).
struct RunConfig {
  api::KvTypeChoice kv = api::KvTypeChoice::kF32;
  const char* kv_name = "f32";
  float tolerance = 1e-4f;  // max |delta| / max |logit|
  float tie = 0.0f;         // argmax near-tie allowance, a fraction of max |logit|
};

// The configurations a device runs (CERA_TEST_DEVICE, test_device.h).
inline std::vector<RunConfig> run_configs(api::DeviceChoice device) {
  std::vector<RunConfig> configs = {RunConfig{}};
  if (device == api::DeviceChoice::kCuda) {
    configs.push_back({.kv = api::KvTypeChoice::kF16, .kv_name = "f16", .tolerance = 5e-3f, .tie = 5e-3f});
  }
  return configs;
}

}  // namespace cera::test
