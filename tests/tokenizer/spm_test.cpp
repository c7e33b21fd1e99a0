// SentencePiece-style encoding on hand-made vocabularies: merge order by score, the space
// prefix, byte fallback, the unknown token, and BOS/EOS handling.
#include <gtest/gtest.h>

#include "tokenizer/test_vocab.h"

namespace cera::tokenizer {
namespace {

using test::make_tokenizer;
using test::spm_spec;
using Ids = std::vector<int32_t>;

constexpr const char* kU = "\xE2\x96\x81";  // U+2581
std::string sp(const std::string& s) { return kU + s; }

TEST(Spm, BestScoreMergesFirst) {
  // 259 a, 260 b, 261 c, 262 ab, 263 bc, 264 ▁
  auto ab_wins = make_tokenizer(spm_spec({{"a"}, {"b"}, {"c"}, {"ab", -1}, {"bc", -2}, {kU, -5}}));
  ASSERT_TRUE(ab_wins.ok()) << ab_wins.status().to_string();
  EXPECT_EQ(ab_wins->encode("abc"), (Ids{264, 262, 261}));
  auto bc_wins = make_tokenizer(spm_spec({{"a"}, {"b"}, {"c"}, {"ab", -2}, {"bc", -1}, {kU, -5}}));
  ASSERT_TRUE(bc_wins.ok());
  EXPECT_EQ(bc_wins->encode("abc"), (Ids{264, 259, 263}));
}

TEST(Spm, EqualScoresMergeLeftmostFirst) {
  // "aaa": both pairs are "aa"; the left one merges first.
  auto tok = make_tokenizer(spm_spec({{"a"}, {"aa", -1}, {kU, -5}}));
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->encode("aaa"), (Ids{261, 260, 259}));
}

TEST(Spm, SpacePrefixAndSpaces) {
  auto tok = make_tokenizer(spm_spec({{sp("hi"), -1}, {kU, -5}, {"h", -6}, {"i", -6}, {"hi", -2}}));
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  // "hi hi" -> "▁hi▁hi"
  EXPECT_EQ(tok->encode("hi hi"), (Ids{259, 259}));
  EXPECT_EQ(tok->decode(tok->encode("hi hi")), "hi hi");
  EXPECT_EQ(tok->encode(" hi"), (Ids{260, 259}));
  EXPECT_EQ(tok->decode(tok->encode(" hi")), " hi");
  EXPECT_EQ(tok->encode(""), Ids{});
  EXPECT_EQ(tok->encode("", {.add_special = true}), Ids{1});
  EXPECT_EQ(tok->encode("hi", {.add_special = true}), (Ids{1, 259}));
  EXPECT_EQ(tok->decode(Ids{1, 259}), "hi");
  EXPECT_EQ(tok->decode(Ids{1, 259}, {.render_special = true}), "<s>hi");
  EXPECT_EQ(tok->decode(Ids{259}, {.strip_space_prefix = false}), " hi");
}

TEST(Spm, ByteFallback) {
  auto tok = make_tokenizer(spm_spec({{kU, -1}, {"a", -1}}));
  ASSERT_TRUE(tok.ok());
  // "é" (C3 A9) is not a token: its bytes are, at ids 3 + byte.
  EXPECT_EQ(tok->encode("a\xC3\xA9"), (Ids{259, 260, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(tok->decode(tok->encode("a\xC3\xA9")), "a\xC3\xA9");
  // Invalid UTF-8 survives the round trip too.
  const std::string bad = "a\xFF\xC3 \xE2\x82";
  EXPECT_EQ(tok->decode(tok->encode(bad)), bad);
}

TEST(Spm, UnknownWithoutByteTokens) {
  auto tok = make_tokenizer(spm_spec({{kU, -1}, {"a", -1}}, /*byte_tokens=*/false));
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->encode("a\xC3\xA9"), (Ids{259, 260, 0, 0}));
}

TEST(Spm, AddEosWhenTheFileSaysSo) {
  auto spec = spm_spec({{kU, -1}, {"a", -1}});
  spec.extra = {{"tokenizer.ggml.add_eos_token", {true}}};
  auto tok = make_tokenizer(spec);
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->encode("a", {.add_special = true}), (Ids{1, 259, 260, 2}));
  EXPECT_EQ(tok->encode("a"), (Ids{259, 260}));
}

}  // namespace
}  // namespace cera::tokenizer
