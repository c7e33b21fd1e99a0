// The tokenizers of the two real models (SmolLM2-135M-Instruct: byte-level BPE "smollm";
// Gemma 3 270M: SentencePiece-style, 262k tokens) against their reference tokenizers on the same
// GGUF: tests/fixtures/real_models/<name>.inp/.out, written by tools/quality/real_models.py
// (llama.cpp's llama-tokenize on the same file: transformers' GGUF loader rebuilds both
// tokenizers inexactly — SmolLM2 without the digit splitting its tokenizer.json has, Gemma 3
// with wrong merges). The models live in the cache that `make test` fills
// (scripts/pull-model.sh); a missing model fails the test.
#include <gtest/gtest.h>

#include "fixture_io.h"
#include "format/gguf.h"
#include "model_cache.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace cera::tokenizer {
namespace {

struct RealModel {
  const char* name;
  const char* pull_name;
  const char* file;
};

class RealModelTokenizer : public ::testing::TestWithParam<RealModel> {};

TEST_P(RealModelTokenizer, MatchesTheReferenceTokenizer) {
  const RealModel m = GetParam();
  const auto path = test::model_cache() / m.file;
  const auto fixture = test::source_dir() / "tests/fixtures/real_models" / m.name;
  if (!std::filesystem::exists(fixture.string() + ".out")) {
    GTEST_SKIP() << "no reference ids recorded for " << m.name << " yet";
  }
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing: run scripts/pull-model.sh " << m.pull_name;
  auto file = format::GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto tok = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  const auto inputs = test::parse_vocab_inputs(test::read_file_bytes(fixture.string() + ".inp"));
  const auto expected = test::parse_vocab_outputs(test::read_file_bytes(fixture.string() + ".out"));
  ASSERT_EQ(inputs.size(), expected.size());
  int passed = 0, round_trips = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    // Special-token texts are parsed, as both reference tokenizers do by default.
    const auto ids = tok->encode(inputs[i], {.add_special = false, .parse_special = true});
    EXPECT_EQ(ids, expected[i]) << m.name << " case " << i << ": \"" << inputs[i] << "\"";
    passed += ids == expected[i];
    round_trips += tok->decode(ids, {.render_special = true}) == inputs[i];
  }
  std::printf("%s: %d/%zu identical to the reference, %d/%zu round-trip\n", m.name, passed, inputs.size(), round_trips,
              inputs.size());
  EXPECT_EQ(round_trips, static_cast<int>(inputs.size()));
}

INSTANTIATE_TEST_SUITE_P(Models, RealModelTokenizer,
                         ::testing::Values(RealModel{"smollm2", "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"},
                                           RealModel{"gemma3", "gemma3", "gemma-3-270m-q4_k_m.gguf"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace cera::tokenizer
