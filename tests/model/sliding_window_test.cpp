// Oracle 3 of TESTING.md for the sliding-window layers and their ring cache: the tiny random
// Gemma 3 models of tools/parity (window 6; gemma3: local, local, global layers; gemma3_local:
// one local layer), written there as F32 GGUF, must give transformers' float32 logits at every
// position however the tokens are fed: all at once, in the session's chunks, token by token and
// in uneven chunks. The ring is window + max(n_batch, window) slots in blocks of 4, so every mode
// but the first wraps it several times over 48 tokens.
//
// The device comes from CERA_TEST_DEVICE (cpu by default, or cuda), with parity_test.cpp's
// bounds: F32 KV cache 1e-4 and the same argmax; on cuda also the F16 KV cache, 5e-3 and the
// same argmax except near ties (a reference logit within 5e-3 * max|logit| of the best).
#include <gtest/gtest.h>

#include <cmath>

#include "api/engine.h"
#include "convert/parity_fixture.h"
#include "test_device.h"

namespace cera {
namespace {

struct Comparison {
  float rel = 0;
  int argmax_mismatches = 0;
};

// A position's argmax counts as a mismatch unless the token got picks has a reference logit
// within tie * max|logit| of the reference's best (tie = 0: strictly the same token).
Comparison compare(std::span<const float> got, std::span<const float> want, uint32_t n_vocab, float tie) {
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

struct RunConfig {
  api::KvTypeChoice kv = api::KvTypeChoice::kF32;
  const char* kv_name = "f32";
  float tolerance = 1e-4f;  // max |delta| / max |logit|
  float tie = 0.0f;
};

// The KV cache types to run on the device, with parity_test.cpp's bounds.
std::vector<RunConfig> run_configs(api::DeviceChoice device) {
  std::vector<RunConfig> configs = {RunConfig{}};
  if (device == api::DeviceChoice::kCuda) {
    configs.push_back({.kv = api::KvTypeChoice::kF16, .kv_name = "f16", .tolerance = 5e-3f, .tie = 5e-3f});
  }
  return configs;
}

struct FeedMode {
  const char* name;
  int32_t n_batch;              // the session's largest forward (sizes the ring)
  std::vector<int32_t> chunks;  // append_tokens sizes, cycled; empty: one append of everything
};

const std::vector<FeedMode>& feed_modes() {
  static const std::vector<FeedMode> modes = {
      {"all at once", 64, {}},
      {"chunks of 5", 5, {}},
      {"token by token", 1, {1}},
      {"uneven chunks", 7, {5, 3, 7, 1, 2, 6, 4}},
  };
  return modes;
}

class SlidingWindowParity : public ::testing::TestWithParam<std::string> {};

TEST_P(SlidingWindowParity, LogitsMatchTransformersHoweverTheTokensAreFed) {
  const std::string name = GetParam();
  const test::TestDevice device = test::test_device();
  ASSERT_TRUE(device.error.empty()) << device.error;
  auto expected = test::load_expected_logits(test::parity_fixture_dir(name) / "logits.bin");
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  const uint32_t nv = expected->n_vocab;
  for (const RunConfig& config : run_configs(device.choice)) {
    auto engine = api::Engine::load({.model_path = test::parity_fixture_dir(name) / "model.gguf",
                                     .device = device.choice,
                                     .kv_type = config.kv});
    ASSERT_TRUE(engine.ok()) << "CERA_TEST_DEVICE=" << device.name << ": " << engine.status().to_string();
    ASSERT_EQ(nv, static_cast<uint32_t>((*engine)->model().hparams().n_vocab));
    ASSERT_EQ((*engine)->model().kv_geometry().sliding_window, 6);
    for (const FeedMode& mode : feed_modes()) {
      for (const test::LogitsSequence& seq : expected->sequences) {
        auto session = (*engine)->new_session({.n_ctx = 256, .n_batch = mode.n_batch, .kv_block_size = 4});
        ASSERT_TRUE(session.ok()) << session.status().to_string();
        std::vector<float> got;
        if (mode.chunks.empty()) {
          ASSERT_TRUE((*session)->append_tokens(seq.tokens, /*all_logits=*/true).ok());
          got.assign((*session)->all_logits().begin(), (*session)->all_logits().end());
        } else {
          size_t at = 0;
          for (size_t c = 0; at < seq.tokens.size(); ++c) {
            const size_t n = std::min<size_t>(mode.chunks[c % mode.chunks.size()], seq.tokens.size() - at);
            const Status st = (*session)->append_tokens(std::span(seq.tokens).subspan(at, n), true);
            ASSERT_TRUE(st.ok()) << st.to_string();
            got.insert(got.end(), (*session)->all_logits().begin(), (*session)->all_logits().end());
            at += n;
          }
        }
        const Comparison c = compare(got, seq.logits, nv, config.tie);
        const std::string where = name + " on " + device.name + " kv " + config.kv_name + ", " + mode.name;
        EXPECT_LT(c.rel, config.tolerance) << where << ", " << seq.tokens.size() << " tokens";
        EXPECT_EQ(c.argmax_mismatches, 0) << where;
        std::printf("sliding window %-4s kv %-3s %-12s %-14s %2zu tokens: max|delta|/max|logit| = %.2e, argmax "
                    "mismatches %d\n",
                    device.name.c_str(), config.kv_name, name.c_str(), mode.name, seq.tokens.size(), c.rel,
                    c.argmax_mismatches);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Gemma3, SlidingWindowParity, ::testing::Values("gemma3", "gemma3_local"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace cera
