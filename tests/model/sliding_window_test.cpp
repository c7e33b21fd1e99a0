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
#include "logits_compare.h"
#include "test_device.h"

namespace cera {
namespace {

using test::compare_logits;
using test::Comparison;
using test::RunConfig;
using test::run_configs;

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
        const Comparison c = compare_logits(got, seq.logits, nv, config.tie);
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
