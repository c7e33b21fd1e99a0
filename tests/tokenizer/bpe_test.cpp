// Byte-level BPE on hand-made vocabularies: merges by rank (not by length or id), the GPT-2 byte
// mapping, ignore_merges for Llama-3-style pre-tokenizers, and bytes without a token.
#include <gtest/gtest.h>

#include "tokenizer/test_vocab.h"
#include "tokenizer/wordpiece.h"

namespace cera::tokenizer {
namespace {

using test::make_tokenizer;
using test::VocabSpec;
using Ids = std::vector<int32_t>;

VocabSpec bpe(std::vector<std::string> tokens, std::vector<std::string> merges, std::string pre = "gpt-2") {
  VocabSpec spec;
  spec.model = "gpt2";
  spec.pre = std::move(pre);
  spec.tokens = std::move(tokens);
  spec.merges = std::move(merges);
  return spec;
}

TEST(Bpe, MergesByRank) {
  // ids: a0 b1 c2 ab3 bc4
  auto ab_first = make_tokenizer(bpe({"a", "b", "c", "ab", "bc"}, {"a b", "b c"}));
  ASSERT_TRUE(ab_first.ok()) << ab_first.status().to_string();
  EXPECT_EQ(ab_first->encode("abc"), (Ids{3, 2}));
  auto bc_first = make_tokenizer(bpe({"a", "b", "c", "ab", "bc"}, {"b c", "a b"}));
  ASSERT_TRUE(bc_first.ok());
  EXPECT_EQ(bc_first->encode("abc"), (Ids{0, 4}));
}

TEST(Bpe, SpaceIsMappedAndWordsAreSeparate) {
  // "Ġ" is the mapped space; "a Ġa" never merges across the pre-tokenizer's word boundary.
  auto tok = make_tokenizer(bpe({"a", "\xC4\xA0", "\xC4\xA0" "a", "aa"}, {"\xC4\xA0 a", "a a"}));
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(tok->encode("a a"), (Ids{0, 2}));
  EXPECT_EQ(tok->encode("aa aa"), (Ids{3, 2, 0}));
  EXPECT_EQ(tok->decode(tok->encode("aa aa")), "aa aa");
  EXPECT_EQ(tok->token_piece(2), " a");
  // "b" has no token: dropped, as the reference does.
  EXPECT_EQ(tok->encode("ab"), (Ids{0}));
}

TEST(Bpe, IgnoreMergesTakesWholeWords) {
  // "abc" is a token but no merge chain reaches it.
  const std::vector<std::string> tokens = {"a", "b", "c", "ab", "abc"};
  auto plain = make_tokenizer(bpe(tokens, {"a b"}, "gpt-2"));
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ(plain->encode("abc"), (Ids{3, 2}));
  VocabSpec llama3 = bpe(tokens, {"a b"}, "llama-bpe");
  llama3.extra = {{"tokenizer.ggml.bos_token_id", {uint32_t{0}}}};
  auto whole = make_tokenizer(llama3);
  ASSERT_TRUE(whole.ok()) << whole.status().to_string();
  EXPECT_EQ(whole->encode("abc"), (Ids{4}));
  EXPECT_EQ(whole->encode("abc", {.add_special = true}), (Ids{0, 4}));  // llama-bpe adds BOS
}

TEST(Bpe, ControlAndUserDefinedTokens) {
  VocabSpec spec = bpe({"a", "<|end|>", "<user>"}, {});
  spec.types = {1, 3, 4};
  // A vocabulary without merges still needs the key (VocabSpec omits an empty list).
  spec.extra = {{"tokenizer.ggml.merges", {format::GgufArray::of_strings({})}}};
  auto tok = make_tokenizer(spec);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(tok->encode("a<user>a"), (Ids{0, 2, 0}));
  EXPECT_EQ(tok->encode("<|end|>", {.parse_special = true}), Ids{1});
  EXPECT_EQ(tok->decode(Ids{0, 1, 2}), "a<user>");
  EXPECT_EQ(tok->decode(Ids{0, 1, 2}, {.render_special = true}), "a<|end|><user>");
  EXPECT_TRUE(tok->is_end_of_generation(1));
}

TEST(WordPiece, BasicSplit) {
  std::vector<std::string> words;
  bert_basic_split("Héllo,  WORLD!北京 a\x07" "b\tc", true, true, words);
  EXPECT_EQ(words, (std::vector<std::string>{"hello", ",", "world", "!", "北", "京", "ab", "c"}));
  bert_basic_split("Héllo", false, false, words);
  EXPECT_EQ(words, (std::vector<std::string>{"Héllo"}));
}

TEST(WordPiece, GreedyLongestMatchAndUnknown) {
  VocabSpec spec;
  spec.model = "bert";
  // BERT's "un", "##able", "##a", "##ble", "unable" in llama.cpp's spelling.
  spec.tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "\xE2\x96\x81" "un", "able", "a", "ble"};
  spec.types = {3, 3, 3, 3, 1, 1, 1, 1};
  auto tok = make_tokenizer(spec);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(tok->encode("unable"), (Ids{4, 5}));
  EXPECT_EQ(tok->encode("unaXble un"), (Ids{1, 4}));  // one bad piece makes the word [UNK]
  EXPECT_EQ(tok->encode(std::string(101, 'a')), Ids{1});
  EXPECT_EQ(tok->decode(tok->encode("UNABLE un")), "unable un");
}

}  // namespace
}  // namespace cera::tokenizer
