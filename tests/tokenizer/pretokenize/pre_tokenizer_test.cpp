// Pre-tokenizer splits against the Python `regex` oracle (fixtures written by
// tools/pretokenize/make_fixtures.py), plus name mapping and invalid-UTF-8 robustness.
// Every PreTokenizer value must have a fixture file; every case must match exactly.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "test_paths.h"
#include "tokenizer/pretokenize/pre_tokenizer.h"
#include "tokenizer/unicode/unicode.h"

namespace cera::tokenizer {
namespace {

constexpr PreTokenizer kAll[] = {
    PreTokenizer::kDefault,       PreTokenizer::kGpt2,        PreTokenizer::kLlama3,
    PreTokenizer::kQwen2,         PreTokenizer::kQwen35,      PreTokenizer::kStarcoder,
    PreTokenizer::kDeepseekCoder, PreTokenizer::kDeepseekLlm, PreTokenizer::kDeepseekV3,
    PreTokenizer::kFalcon,        PreTokenizer::kPoro,        PreTokenizer::kViking,
    PreTokenizer::kTekken,        PreTokenizer::kGpt4o,       PreTokenizer::kSeedCoder,
    PreTokenizer::kMinicpm5,      PreTokenizer::kNewlineRuns, PreTokenizer::kLaguna,
    PreTokenizer::kWhitespace,
};

// Undoes the fixture escapes: \\ \t \n \r \u{HEX}.
std::string unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out.push_back(s[i]);
      continue;
    }
    const char c = s[++i];
    if (c == 't')
      out.push_back('\t');
    else if (c == 'n')
      out.push_back('\n');
    else if (c == 'r')
      out.push_back('\r');
    else if (c == '\\')
      out.push_back('\\');
    else if (c == 'u' && i + 1 < s.size() && s[i + 1] == '{') {
      const size_t close = s.find('}', i);
      unicode::append_utf8(out, static_cast<uint32_t>(std::stoul(
                                    std::string(s.substr(i + 2, close - i - 2)), nullptr, 16)));
      i = close;
    } else {
      ADD_FAILURE() << "bad escape in fixture: " << s;
    }
  }
  return out;
}

struct Case {
  size_t line;
  std::vector<std::string> pieces;
};

std::vector<Case> read_fixture(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << path;
  std::vector<Case> cases;
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    EXPECT_EQ(line[0], '>') << path << ":" << n;
    Case c{n, {}};
    size_t pos = 1;
    while (pos < line.size()) {
      EXPECT_EQ(line[pos], '\t');
      const size_t next = std::min(line.find('\t', pos + 1), line.size());
      c.pieces.push_back(unescape(std::string_view(line).substr(pos + 1, next - pos - 1)));
      pos = next;
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

std::string show(const std::vector<std::string>& v) {
  std::ostringstream os;
  for (const auto& p : v) os << "[" << p << "]";
  return os.str();
}

class PreTokFixture : public ::testing::TestWithParam<PreTokenizer> {};

TEST_P(PreTokFixture, MatchesRegexOracle) {
  const PreTokenizer kind = GetParam();
  const auto path = cera::test::source_dir() / "tests/fixtures/tokenizer/pretokenize" /
                    (std::string(pre_tokenizer_name(kind)) + ".txt");
  const std::vector<Case> cases = read_fixture(path);
  ASSERT_GT(cases.size(), 300u);
  size_t passed = 0;
  std::vector<std::string_view> words;
  for (const Case& c : cases) {
    std::string input;
    for (const auto& p : c.pieces) input += p;
    pre_tokenize(kind, input, words);
    const std::vector<std::string> got(words.begin(), words.end());
    if (got == c.pieces) {
      ++passed;
    } else {
      ADD_FAILURE() << pre_tokenizer_name(kind) << " line " << c.line << "\n  want "
                    << show(c.pieces) << "\n  got  " << show(got);
    }
  }
  std::printf("[   INFO   ] %-15s %zu/%zu cases identical\n",
              std::string(pre_tokenizer_name(kind)).c_str(), passed, cases.size());
  EXPECT_EQ(passed, cases.size());
}

INSTANTIATE_TEST_SUITE_P(All, PreTokFixture, ::testing::ValuesIn(kAll),
                         [](const ::testing::TestParamInfo<PreTokenizer>& info) {
                           std::string name(pre_tokenizer_name(info.param));
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

TEST(PreTokNames, GgufNamesMapLikeLlamaCpp) {
  const std::pair<const char*, PreTokenizer> expected[] = {
      {"default", PreTokenizer::kDefault},
      {"gpt-2", PreTokenizer::kGpt2},
      {"mpt", PreTokenizer::kGpt2},
      {"olmo", PreTokenizer::kGpt2},
      {"jais", PreTokenizer::kGpt2},
      {"llama-bpe", PreTokenizer::kLlama3},
      {"llama3", PreTokenizer::kLlama3},
      {"llama-v3", PreTokenizer::kLlama3},
      {"lfm2", PreTokenizer::kLlama3},
      {"dbrx", PreTokenizer::kLlama3},
      {"smaug-bpe", PreTokenizer::kLlama3},
      {"qwen2", PreTokenizer::kQwen2},
      {"stablelm2", PreTokenizer::kQwen2},
      {"qwen35", PreTokenizer::kQwen35},
      {"smollm", PreTokenizer::kStarcoder},
      {"starcoder", PreTokenizer::kStarcoder},
      {"refact", PreTokenizer::kStarcoder},
      {"command-r", PreTokenizer::kStarcoder},
      {"codeshell", PreTokenizer::kStarcoder},
      {"deepseek-coder", PreTokenizer::kDeepseekCoder},
      {"deepseek-llm", PreTokenizer::kDeepseekLlm},
      {"deepseek-v3", PreTokenizer::kDeepseekV3},
      {"falcon", PreTokenizer::kFalcon},
      {"poro-chat", PreTokenizer::kPoro},
      {"viking", PreTokenizer::kViking},
      {"tekken", PreTokenizer::kTekken},
      {"gpt-4o", PreTokenizer::kGpt4o},
      {"llama4", PreTokenizer::kGpt4o},
      {"seed-coder", PreTokenizer::kSeedCoder},
      {"gemma4", PreTokenizer::kNewlineRuns},
  };
  for (const auto& [name, kind] : expected) {
    const auto got = pre_tokenizer_from_name(name);
    ASSERT_TRUE(got.has_value()) << name;
    EXPECT_EQ(*got, kind) << name;
  }
  EXPECT_FALSE(pre_tokenizer_from_name("").has_value());
  EXPECT_FALSE(pre_tokenizer_from_name("no-such-pre").has_value());
  EXPECT_FALSE(pre_tokenizer_from_name("GPT-2").has_value());
}

// Invalid UTF-8 and random bytes: never crash, pieces non-empty and tiling the input exactly.
TEST(PreTokRobustness, RandomBytesTileTheInput) {
  std::mt19937 rng(7);
  const std::string alphabet =
      std::string("ab Z9'\n\r\t!", 10) + "\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x80";
  std::vector<std::string_view> words;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      s.push_back(rng() % 3 == 0 ? static_cast<char>(rng() & 0xFF)
                                 : alphabet[rng() % alphabet.size()]);
    }
    for (PreTokenizer kind : kAll) {
      pre_tokenize(kind, s, words);
      const char* expect = s.data();
      for (std::string_view w : words) {
        ASSERT_FALSE(w.empty());
        ASSERT_EQ(w.data(), expect);
        expect += w.size();
      }
      ASSERT_EQ(expect, s.data() + s.size());
    }
  }
}

// A bad byte is one U+FFFD "other" code point of one byte: in GPT-2 it joins the punctuation run.
TEST(PreTokRobustness, InvalidByteIsOneReplacementCodePoint) {
  std::vector<std::string_view> words;
  const std::string s = "ab\xFF\xFE cd \xE4\xBD";  // truncated 3-byte sequence at the end
  pre_tokenize(PreTokenizer::kGpt2, s, words);
  const std::vector<std::string> got(words.begin(), words.end());
  const std::vector<std::string> want = {"ab", "\xFF\xFE", " cd", " \xE4\xBD"};
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace cera::tokenizer
