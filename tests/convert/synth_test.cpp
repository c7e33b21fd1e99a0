// `synth` on the tiny shapes: standard llama keys and names, the vocabulary copied from a real
// tokenizer GGUF, weights with the promised statistics, and output that does not depend on the
// number of threads; the lfm2 and qwen3moe generators (tiny versions of lfm2-1.2b and
// qwen3-30b-a3b) write files cera loads and runs on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>

#include "api/engine.h"
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
  auto a = synth_model({.arch = SynthArch::kLlama, .shape = "lfm2-tiny", .output = test::temp_dir() / "z.gguf"});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("lfm2"), std::string::npos);
}

TEST(Synth, BenchmarkShapesOfTheHybridAndMoeFamilies) {
  const SynthShape* lfm2 = find_synth_shape("lfm2-1.2b");
  ASSERT_NE(lfm2, nullptr);
  EXPECT_EQ(lfm2->arch, SynthArch::kLfm2);
  EXPECT_EQ(lfm2->n_embd, 2048u);
  EXPECT_EQ(lfm2->n_layer, 16u);
  EXPECT_EQ(lfm2->attention_layers, (1u << 2) | (1u << 5) | (1u << 8) | (1u << 10) | (1u << 12) | (1u << 14));
  EXPECT_EQ(lfm2->l_cache, 3u);
  EXPECT_EQ(lfm2->n_ff, 8192u);
  EXPECT_EQ(lfm2->n_head, 32u);
  EXPECT_EQ(lfm2->n_head_kv, 8u);
  EXPECT_EQ(lfm2->n_vocab, 65536u);
  const SynthShape* moe = find_synth_shape("qwen3-30b-a3b");
  ASSERT_NE(moe, nullptr);
  EXPECT_EQ(moe->arch, SynthArch::kQwen3Moe);
  EXPECT_EQ(moe->n_embd, 2048u);
  EXPECT_EQ(moe->n_layer, 48u);
  EXPECT_EQ(moe->n_expert, 128u);
  EXPECT_EQ(moe->n_expert_used, 8u);
  EXPECT_EQ(moe->n_ff_exp, 768u);
  EXPECT_EQ(moe->n_head, 32u);
  EXPECT_EQ(moe->n_head_kv, 4u);
  EXPECT_EQ(moe->head_dim, 128u);
  EXPECT_EQ(moe->n_vocab, 151936u);
}

// The tiny lfm2 and qwen3moe files in several weight types: the keys the loaders read, and a
// prompt plus decode steps on the CPU giving finite logits that depend on the input.
class SynthHybrid : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(SynthHybrid, LoadsAndRunsOnTheCpu) {
  const auto& [shape, type] = GetParam();
  const auto out = test::temp_dir() / (shape + "-" + std::string(dtype_name(type)) + ".gguf");
  auto r = synth_model({.shape = shape, .type = type, .output = out, .seed = 5});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->notes.empty()) << r->notes.front();
  auto f = format::GgufFile::open(out);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const SynthShape& s = *find_synth_shape(shape);
  const std::string arch = synth_arch_name(s.arch);
  EXPECT_EQ(*f->get<std::string>("general.architecture"), arch);
  if (s.arch == SynthArch::kLfm2) {
    const auto kv = *f->get_array<int32_t>("lfm2.attention.head_count_kv");
    EXPECT_EQ(kv, (std::vector<int32_t>{0, 2, 0, 2}));
    EXPECT_EQ(f->find_tensor("blk.0.shortconv.conv.weight")->dtype, DType::kF32);
    EXPECT_EQ(f->find_tensor("blk.0.shortconv.in_proj.weight")->dtype, type);
    EXPECT_NE(f->find_tensor("token_embd_norm.weight"), nullptr);
  } else {
    EXPECT_EQ(*f->get<uint32_t>("qwen3moe.expert_count"), 8u);
    EXPECT_EQ(*f->get<uint32_t>("qwen3moe.attention.key_length"), 128u);
    EXPECT_EQ(f->find_tensor("blk.1.ffn_down_exps.weight")->shape, (std::vector<uint64_t>{256, 256, 8}));
    EXPECT_EQ(f->find_tensor("blk.1.ffn_gate_exps.weight")->dtype, type);
    EXPECT_EQ(f->find_tensor("blk.1.ffn_gate_inp.weight")->dtype, DType::kF32);
  }

  auto engine = api::Engine::load({.model_path = out, .device = api::DeviceChoice::kCpu, .n_threads = 2});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  const auto& hp = (*engine)->model().hparams();
  EXPECT_EQ(hp.n_layer, int32_t(s.n_layer));
  EXPECT_EQ(hp.n_vocab, int32_t(s.n_vocab));
  EXPECT_EQ(hp.n_expert, int32_t(s.n_expert));
  auto session = (*engine)->new_session({.n_ctx = 64});
  ASSERT_TRUE(session.ok());
  const std::vector<int32_t> prompt = {1, 300, 17, 4000, 9};
  ASSERT_TRUE((*session)->append_tokens(prompt).ok());
  const std::vector<float> first((*session)->last_logits().begin(), (*session)->last_logits().end());
  const int32_t next = 42;
  ASSERT_TRUE((*session)->append_tokens(std::span(&next, 1)).ok());
  const std::vector<float> second((*session)->last_logits().begin(), (*session)->last_logits().end());
  ASSERT_EQ(first.size(), size_t(s.n_vocab));
  for (float v : first) ASSERT_TRUE(std::isfinite(v));
  for (float v : second) ASSERT_TRUE(std::isfinite(v));
  EXPECT_NE(first, second);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SynthHybrid,
                         ::testing::Combine(::testing::Values("lfm2-tiny", "qwen3moe-tiny"),
                                            ::testing::Values(DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kF16)),
                         [](const auto& info) {
                           return std::get<0>(info.param).substr(0, std::get<0>(info.param).find('-')) + "_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace cera::convert
