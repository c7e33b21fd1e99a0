// Vocabulary loading: flags and special ids as the file and the model's defaults say, and every
// inconsistency rejected with an error that names the key.
#include "tokenizer/vocab.h"

#include <gtest/gtest.h>

#include "format/gguf_writer.h"
#include "tokenizer/test_vocab.h"

namespace cera::tokenizer {
namespace {

using test::make_tokenizer;
using test::spm_spec;
using test::VocabSpec;

void expect_error_naming(const VocabSpec& spec, const std::string& key) {
  auto tok = make_tokenizer(spec);
  ASSERT_FALSE(tok.ok()) << "expected an error naming " << key;
  EXPECT_NE(tok.status().message().find(key), std::string::npos) << tok.status().to_string();
}

VocabSpec small_bpe() {
  VocabSpec spec;
  spec.model = "gpt2";
  spec.pre = "gpt-2";
  spec.tokens = {"a", "b", "ab", "<|endoftext|>"};
  spec.types = {1, 1, 1, 3};
  spec.merges = {"a b"};
  return spec;
}

TEST(Vocab, SpmDefaults) {
  auto tok = make_tokenizer(spm_spec({{"\xE2\x96\x81" "a", -1}}));
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  const Vocab& v = tok->vocab();
  EXPECT_EQ(v.kind(), ModelKind::kSpm);
  EXPECT_EQ(v.special().unk, 0);
  EXPECT_EQ(v.special().bos, 1);
  EXPECT_EQ(v.special().eos, 2);
  EXPECT_TRUE(v.flags().add_bos);
  EXPECT_FALSE(v.flags().add_eos);
  EXPECT_TRUE(v.flags().add_space_prefix);
  EXPECT_EQ(v.find("\xE2\x96\x81" "a"), 259);
  EXPECT_EQ(v.find("missing"), kNoToken);
  EXPECT_EQ(v.type(3), TokenType::kByte);
  EXPECT_FLOAT_EQ(v.score(259), -1.0f);
  EXPECT_TRUE(tok->is_end_of_generation(2));
  EXPECT_FALSE(tok->is_end_of_generation(1));
}

TEST(Vocab, FlagsFromFileOverrideDefaults) {
  VocabSpec spec = spm_spec({});
  spec.extra = {{"tokenizer.ggml.add_bos_token", {false}},
                {"tokenizer.ggml.add_eos_token", {true}},
                {"tokenizer.ggml.add_space_prefix", {false}},
                {"tokenizer.ggml.eos_token_id", {uint32_t{1}}}};
  auto tok = make_tokenizer(spec);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_FALSE(tok->vocab().flags().add_bos);
  EXPECT_TRUE(tok->vocab().flags().add_eos);
  EXPECT_FALSE(tok->vocab().flags().add_space_prefix);
  EXPECT_EQ(tok->eos(), 1);
}

TEST(Vocab, BpePreFlags) {
  VocabSpec spec = small_bpe();
  auto plain = make_tokenizer(spec);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_FALSE(plain->vocab().flags().ignore_merges);
  EXPECT_FALSE(plain->vocab().flags().add_bos);
  EXPECT_EQ(plain->eot(), 3);  // found by its text
  EXPECT_TRUE(plain->is_end_of_generation(3));

  spec.pre = "llama-bpe";
  spec.extra = {{"tokenizer.ggml.bos_token_id", {uint32_t{3}}}};
  auto llama3 = make_tokenizer(spec);
  ASSERT_TRUE(llama3.ok()) << llama3.status().to_string();
  EXPECT_TRUE(llama3->vocab().flags().ignore_merges);
  EXPECT_TRUE(llama3->vocab().flags().add_bos);
}

TEST(Vocab, MissingOrUnknownModel) {
  VocabSpec spec = spm_spec({});
  spec.model = "t5";
  expect_error_naming(spec, "tokenizer.ggml.model");
  std::vector<std::byte> bytes;
  {
    format::GgufWriter w;
    w.set_string("general.architecture", "llama");
    bytes = w.to_bytes();
  }
  auto file = format::GgufFile::parse(bytes);
  ASSERT_TRUE(file.ok());
  auto tok = Tokenizer::from_gguf(*file);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("tokenizer.ggml.model"), std::string::npos);
}

TEST(Vocab, WrongLengths) {
  VocabSpec scores = spm_spec({});
  scores.scores.pop_back();
  expect_error_naming(scores, "tokenizer.ggml.scores");
  VocabSpec types = spm_spec({});
  types.types.push_back(1);
  expect_error_naming(types, "tokenizer.ggml.token_type");
}

TEST(Vocab, BadTokenType) {
  VocabSpec spec = spm_spec({});
  spec.types[5] = 9;
  expect_error_naming(spec, "tokenizer.ggml.token_type");
}

TEST(Vocab, DuplicateToken) {
  expect_error_naming(spm_spec({{"x", 0}, {"x", 0}}), "tokenizer.ggml.tokens");
}

TEST(Vocab, EmptyTokenList) {
  VocabSpec spec;
  expect_error_naming(spec, "tokenizer.ggml.tokens");
}

TEST(Vocab, SpecialIdOutOfRange) {
  VocabSpec spec = spm_spec({});
  spec.extra = {{"tokenizer.ggml.eos_token_id", {uint32_t{100000}}}};
  expect_error_naming(spec, "tokenizer.ggml.eos_token_id");
  spec.extra = {{"tokenizer.ggml.unknown_token_id", {int32_t{-3}}}};
  expect_error_naming(spec, "tokenizer.ggml.unknown_token_id");
  spec.extra = {{"tokenizer.ggml.bos_token_id", {std::string("1")}}};
  expect_error_naming(spec, "tokenizer.ggml.bos_token_id");
}

TEST(Vocab, AddBosWithoutBos) {
  VocabSpec spec = small_bpe();
  spec.extra = {{"tokenizer.ggml.add_bos_token", {true}}};
  expect_error_naming(spec, "tokenizer.ggml.add_bos_token");
}

TEST(Vocab, FlagOfWrongType) {
  VocabSpec spec = spm_spec({});
  spec.extra = {{"tokenizer.ggml.add_bos_token", {std::string("yes")}}};
  expect_error_naming(spec, "tokenizer.ggml.add_bos_token");
}

TEST(Vocab, BpeMerges) {
  VocabSpec none = small_bpe();
  none.merges.clear();
  expect_error_naming(none, "tokenizer.ggml.merges");
  VocabSpec malformed = small_bpe();
  malformed.merges = {"ab"};
  expect_error_naming(malformed, "tokenizer.ggml.merges");
  VocabSpec unknown_part = small_bpe();
  unknown_part.merges = {"a c"};
  expect_error_naming(unknown_part, "tokenizer.ggml.merges");
  VocabSpec unknown_result = small_bpe();
  unknown_result.merges = {"b a"};
  expect_error_naming(unknown_result, "tokenizer.ggml.merges");
}

TEST(Vocab, UnknownPreTokenizer) {
  VocabSpec spec = small_bpe();
  spec.pre = "no-such-pre-tokenizer";
  expect_error_naming(spec, "tokenizer.ggml.pre");
}

TEST(Vocab, WordPieceSpecialsFoundByName) {
  VocabSpec spec;
  spec.model = "bert";
  spec.tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "\xE2\x96\x81" "a"};
  spec.types = {3, 3, 3, 3, 3, 1};
  auto tok = make_tokenizer(spec);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(tok->vocab().special().unk, 1);
  EXPECT_EQ(tok->bos(), 2);
  EXPECT_EQ(tok->vocab().special().sep, 3);
  EXPECT_TRUE(tok->vocab().flags().lowercase);
  EXPECT_TRUE(tok->vocab().flags().strip_accents);
  EXPECT_EQ(tok->encode("A a", {.add_special = true}), (std::vector<int32_t>{2, 5, 5, 3}));
}

}  // namespace
}  // namespace cera::tokenizer
