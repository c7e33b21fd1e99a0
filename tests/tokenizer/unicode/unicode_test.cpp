// Unicode tables against Python's unicodedata2 (tests/tokenizer/unicode/data/unicode_props.txt,
// written by tools/unicode/gen_tables.py), and UTF-8 coding against the Unicode standard's
// well-formedness table (Table 3-7) and its examples of ill-formed sequences.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_paths.h"
#include "tokenizer/unicode/generated/unicode_tables.h"
#include "tokenizer/unicode/unicode.h"

namespace cera::tokenizer::unicode {
namespace {

constexpr const char* kCategoryNames[] = {
    "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
    "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"};

TEST(UnicodeTables, MatchUnicodedata2Sample) {
  EXPECT_STREQ(generated::kUnicodeVersion, "17.0.0");
  std::ifstream in(cera::test::source_dir() / "tests/tokenizer/unicode/data/unicode_props.txt");
  ASSERT_TRUE(in.good());
  std::string line;
  size_t checked = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string cp_hex, cat, lower_hex, nfd_text;
    int ws = 0, ccc = 0;
    ls >> cp_hex >> cat >> ws >> lower_hex >> ccc >> nfd_text;
    const auto cp = static_cast<uint32_t>(std::stoul(cp_hex, nullptr, 16));
    EXPECT_STREQ(kCategoryNames[static_cast<int>(category(cp))], cat.c_str()) << cp_hex;
    EXPECT_EQ(is_whitespace(cp), ws == 1) << cp_hex;
    EXPECT_EQ(to_lower(cp), std::stoul(lower_hex, nullptr, 16)) << cp_hex;
    EXPECT_EQ(combining_class(cp), ccc) << cp_hex;
    std::vector<uint32_t> want;
    if (nfd_text != "-") {
      std::istringstream ns(nfd_text);
      std::string part;
      while (std::getline(ns, part, ','))
        want.push_back(static_cast<uint32_t>(std::stoul(part, nullptr, 16)));
    }
    const auto got = nfd(cp);
    EXPECT_EQ(std::vector<uint32_t>(got.begin(), got.end()), want) << cp_hex;
    ++checked;
  }
  EXPECT_GT(checked, 4000u);  // all of U+0000..U+02FF plus samples of every table
}

TEST(UnicodeTables, MajorClassHelpers) {
  EXPECT_TRUE(is_letter(uint32_t{'a'}));
  EXPECT_TRUE(is_letter(0x4E00u));
  EXPECT_TRUE(is_mark(0x0301u));
  EXPECT_TRUE(is_number(0x0661u));
  EXPECT_TRUE(is_number(0x00BDu));
  EXPECT_TRUE(is_punctuation(uint32_t{'!'}));
  EXPECT_FALSE(is_punctuation(uint32_t{'$'}));
  EXPECT_TRUE(is_symbol(uint32_t{'$'}));
  EXPECT_TRUE(is_separator(0x3000u));
  EXPECT_EQ(category(0x110000), Category::Cn);
  EXPECT_TRUE(is_cjk_ideograph(0x4E00));
  EXPECT_TRUE(is_cjk_ideograph(0x2FA1F));
  EXPECT_FALSE(is_cjk_ideograph(0x3040));  // hiragana is not in BERT's CJK ranges
  EXPECT_FALSE(is_cjk_ideograph(0xAC00));  // nor Hangul
}

TEST(UnicodeUtf8, RoundTripsEveryScalarValue) {
  std::string s;
  for (uint32_t cp = 0; cp <= kMaxCodePoint; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    s.clear();
    append_utf8(s, cp);
    ASSERT_EQ(s.size(), utf8_sequence_length(static_cast<uint8_t>(s[0])));
    size_t pos = 0;
    ASSERT_EQ(decode_utf8(s, pos), cp);
    ASSERT_EQ(pos, s.size());
    ASSERT_EQ(utf8_complete_prefix(s), s.size());
    ASSERT_EQ(utf8_complete_prefix(std::string_view(s).substr(0, s.size() - 1)), 0u);
  }
}

// Each ill-formed input decodes one byte at a time to U+FFFD (examples from Unicode 3.9.6).
TEST(UnicodeUtf8, IllFormedBytesBecomeOneReplacementEach) {
  const std::string bad[] = {"\x80",
                             "\xBF",
                             "\xC0\xAF",
                             "\xC1\xBF",
                             "\xE0\x80\xAF",
                             "\xED\xA0\x80",
                             "\xF0\x80\x80\xAF",
                             "\xF4\x90\x80\x80",
                             "\xF5\x80\x80\x80",
                             "\xFF",
                             "\xE1\x80",
                             "\xF1\x80\x80"};
  for (const std::string& s : bad) {
    size_t pos = 0;
    size_t n = 0;
    while (pos < s.size()) {
      const size_t before = pos;
      EXPECT_EQ(decode_utf8(s, pos), kReplacementChar);
      EXPECT_EQ(pos, before + 1);
      ++n;
    }
    EXPECT_EQ(n, s.size());
  }
  // A bad continuation stops the sequence: the following ASCII byte survives.
  const std::string mixed =
      "\xE4\xBD"
      "A";
  size_t pos = 0;
  EXPECT_EQ(decode_utf8(mixed, pos), kReplacementChar);
  EXPECT_EQ(decode_utf8(mixed, pos), kReplacementChar);
  EXPECT_EQ(decode_utf8(mixed, pos), uint32_t{'A'});
  std::string out;
  append_utf8(out, 0xD800);
  EXPECT_EQ(out, "\xEF\xBF\xBD");
}

TEST(UnicodeUtf8, CompletePrefixForStreaming) {
  EXPECT_EQ(utf8_complete_prefix(""), 0u);
  EXPECT_EQ(utf8_complete_prefix("ab"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xE4"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xE4\xBD"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xE4\xBD\xA0"), 5u);
  EXPECT_EQ(utf8_complete_prefix("\xF0\x9F\x98"), 0u);
  EXPECT_EQ(utf8_complete_prefix("a\xFF"), 2u);      // invalid byte: nothing to wait for
  EXPECT_EQ(utf8_complete_prefix("a\xE0\x80"), 3u);  // overlong start can never complete
  EXPECT_EQ(utf8_complete_prefix("a\x80"), 2u);      // stray continuation byte
  EXPECT_EQ(utf8_sequence_length(0x80), 0u);
  EXPECT_EQ(utf8_sequence_length(0xC1), 0u);
  EXPECT_EQ(utf8_sequence_length(0xF4), 4u);
  EXPECT_EQ(utf8_sequence_length(0xF5), 0u);
}

}  // namespace
}  // namespace cera::tokenizer::unicode
