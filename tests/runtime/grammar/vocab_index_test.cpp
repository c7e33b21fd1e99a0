// GrammarVocabIndex: token bytes are what the tokenizer decodes (the tokenizer itself is checked
// against golden ids in tests/tokenizer), roles of special tokens, and the byte-ordered trie
// layout (sorted, common prefixes), on SmolLM2 (byte-level BPE) and Gemma 3 (SentencePiece
// with <0xNN> byte fallback) when installed.
#include "runtime/grammar/vocab_index.h"

#include <gtest/gtest.h>

#include "smollm2_vocab.h"

namespace cera::runtime::grammar {
namespace {

void check_layout(const VocabIndex& v) {
  const auto sorted = v.sorted();
  for (uint32_t k = 1; k < sorted.size(); ++k) {
    const std::string_view a = v.sorted_bytes(k - 1), b = v.sorted_bytes(k);
    ASSERT_LE(a, b);
    uint32_t l = 0;
    while (l < a.size() && l < b.size() && a[l] == b[l]) ++l;
    ASSERT_EQ(v.lcp(k), l);
  }
  size_t text = 0;
  for (int32_t id = 0; id < v.n_vocab(); ++id) text += v.role(id) == TokenRole::kText;
  EXPECT_EQ(sorted.size(), text);
}

TEST(GrammarVocabIndex, Smollm2ByteLevelBpe) {
  auto v = test::smollm2_vocab();
  if (!v) GTEST_SKIP() << test::kSmollm2Missing;
  const tokenizer::Tokenizer& tok = *test::smollm2_tokenizer();
  ASSERT_EQ(v->n_vocab(), 49152);
  EXPECT_EQ(v->end_tokens(), (std::vector<int32_t>{0, 2}));  // <|endoftext|>, <|im_end|>
  for (int32_t id = 0; id < 17; ++id) {
    if (id != 0 && id != 2) {
      EXPECT_EQ(v->role(id), TokenRole::kNever) << tok.token_text(id);
    }
  }
  size_t single_high_bytes = 0;
  for (int32_t id = 0; id < v->n_vocab(); ++id) {
    if (v->role(id) != TokenRole::kText) continue;
    const int32_t one[] = {id};
    ASSERT_EQ(v->bytes(id), tok.decode(one)) << id << " '" << tok.token_text(id) << "'";
    single_high_bytes += v->bytes(id).size() == 1 && static_cast<unsigned char>(v->bytes(id)[0]) >= 0x80;
  }
  // Bytes 0x80..0xFF as tokens of their own, except the 13 never in UTF-8 (C0 C1 F5..FF) and
  // the leads F1 F2, which this vocabulary lacks.
  EXPECT_EQ(single_high_bytes, 113u);
  EXPECT_EQ(v->bytes(tok.vocab().find("\xC4\x8A")), "\n");     // "Ċ"
  EXPECT_EQ(v->bytes(tok.vocab().find("\xC4\xA0the")), " the");  // "Ġthe"
  check_layout(*v);
}

TEST(GrammarVocabIndex, Gemma3SentencePieceByteFallback) {
  const auto path = cera::test::model_cache() / "gemma-3-270m-q4_k_m.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "gemma-3-270m-q4_k_m.gguf is not installed: run `bash scripts/pull-model.sh gemma3`";
  auto file = format::GgufFile::open(path);
  ASSERT_TRUE(file.ok());
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok());
  auto v = VocabIndex::from_tokenizer(*tok);
  EXPECT_EQ(v->bytes(tok->vocab().find("<0x0A>")), "\n");
  EXPECT_EQ(v->bytes(tok->vocab().find("<0xE2>")), "\xE2");
  EXPECT_EQ(v->bytes(tok->vocab().find("\xE2\x96\x81the")), " the");  // "▁the"
  EXPECT_EQ(v->role(tok->bos()), TokenRole::kNever);
  EXPECT_EQ(v->role(tok->eos()), TokenRole::kEndOfGeneration);
  check_layout(*v);
}

TEST(GrammarVocabIndex, FromPiecesMarksEmptyTextTokensNever) {
  auto v = VocabIndex::from_pieces({"b", "", "a", "ab", "<e>"},
                                   {TokenRole::kText, TokenRole::kText, TokenRole::kText, TokenRole::kText,
                                    TokenRole::kEndOfGeneration});
  EXPECT_EQ(v->role(1), TokenRole::kNever);
  EXPECT_EQ(std::vector<int32_t>(v->sorted().begin(), v->sorted().end()), (std::vector<int32_t>{2, 3, 0}));
  EXPECT_EQ(v->lcp(1), 1u);
  EXPECT_EQ(v->lcp(2), 0u);
  EXPECT_EQ(v->end_tokens(), (std::vector<int32_t>{4}));
  EXPECT_EQ(v->mask_words(), 1u);
}

}  // namespace
}  // namespace cera::runtime::grammar
