// The llama2.c importer against the checkpoint itself: the GGUF must hold the same floats at the
// right names and shapes, and the tokenizer as SentencePiece-style vocabulary.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "format/gguf.h"
#include "format/llama2c_import.h"
#include "test_paths.h"

namespace cera::format {
namespace {

std::vector<float> read_floats(const std::filesystem::path& p, size_t offset_bytes) {
  std::ifstream in(p, std::ios::binary);
  in.seekg(0, std::ios::end);
  const size_t size = in.tellg();
  std::vector<float> out((size - offset_bytes) / 4);
  in.seekg(offset_bytes);
  in.read(reinterpret_cast<char*>(out.data()), out.size() * 4);
  return out;
}

class Llama2cImport : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = test::temp_dir() / "stories260K.gguf";
    const Status st = convert_llama2c({.checkpoint = test::shared_dir() / "models/stories260K.bin",
                                       .tokenizer = test::shared_dir() / "models/tok512.bin",
                                       .output = path_});
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  static std::filesystem::path path_;
};
std::filesystem::path Llama2cImport::path_;

TEST_F(Llama2cImport, HyperParametersFromTheHeader) {
  auto f = GgufFile::open(path_);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(*f->get<std::string>("general.architecture"), "llama");
  EXPECT_EQ(*f->get<uint32_t>("llama.embedding_length"), 64u);
  EXPECT_EQ(*f->get<uint32_t>("llama.feed_forward_length"), 172u);
  EXPECT_EQ(*f->get<uint32_t>("llama.block_count"), 5u);
  EXPECT_EQ(*f->get<uint32_t>("llama.attention.head_count"), 8u);
  EXPECT_EQ(*f->get<uint32_t>("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(*f->get<uint32_t>("llama.context_length"), 512u);
  EXPECT_EQ(*f->get<uint32_t>("llama.rope.dimension_count"), 8u);
  EXPECT_EQ(f->find_tensor("output.weight"), nullptr);  // tied to token_embd
  EXPECT_EQ(f->tensors().size(), 1u + 5u * 9u + 1u);
}

TEST_F(Llama2cImport, WeightsAreTheCheckpointsFloats) {
  auto f = GgufFile::open(path_);
  ASSERT_TRUE(f.ok());
  const auto raw = read_floats(test::shared_dir() / "models/stories260K.bin", 28);
  const size_t dim = 64, hidden = 172, vocab = 512, layers = 5, kv_dim = 32;
  auto expect_tensor = [&](const std::string& name, std::vector<uint64_t> shape, size_t offset_floats) {
    const GgufTensorInfo* t = f->find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->shape, shape) << name;
    auto data = f->tensor_data(*t);
    ASSERT_EQ(data.size() % 4, 0u);
    EXPECT_EQ(std::memcmp(data.data(), raw.data() + offset_floats, data.size()), 0) << name;
  };
  size_t off = 0;
  expect_tensor("token_embd.weight", {dim, vocab}, off);
  off += vocab * dim;
  expect_tensor("blk.3.attn_norm.weight", {dim}, off + 3 * dim);
  off += layers * dim;
  expect_tensor("blk.2.attn_q.weight", {dim, dim}, off + 2 * dim * dim);
  off += layers * dim * dim;
  expect_tensor("blk.4.attn_k.weight", {dim, kv_dim}, off + 4 * dim * kv_dim);
  off += layers * dim * kv_dim;
  expect_tensor("blk.0.attn_v.weight", {dim, kv_dim}, off);
  off += layers * dim * kv_dim;
  expect_tensor("blk.1.attn_output.weight", {dim, dim}, off + dim * dim);
  off += layers * dim * dim;
  expect_tensor("blk.1.ffn_norm.weight", {dim}, off + dim);
  off += layers * dim;
  expect_tensor("blk.2.ffn_gate.weight", {dim, hidden}, off + 2 * dim * hidden);
  off += layers * dim * hidden;
  expect_tensor("blk.2.ffn_down.weight", {hidden, dim}, off + 2 * dim * hidden);
  off += layers * dim * hidden;
  expect_tensor("blk.4.ffn_up.weight", {dim, hidden}, off + 4 * dim * hidden);
  off += layers * dim * hidden;
  expect_tensor("output_norm.weight", {dim}, off);
}

TEST_F(Llama2cImport, TokenizerIsSentencePieceStyle) {
  auto f = GgufFile::open(path_);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f->get<std::string>("tokenizer.ggml.model"), "llama");
  const auto tokens = *f->get_array<std::string>("tokenizer.ggml.tokens");
  const auto types = *f->get_array<int32_t>("tokenizer.ggml.token_type");
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(tokens[258], "<0xFF>");
  EXPECT_EQ(types[0], 2);
  EXPECT_EQ(types[1], 3);
  EXPECT_EQ(types[3], 6);
  EXPECT_EQ(types[300], 1);
  for (const std::string& t : tokens) EXPECT_EQ(t.find(' '), std::string::npos) << "space not mapped to U+2581";
  EXPECT_EQ(*f->get<uint32_t>("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(*f->get<bool>("tokenizer.ggml.add_space_prefix"), true);
}

TEST(Llama2cImportErrors, TruncatedCheckpointIsRejected) {
  const auto src = test::shared_dir() / "models/stories260K.bin";
  const auto cut = test::temp_dir() / "cut.bin";
  std::filesystem::copy_file(src, cut, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(cut, 1000);
  const Status st = convert_llama2c({.checkpoint = cut, .tokenizer = test::shared_dir() / "models/tok512.bin",
                                     .output = test::temp_dir() / "cut.gguf"});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("header implies"), std::string::npos) << st.message();
  EXPECT_FALSE(std::filesystem::exists(test::temp_dir() / "cut.gguf"));
}

}  // namespace
}  // namespace cera::format
