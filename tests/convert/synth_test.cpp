// `synth` on the tiny shape: standard llama keys and names, the vocabulary copied from a real
// tokenizer GGUF, weights with the promised statistics, and output that does not depend on the
// number of threads.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>

#include "convert/synth.h"
#include "format/gguf.h"
#include "quant/quant.h"
#include "test_paths.h"

namespace cera::convert {
namespace {

std::vector<char> file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Synth, TinyShapeWithCopiedVocabulary) {
  const auto vocab = test::shared_dir() / "tokenizer-fixtures" / "ggml-vocab-gpt-2.gguf";
  if (!std::filesystem::exists(vocab)) GTEST_SKIP() << "no " << vocab;
  const auto out = test::temp_dir() / "tiny-q8.gguf";
  auto r = synth_model({.shape = "tiny", .type = DType::kQ8_0, .output = out, .vocab_from = vocab, .seed = 7});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto f = format::GgufFile::open(out);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto src = format::GgufFile::open(vocab);
  ASSERT_TRUE(src.ok());
  const auto tokens = *src->get_array<std::string>("tokenizer.ggml.tokens");
  EXPECT_EQ(*f->get_array<std::string>("tokenizer.ggml.tokens"), tokens);
  EXPECT_EQ(*f->get<std::string>("tokenizer.ggml.model"), *src->get<std::string>("tokenizer.ggml.model"));
  EXPECT_EQ(*f->get<std::string>("general.architecture"), "llama");
  EXPECT_EQ(*f->get<uint32_t>("general.file_type"), 7u);
  EXPECT_EQ(*f->get<uint32_t>("llama.embedding_length"), 256u);
  EXPECT_EQ(*f->get<uint32_t>("llama.block_count"), 2u);
  EXPECT_EQ(*f->get<uint32_t>("llama.vocab_size"), tokens.size());
  EXPECT_EQ(*f->get<uint32_t>("llama.rope.dimension_count"), 64u);
  EXPECT_EQ(r->n_vocab, tokens.size());
  ASSERT_EQ(f->tensors().size(), 1u + 2 * 9 + 2);
  const auto* embd = f->find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->shape, (std::vector<uint64_t>{256, tokens.size()}));
  EXPECT_EQ(embd->dtype, DType::kQ8_0);
  EXPECT_EQ(f->find_tensor("blk.1.ffn_norm.weight")->dtype, DType::kF32);
  // Statistics of one matrix: mean ~0, std ~0.02 (Q8_0 adds < 1 % noise); norms exactly 1.
  const auto* up = f->find_tensor("blk.0.ffn_up.weight");
  std::vector<float> w(up->n_elements());
  const auto data = f->tensor_data(*up);
  quant::dequantize_row(up->dtype, data.data(), w.data(), static_cast<int64_t>(w.size()));
  double sum = 0, sq = 0;
  for (float x : w) sum += x, sq += double(x) * x;
  const double mean = sum / w.size(), sd = std::sqrt(sq / w.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 2e-4);
  EXPECT_NEAR(sd, 0.02, 5e-4);
  std::vector<float> norm(256);
  std::memcpy(norm.data(), f->tensor_data(*f->find_tensor("blk.0.attn_norm.weight")).data(), 1024);
  EXPECT_EQ(norm, std::vector<float>(256, 1.0f));
}

TEST(Synth, SameBytesForAnyThreadCountAndPlaceholderVocab) {
  const auto a = test::temp_dir() / "t1.gguf", b = test::temp_dir() / "t3.gguf", c = test::temp_dir() / "s2.gguf";
  ASSERT_TRUE(synth_model({.shape = "tiny", .type = DType::kQ4_0, .output = a, .seed = 3, .n_threads = 1}).ok());
  ASSERT_TRUE(synth_model({.shape = "tiny", .type = DType::kQ4_0, .output = b, .seed = 3, .n_threads = 3}).ok());
  ASSERT_TRUE(synth_model({.shape = "tiny", .type = DType::kQ4_0, .output = c, .seed = 4, .n_threads = 2}).ok());
  EXPECT_EQ(file_bytes(a), file_bytes(b));
  EXPECT_NE(file_bytes(a), file_bytes(c));
  auto f = format::GgufFile::open(a);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f->get<std::string>("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f->get_array<std::string>("tokenizer.ggml.tokens")->size(), 32000u);
  EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight")->dtype, DType::kQ4_0);
  EXPECT_EQ(*f->get<uint32_t>("general.file_type"), 2u);
}

TEST(Synth, RejectsUnknownShapeAndBadVocabSource) {
  auto r = synth_model({.shape = "llama-70b", .output = test::temp_dir() / "x.gguf"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("llama-8b"), std::string::npos);  // lists the known shapes
  auto v = synth_model({.shape = "tiny", .output = test::temp_dir() / "y.gguf", .vocab_from = "/nonexistent.gguf"});
  EXPECT_FALSE(v.ok());
  EXPECT_TRUE(find_synth_shape("llama-1b")->tied_output);
  EXPECT_EQ(find_synth_shape("llama-8b")->n_ff, 14336u);
}

}  // namespace
}  // namespace cera::convert
