// StreamDecoder: never emits part of a UTF-8 character, flushes at the end, and always agrees
// with decode() on the fixture vocabularies.
#include <gtest/gtest.h>

#include "format/gguf.h"
#include "test_paths.h"
#include "tokenizer/byte_map.h"
#include "tokenizer/fixture_io.h"
#include "tokenizer/test_vocab.h"
#include "tokenizer/unicode/unicode.h"

namespace cera::tokenizer {
namespace {

using test::make_tokenizer;
using test::spm_spec;
using Ids = std::vector<int32_t>;

TEST(StreamDecoder, HoldsIncompleteCharacters) {
  auto tok = make_tokenizer(spm_spec({{"\xE2\x96\x81", -1}, {"a", -1}}));
  ASSERT_TRUE(tok.ok());
  StreamDecoder stream(*tok);
  // "a" then the 4 bytes of U+1F999 as byte tokens.
  EXPECT_EQ(stream.push(260), "a");
  EXPECT_EQ(stream.push(3 + 0xF0), "");
  EXPECT_EQ(stream.push(3 + 0x9F), "");
  EXPECT_EQ(stream.push(3 + 0xA6), "");
  EXPECT_EQ(stream.push(3 + 0x99), "\xF0\x9F\xA6\x99");
  // A dangling lead byte is flushed as is at the end.
  EXPECT_EQ(stream.push(3 + 0xE2), "");
  EXPECT_EQ(stream.finish(), "\xE2");
  // An invalid byte is not held back.
  EXPECT_EQ(stream.push(3 + 0xFF), "\xFF");
}

TEST(StreamDecoder, StripsTheSpacePrefixOnce) {
  auto tok = make_tokenizer(spm_spec({{"\xE2\x96\x81", -1}, {"\xE2\x96\x81" "a", -1}}));
  ASSERT_TRUE(tok.ok());
  StreamDecoder stream(*tok);
  EXPECT_EQ(stream.push(1), "");  // <s>
  EXPECT_EQ(stream.push(260), "a");
  EXPECT_EQ(stream.push(260), " a");
  StreamDecoder continuation(*tok, {.strip_space_prefix = false});
  EXPECT_EQ(continuation.push(260), " a");
}

TEST(StreamDecoder, AgreesWithDecodeOnFixtures) {
  const auto dir = cera::test::shared_dir() / "tokenizer-fixtures";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  const auto inputs =
      cera::test::parse_vocab_inputs(cera::test::read_file_bytes(dir / "ggml-vocab-llama-spm.gguf.inp"));
  ASSERT_FALSE(inputs.empty());
  for (const char* name : {"llama-spm", "gpt-2", "baichuan"}) {
    SCOPED_TRACE(name);
    auto file = format::GgufFile::open(dir / (std::string("ggml-vocab-") + name + ".gguf"));
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    auto tok = Tokenizer::from_gguf(*file);
    ASSERT_TRUE(tok.ok()) << tok.status().to_string();
    for (const std::string& s : inputs) {
      const Ids ids = tok->encode(s, {.add_special = true});
      StreamDecoder stream(*tok);
      std::string streamed;
      for (int32_t id : ids) {
        const size_t before = streamed.size();
        stream.push(id, streamed);
        // Every chunk handed out ends on a character boundary.
        EXPECT_EQ(unicode::utf8_complete_prefix(std::string_view(streamed).substr(before)),
                  streamed.size() - before);
      }
      stream.finish(streamed);
      EXPECT_EQ(streamed, tok->decode(ids));
      EXPECT_EQ(streamed, s);
    }
  }
}

TEST(ByteMap, IsABijectionWithGpt2Values) {
  EXPECT_EQ(byte_to_codepoint('!'), uint32_t{'!'});
  EXPECT_EQ(byte_to_codepoint(' '), 0x120u);
  EXPECT_EQ(byte_to_codepoint('\n'), 0x10Au);
  EXPECT_EQ(byte_to_codepoint(0xAD), 0x143u);
  EXPECT_EQ(byte_to_utf8(' '), "\xC4\xA0");  // "Ġ"
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(codepoint_to_byte(byte_to_codepoint(static_cast<uint8_t>(b))), b);
  }
  EXPECT_EQ(codepoint_to_byte(0x144), -1);
  EXPECT_EQ(codepoint_to_byte(0x20), -1);  // a raw space is not in the mapping's image
}

}  // namespace
}  // namespace cera::tokenizer
