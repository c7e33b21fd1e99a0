// Oracle 3 of TESTING.md: tiny random models built with transformers (tools/parity), converted by
// cera's HF converter to F32 GGUF, must give transformers' float32 logits at every position:
// max |delta| / max |logit| < 1e-4 and the same argmax. logits_gguf.bin (transformers running the
// same GGUF through its own loader) must agree too, which checks the file conventions.
#include <gtest/gtest.h>

#include <cmath>

#include "api/engine.h"
#include "convert/hf_convert.h"
#include "convert/parity_fixture.h"

namespace cera {
namespace {

struct Comparison {
  float rel = 0;
  int argmax_mismatches = 0;
};

Comparison compare(std::span<const float> got, std::span<const float> want, uint32_t n_vocab) {
  float max_delta = 0, max_ref = 0;
  int mismatches = 0;
  for (size_t row = 0; row < want.size() / n_vocab; ++row) {
    const float* g = got.data() + row * n_vocab;
    const float* w = want.data() + row * n_vocab;
    uint32_t ag = 0, aw = 0;
    for (uint32_t i = 0; i < n_vocab; ++i) {
      max_delta = std::max(max_delta, std::fabs(g[i] - w[i]));
      max_ref = std::max(max_ref, std::fabs(w[i]));
      if (g[i] > g[ag]) ag = i;
      if (w[i] > w[aw]) aw = i;
    }
    mismatches += ag != aw;
  }
  return {max_delta / max_ref, mismatches};
}

class Parity : public ::testing::TestWithParam<std::string> {};

TEST_P(Parity, LogitsMatchTransformers) {
  const std::string name = GetParam();
  const auto gguf = test::temp_dir() / (name + "-f32.gguf");
  auto converted = convert::convert_hf({.dir = test::parity_fixture_dir(name), .output = gguf, .type = DType::kF32});
  ASSERT_TRUE(converted.ok()) << converted.status().to_string();
  auto engine = api::Engine::load({.model_path = gguf, .device = api::DeviceChoice::kCpu});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  for (const char* reference : {"logits.bin", "logits_gguf.bin"}) {
    const auto path = test::parity_fixture_dir(name) / reference;
    if (std::string(reference) == "logits_gguf.bin" && !test::has_gguf_reference(name)) continue;
    auto expected = test::load_expected_logits(path);
    ASSERT_TRUE(expected.ok()) << expected.status().to_string();
    ASSERT_EQ(expected->n_vocab, static_cast<uint32_t>((*engine)->model().hparams().n_vocab));
    for (const test::LogitsSequence& seq : expected->sequences) {
      auto session = (*engine)->new_session({.n_ctx = 256});
      ASSERT_TRUE(session.ok());
      ASSERT_TRUE((*session)->append_tokens(seq.tokens, /*all_logits=*/true).ok());
      const Comparison c = compare((*session)->all_logits(), seq.logits, expected->n_vocab);
      EXPECT_LT(c.rel, 1e-4f) << name << " vs " << reference << ", " << seq.tokens.size() << " tokens";
      EXPECT_EQ(c.argmax_mismatches, 0) << name << " vs " << reference;
      std::printf("parity %-12s %-16s %3zu tokens: max|delta|/max|logit| = %.2e, argmax mismatches %d\n",
                  name.c_str(), reference, seq.tokens.size(), c.rel, c.argmax_mismatches);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, Parity, ::testing::ValuesIn(test::parity_fixture_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace cera
