// Special-token partition: control tokens only with parse_special, user-defined tokens always,
// longest text first, and the SPM space prefix restarting after each special token.
#include <gtest/gtest.h>

#include "tokenizer/test_vocab.h"

namespace cera::tokenizer {
namespace {

using test::make_tokenizer;
using test::spm_spec;
using Ids = std::vector<int32_t>;

constexpr const char* kSpmSpace = "\xE2\x96\x81";

// 259 ▁, 260 a, 261 <ctl> (control), 262 <ctl>x (control), 263 <u> (user-defined)
Result<Tokenizer> make() {
  return make_tokenizer(spm_spec({{kSpmSpace, -1}, {"a", -1}, {"<ctl>", 0, 3}, {"<ctl>x", 0, 3}, {"<u>", 0, 4}}));
}

TEST(SpecialTokens, ControlOnlyWhenParsing) {
  auto tok = make();
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  const Ids parsed = tok->encode("a<ctl>a", {.parse_special = true});
  EXPECT_EQ(parsed, (Ids{259, 260, 261, 259, 260}));  // a fresh space prefix after the token
  EXPECT_EQ(tok->decode(parsed, {.render_special = true}), "a<ctl>a");
  EXPECT_EQ(tok->decode(parsed), "aa");
  const Ids literal = tok->encode("a<ctl>a");
  EXPECT_EQ(std::count(literal.begin(), literal.end(), 261), 0);
  EXPECT_EQ(tok->decode(literal), "a<ctl>a");
  EXPECT_EQ(tok->encode("<s>a</s>", {.parse_special = true}), (Ids{1, 259, 260, 2}));
}

TEST(SpecialTokens, LongestTextFirst) {
  auto tok = make();
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->encode("<ctl>x<ctl>", {.parse_special = true}), (Ids{262, 261}));
}

TEST(SpecialTokens, UserDefinedAlwaysMatched) {
  auto tok = make();
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->encode("a<u>a"), (Ids{259, 260, 263, 259, 260}));
  EXPECT_EQ(tok->decode(tok->encode("a<u>a")), "a<u>a");
  EXPECT_EQ(tok->encode("<u><u>"), (Ids{263, 263}));
}

TEST(SpecialTokens, PlainRangesKeepControlTextsAsText) {
  auto tok = make();
  ASSERT_TRUE(tok.ok());
  // "<ctl>a<ctl>a<u>": the middle <ctl> (bytes 6..11) and the <u> are in a plain range.
  const std::string text = "<ctl>a<ctl>a<u>";
  const TextRange plain[] = {{6, 9}};
  const Ids ids = tok->encode(text, {.parse_special = true, .plain_ranges = plain});
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 261), 1);  // only the first <ctl> is a token
  EXPECT_EQ(ids.front(), 261);
  EXPECT_EQ(ids.back(), 263);  // user-defined tokens are matched in plain text, as without parsing
  EXPECT_EQ(tok->decode(ids, {.render_special = true}), text);
  // A control text that only overlaps a plain range stays text too.
  const TextRange edge[] = {{10, 1}};
  const Ids e = tok->encode(text, {.parse_special = true, .plain_ranges = edge});
  EXPECT_EQ(std::count(e.begin(), e.end(), 261), 1);
  // Without parse_special the ranges change nothing.
  EXPECT_EQ(tok->encode(text, {.plain_ranges = plain}), tok->encode(text));
}

TEST(SpecialTokens, TokenPieces) {
  auto tok = make();
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->token_piece(261), "");
  EXPECT_EQ(tok->token_piece(261, true), "<ctl>");
  EXPECT_EQ(tok->token_piece(263), "<u>");
  EXPECT_EQ(tok->token_piece(3 + 'A'), "A");
  EXPECT_EQ(tok->token_text(3 + 'A'), "<0x41>");
  EXPECT_EQ(tok->token_piece(-1), "");
  EXPECT_EQ(tok->token_text(100000), "");
  EXPECT_EQ(tok->decode(Ids{-5, 260, 99999}), "a");
}

}  // namespace
}  // namespace cera::tokenizer
