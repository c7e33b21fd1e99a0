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
  const auto path = cera::test::model_cache() / m.file;
  const auto fixture = cera::test::source_dir() / "tests/fixtures/real_models" / m.name;
  if (!std::filesystem::exists(fixture.string() + ".out")) {
    GTEST_SKIP() << "no reference ids recorded for " << m.name << " yet";
  }
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing: run scripts/pull-model.sh " << m.pull_name;
  auto file = format::GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto tok = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  const auto inputs = cera::test::parse_vocab_inputs(cera::test::read_file_bytes(fixture.string() + ".inp"));
  const auto expected = cera::test::parse_vocab_outputs(cera::test::read_file_bytes(fixture.string() + ".out"));
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

// Invalid UTF-8 is never dropped. SmolLM2's byte-level vocabulary has no token for the byte
// 0xFF (it never occurs in valid UTF-8): such a byte becomes U+FFFD, the replacement llama.cpp
// makes for invalid input, so "a\xffb" encodes as "a\uFFFDb" does. Invalid sequences whose
// bytes do have tokens (a truncated "\xe2\x82") keep them and round-trip byte for byte; on
// Gemma 3's SentencePiece vocabulary every byte has a byte-fallback token.
TEST_P(RealModelTokenizer, InvalidUtf8BecomesReplacementOrByteTokens) {
  const RealModel m = GetParam();
  const auto path = cera::test::model_cache() / m.file;
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing: run scripts/pull-model.sh " << m.pull_name;
  auto file = format::GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto tok = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  for (const std::string bad : {"a\xff" "b", "\xff\xfe", "x\xc0\xc1y", "\xf8\x88\x80\x80\x80"}) {
    const auto ids = tok->encode(bad);
    const std::string back = tok->decode(ids);
    // Each byte comes back as itself or (a byte >= 0x80 without a token) as U+FFFD; nothing is
    // lost or added.
    size_t at = 0;
    bool same = true;
    for (unsigned char c : bad) {
      if (at < back.size() && static_cast<unsigned char>(back[at]) == c) {
        at += 1;
      } else if (c >= 0x80 && back.compare(at, 3, "\xEF\xBF\xBD") == 0) {
        at += 3;
      } else {
        same = false;
      }
    }
    EXPECT_TRUE(same && at == back.size()) << m.name << ": '" << back << "'";
  }
  if (std::string(m.name) == "smollm2") {
    EXPECT_EQ(tok->encode("a\xff" "b"), tok->encode("a\xEF\xBF\xBD" "b"));
  }
  const std::string truncated = "a\xe2\x82" "b";
  EXPECT_EQ(tok->decode(tok->encode(truncated)), truncated) << m.name;
}

INSTANTIATE_TEST_SUITE_P(Models, RealModelTokenizer,
                         ::testing::Values(RealModel{"smollm2", "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"},
                                           RealModel{"gemma3", "gemma3", "gemma-3-270m-q4_k_m.gguf"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace cera::tokenizer
