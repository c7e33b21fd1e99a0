// The HF converter on every parity fixture: metadata, names and shapes as llama.cpp writes them,
// tensor data equal to the safetensors (Q/K permutation recomputed here independently, from
// the reshape definition), tied embeddings, quantized output close to the source, and errors
// that name the file and the key or tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "convert/hf_convert.h"
#include "convert/safetensors.h"
#include "format/gguf.h"
#include "parity_fixture.h"
#include "quant/quant.h"
#include "test_paths.h"

namespace cera::convert {
namespace {

using format::GgufFile;

std::filesystem::path convert_fixture(const std::string& name, DType type, HfConvertReport* report = nullptr) {
  const auto out = test::temp_dir() / (name + "-" + std::string(dtype_name(type)) + ".gguf");
  auto r = convert_hf({.dir = test::parity_fixture_dir(name), .output = out, .type = type});
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (report && r.ok()) *report = *r;
  return out;
}

std::vector<float> gguf_floats(const GgufFile& f, const format::GgufTensorInfo& t) {
  std::vector<float> out(t.n_elements());
  const auto data = f.tensor_data(t);
  const uint64_t row_bytes = *dtype_row_bytes(t.dtype, t.shape[0]);
  for (uint64_t r = 0; r < out.size() / t.shape[0]; ++r) {
    quant::dequantize_row(t.dtype, data.data() + r * row_bytes, out.data() + r * t.shape[0], static_cast<int64_t>(t.shape[0]));
  }
  return out;
}

std::vector<float> st_floats(const StTensor& t) {
  std::vector<float> out(t.n_elements());
  t.read_f32(0, out.size(), out.data());
  return out;
}

// GGUF name -> HF name, written independently of the converter's table.
std::string hf_name(const std::string& g) {
  if (g == "token_embd.weight") return "model.embed_tokens.weight";
  if (g == "output_norm.weight") return "model.norm.weight";
  if (g == "output.weight") return "lm_head.weight";
  const size_t dot = g.find('.', 4);
  const std::string layer = g.substr(4, dot - 4), rest = g.substr(dot + 1);
  static const std::map<std::string, std::string> kMap = {
      {"attn_norm", "input_layernorm"}, {"attn_q", "self_attn.q_proj"}, {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"}, {"attn_output", "self_attn.o_proj"}, {"attn_q_norm", "self_attn.q_norm"},
      {"attn_k_norm", "self_attn.k_norm"}, {"ffn_norm", "post_attention_layernorm"}, {"ffn_gate", "mlp.gate_proj"},
      {"ffn_up", "mlp.up_proj"}, {"ffn_down", "mlp.down_proj"}};
  const size_t d2 = rest.rfind('.');
  return "model.layers." + layer + "." + kMap.at(rest.substr(0, d2)) + rest.substr(d2);
}

// llama.cpp's permute: view rows as [n_head, 2, head_dim/2], swap the last two axes.
std::vector<float> permute_rows(const std::vector<float>& w, uint64_t n_rows, uint64_t n_cols, uint64_t n_head) {
  const uint64_t hd = n_rows / n_head, half = hd / 2;
  std::vector<float> out(w.size());
  for (uint64_t h = 0; h < n_head; ++h)
    for (uint64_t i = 0; i < half; ++i)
      for (uint64_t j = 0; j < 2; ++j)
        for (uint64_t c = 0; c < n_cols; ++c)
          out[((h * half + i) * 2 + j) * n_cols + c] = w[((h * 2 + j) * half + i) * n_cols + c];
  return out;
}

struct Expect {
  std::string fixture, arch, pre;
  bool tied, permuted, vocab_keys;
  uint32_t head_dim;
  float rope_base;
};
const Expect kExpect[] = {
    {"llama", "llama", "llama-bpe", false, true, true, 16, 10000.0f},
    {"llama3_rope", "llama", "llama-bpe", false, true, true, 16, 500000.0f},
    {"mistral", "llama", "gpt-2", false, true, true, 16, 10000.0f},
    {"qwen2", "qwen2", "qwen2", true, false, false, 16, 1e6f},
    {"qwen3", "qwen3", "qwen2", true, false, false, 32, 1e6f},
    {"granite", "granite", "gpt-2", false, true, true, 16, 10000.0f},
};

class HfFixture : public ::testing::TestWithParam<Expect> {};

TEST_P(HfFixture, MetadataFollowsLlamaCpp) {
  const Expect& e = GetParam();
  auto f = GgufFile::open(convert_fixture(e.fixture, DType::kF32));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const std::string p = e.arch + ".";
  EXPECT_EQ(*f->get<std::string>("general.architecture"), e.arch);
  EXPECT_EQ(*f->get<uint32_t>("general.file_type"), 0u);
  EXPECT_EQ(*f->get<uint32_t>(p + "block_count"), 2u);
  EXPECT_EQ(*f->get<uint32_t>(p + "context_length"), 2048u);
  EXPECT_EQ(*f->get<uint32_t>(p + "embedding_length"), 64u);
  EXPECT_EQ(*f->get<uint32_t>(p + "feed_forward_length"), 128u);
  EXPECT_EQ(*f->get<uint32_t>(p + "attention.head_count"), 4u);
  EXPECT_EQ(*f->get<uint32_t>(p + "attention.head_count_kv"), 2u);
  EXPECT_FLOAT_EQ(*f->get<float>(p + "rope.freq_base"), e.rope_base);
  EXPECT_FLOAT_EQ(*f->get<float>(p + "attention.layer_norm_rms_epsilon"), 1e-5f);
  if (e.arch == "granite" || e.arch == "qwen2") {
    // Written only from an explicit config head_dim: Qwen2Config has none, and llama.cpp drops
    // granite's.
    EXPECT_FALSE(f->has(p + "attention.key_length"));
  }
  if (e.arch == "granite") {
    EXPECT_FLOAT_EQ(*f->get<float>("granite.embedding_scale"), 12.0f);
    EXPECT_FLOAT_EQ(*f->get<float>("granite.attention.scale"), 0.125f);
    EXPECT_FLOAT_EQ(*f->get<float>("granite.residual_scale"), 0.22f);
    EXPECT_FLOAT_EQ(*f->get<float>("granite.logit_scale"), 4.0f);
  } else if (e.arch != "qwen2") {
    EXPECT_EQ(*f->get<uint32_t>(p + "attention.key_length"), e.head_dim);
    EXPECT_EQ(*f->get<uint32_t>(p + "attention.value_length"), e.head_dim);
  }
  EXPECT_EQ(f->has(p + "vocab_size"), e.vocab_keys);
  if (e.vocab_keys) {
    EXPECT_EQ(*f->get<uint32_t>(p + "vocab_size"), 384u);
    EXPECT_EQ(*f->get<uint32_t>(p + "rope.dimension_count"), e.head_dim);
  }
  // Tokenizer: trained byte-level BPE, specials typed, ids from tokenizer_config.json.
  EXPECT_EQ(*f->get<std::string>("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(*f->get<std::string>("tokenizer.ggml.pre"), e.pre);
  auto tokens = f->get_array<std::string>("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 384u);
  EXPECT_EQ((*tokens)[0], "<|bos|>");
  auto types = f->get_array<int32_t>("tokenizer.ggml.token_type");
  EXPECT_EQ((*types)[0], 3);
  EXPECT_EQ((*types)[3], 3);    // <|im_end|>: special
  EXPECT_EQ((*types)[100], 1);
  EXPECT_GT(f->get_array<std::string>("tokenizer.ggml.merges")->size(), 100u);
  EXPECT_EQ(*f->get<uint32_t>("tokenizer.ggml.bos_token_id"), 0u);
  EXPECT_EQ(*f->get<uint32_t>("tokenizer.ggml.eos_token_id"), 1u);
  // The llama-bpe fixtures prepend BOS through their TemplateProcessing post-processor.
  if (e.pre == "llama-bpe") {
    EXPECT_TRUE(*f->get<bool>("tokenizer.ggml.add_bos_token"));
  }
  if (e.pre == "qwen2") {
    const auto tmpl = f->get<std::string>("tokenizer.chat_template");
    ASSERT_TRUE(tmpl.ok());
    EXPECT_NE(tmpl->find("<|im_start|>"), std::string::npos);
  }
}

TEST_P(HfFixture, TensorsEqualTheCheckpoint) {
  const Expect& e = GetParam();
  auto f = GgufFile::open(convert_fixture(e.fixture, DType::kF32));
  ASSERT_TRUE(f.ok());
  auto ckpt = SafetensorsCheckpoint::open_dir(test::parity_fixture_dir(e.fixture));
  ASSERT_TRUE(ckpt.ok());
  EXPECT_EQ(f->find_tensor("output.weight") == nullptr, e.tied);
  EXPECT_EQ(f->find_tensor("rope_freqs.weight") != nullptr, e.fixture == "llama3_rope");
  size_t checked = 0;
  for (const auto& t : f->tensors()) {
    if (t.name == "rope_freqs.weight") continue;
    const StTensor* src = ckpt->find(hf_name(t.name));
    ASSERT_NE(src, nullptr) << t.name;
    std::vector<uint64_t> reversed(src->shape.rbegin(), src->shape.rend());
    EXPECT_EQ(t.shape, reversed) << t.name;
    EXPECT_EQ(t.dtype, DType::kF32) << t.name;
    std::vector<float> want = st_floats(*src);
    const bool is_q = t.name.find(".attn_q.") != std::string::npos, is_k = t.name.find(".attn_k.") != std::string::npos;
    if (e.permuted && (is_q || is_k)) {
      const uint64_t rows = src->shape[0], cols = src->shape.size() == 2 ? src->shape[1] : 1;
      const std::vector<float> before = want;
      want = permute_rows(want, rows, cols, is_q ? 4 : 2);
      EXPECT_NE(want, before) << t.name << ": permutation must move rows";
    }
    EXPECT_EQ(gguf_floats(*f, t), want) << t.name;
    ++checked;
  }
  EXPECT_EQ(checked, ckpt->by_name().size());
}

INSTANTIATE_TEST_SUITE_P(Parity, HfFixture, ::testing::ValuesIn(kExpect),
                         [](const auto& info) { return info.param.fixture; });

TEST(HfConvert, Llama3RopeFactorsMatchTheFormula) {
  auto f = GgufFile::open(convert_fixture("llama3_rope", DType::kF32));
  ASSERT_TRUE(f.ok());
  const auto* t = f->find_tensor("rope_freqs.weight");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->shape, (std::vector<uint64_t>{8}));
  const std::vector<float> got = gguf_floats(*f, *t);
  // Llama 3.1 scaling in double: theta 5e5, head_dim 16, factor 8, low 1, high 4, original 512.
  for (int i = 0; i < 8; ++i) {
    const double freq = 1.0 / std::pow(500000.0, 2.0 * i / 16.0), wavelen = 2 * M_PI / freq;
    double want;
    if (wavelen < 512.0 / 4.0) want = 1.0;
    else if (wavelen > 512.0 / 1.0) want = 8.0;
    else {
      const double smooth = (512.0 / wavelen - 1.0) / (4.0 - 1.0);
      want = 1.0 / ((1.0 - smooth) / 8.0 + smooth);
    }
    EXPECT_NEAR(got[i], want, 1e-5 * want) << i;
  }
  EXPECT_GT(got[2], 1.0f);  // the smooth band is exercised, not only the two extremes
  EXPECT_LT(got[2], 8.0f);
}

double rel_rms(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * double(a[i] - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

TEST(HfConvert, QuantizedOutputDequantizesCloseToTheSource) {
  auto ckpt = SafetensorsCheckpoint::open_dir(test::parity_fixture_dir("qwen2"));
  ASSERT_TRUE(ckpt.ok());
  // Relative RMS error bounds for roughly Gaussian weights (Q4_0 ~ 0.1, Q8_0 ~ 0.006).
  const std::pair<DType, double> cases[] = {{DType::kF16, 1e-3}, {DType::kBF16, 5e-3}, {DType::kQ8_0, 0.01},
                                            {DType::kQ5_1, 0.06}, {DType::kQ4_0, 0.15}};
  for (const auto& [type, bound] : cases) {
    auto f = GgufFile::open(convert_fixture("qwen2", type));
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(*f->get<uint32_t>("general.file_type"), type == DType::kQ4_0 ? 2u : type == DType::kQ8_0 ? 7u
                                                      : type == DType::kQ5_1 ? 9u : type == DType::kF16 ? 1u : 32u);
    const auto* q = f->find_tensor("blk.1.ffn_down.weight");
    ASSERT_EQ(q->dtype, type);
    const double err = rel_rms(gguf_floats(*f, *q), st_floats(*ckpt->find("model.layers.1.mlp.down_proj.weight")));
    EXPECT_LT(err, bound) << dtype_name(type);
    EXPECT_GT(err, 0.0) << dtype_name(type);
    // Norms and biases stay F32 and exact.
    EXPECT_EQ(f->find_tensor("blk.0.attn_q.bias")->dtype, DType::kF32);
    EXPECT_EQ(f->find_tensor("output_norm.weight")->dtype, DType::kF32);
  }
}

TEST(HfConvert, KQuantRowsThatAreNotWholeBlocksFallBackToF16) {
  HfConvertReport report;
  auto f = GgufFile::open(convert_fixture("llama", DType::kQ4_K, &report));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight")->dtype, DType::kF16);  // rows of 64 < 256
  bool noted = false;
  for (const auto& n : report.notes) noted |= n.find("blk.0.attn_q.weight") != std::string::npos && n.find("F16") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(HfConvert, PermutedQuantizedRowsStillMatch) {
  auto f = GgufFile::open(convert_fixture("granite", DType::kQ8_0));
  ASSERT_TRUE(f.ok());
  auto ckpt = SafetensorsCheckpoint::open_dir(test::parity_fixture_dir("granite"));
  const auto* k = f->find_tensor("blk.1.attn_k.weight");
  const auto want = permute_rows(st_floats(*ckpt->find("model.layers.1.self_attn.k_proj.weight")), 32, 64, 2);
  EXPECT_LT(rel_rms(gguf_floats(*f, *k), want), 0.01);
}

// A copy of a fixture whose config.json has `from` replaced by `to`.
std::filesystem::path edited_fixture(const std::string& name, const std::string& from, const std::string& to) {
  static int counter = 0;
  const auto dir = test::temp_dir() / ("edited-" + std::to_string(counter++));
  std::filesystem::create_directories(dir);
  for (const auto& entry : std::filesystem::directory_iterator(test::parity_fixture_dir(name))) {
    std::filesystem::copy_file(entry.path(), dir / entry.path().filename());
  }
  std::ifstream in(dir / "config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  std::ofstream(dir / "config.json", std::ios::trunc) << text;
  return dir;
}

void expect_error(const std::filesystem::path& dir, const std::string& part1, const std::string& part2) {
  auto r = convert_hf({.dir = dir, .output = dir / "out.gguf", .type = DType::kF32});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(part1), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(part2), std::string::npos) << r.status().message();
  EXPECT_FALSE(std::filesystem::exists(dir / "out.gguf"));
}

TEST(HfConvert, ErrorsNameTheFileAndTheKeyOrTensor) {
  expect_error(edited_fixture("llama", "\"hidden_size\"", "\"hidden_sizes\""), "config.json", "'hidden_size'");
  expect_error(edited_fixture("llama", "LlamaForCausalLM", "GPT2LMHeadModel"), "config.json", "'GPT2LMHeadModel'");
  expect_error(edited_fixture("llama", "\"intermediate_size\": 128", "\"intermediate_size\": 96"), "model.safetensors",
               "'model.layers.0.mlp.gate_proj.weight'");
  // qwen2 is tied: untying it asks for an lm_head the checkpoint does not have.
  expect_error(edited_fixture("qwen2", "\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false"), "missing tensor",
               "'lm_head.weight'");
  expect_error(edited_fixture("llama", "\"rope_type\": \"default\"", "\"rope_type\": \"wobbly\""), "config.json", "'wobbly'");
  auto r = convert_hf({.dir = test::temp_dir() / "nope", .output = test::temp_dir() / "x.gguf"});
  EXPECT_FALSE(r.ok());
}

// A SentencePiece-style tokenizer.json (Unigram with byte pieces) becomes a "llama" vocabulary
// with scores, typed byte/unknown/control tokens.
TEST(HfConvert, UnigramTokenizerBecomesLlamaVocab) {
  const auto dir = edited_fixture("mistral", "\"vocab_size\": 384", "\"vocab_size\": 384");
  std::ofstream(dir / "tokenizer.json", std::ios::trunc) << R"({
    "version": "1.0",
    "added_tokens": [{"id": 1, "content": "<s>", "special": true}, {"id": 2, "content": "</s>", "special": true}],
    "model": {"type": "Unigram", "unk_id": 0, "byte_fallback": true,
              "vocab": [["<unk>", 0.0], ["<s>", 0.0], ["</s>", 0.0], ["<0x00>", 0.0], ["<0x0A>", 0.0],
                        ["\u2581the", -1.5], ["\u2581a", -2.25]]}})";
  std::ofstream(dir / "tokenizer_config.json", std::ios::trunc)
      << R"({"bos_token": "<s>", "eos_token": {"content": "</s>"}, "add_bos_token": true, "add_eos_token": false})";
  std::filesystem::remove(dir / "chat_template.jinja");
  auto r = convert_hf({.dir = dir, .output = dir / "spm.gguf", .type = DType::kF32});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto f = GgufFile::open(dir / "spm.gguf");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f->get<std::string>("tokenizer.ggml.model"), "llama");
  const auto tokens = *f->get_array<std::string>("tokenizer.ggml.tokens");
  const auto types = *f->get_array<int32_t>("tokenizer.ggml.token_type");
  const auto scores = *f->get_array<float>("tokenizer.ggml.scores");
  ASSERT_EQ(tokens.size(), 384u);
  EXPECT_EQ(tokens[5], "\xE2\x96\x81the");
  EXPECT_EQ(types[0], 2);
  EXPECT_EQ(types[1], 3);
  EXPECT_EQ(types[3], 6);
  EXPECT_EQ(types[6], 1);
  EXPECT_EQ(types[7], 5);  // padding up to vocab_size
  EXPECT_EQ(tokens[7], "[PAD7]");
  EXPECT_FLOAT_EQ(scores[6], -2.25f);
  EXPECT_EQ(*f->get<uint32_t>("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(*f->get<uint32_t>("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_EQ(*f->get<uint32_t>("tokenizer.ggml.unknown_token_id"), 0u);
  EXPECT_TRUE(*f->get<bool>("tokenizer.ggml.add_bos_token"));
  EXPECT_FALSE(*f->get<bool>("tokenizer.ggml.add_eos_token"));
}

TEST(HfConvert, PermutationIndexMatchesTheReshapeDefinition) {
  // head_dim 8: GGUF rows 0..7 of a head take HF rows 0,4,1,5,2,6,3,7.
  const uint64_t want[] = {0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13};
  for (uint64_t r = 0; r < 12; ++r) EXPECT_EQ(permuted_source_row(r, 8), want[r]) << r;
}

TEST(ParityFixture, ExpectedLogitsLoad) {
  for (const std::string& name : test::parity_fixture_names()) {
    auto l = test::load_expected_logits(test::parity_fixture_dir(name) / "logits.bin");
    ASSERT_TRUE(l.ok()) << l.status().to_string();
    EXPECT_EQ(l->n_vocab, 384u);
    ASSERT_EQ(l->sequences.size(), 2u);
    EXPECT_EQ(l->sequences[0].tokens.size(), 7u);
    EXPECT_EQ(l->sequences[0].tokens[0], 0);  // BOS
    EXPECT_EQ(l->sequences[1].tokens.size(), 16u);
    float amax = 0;
    for (float x : l->sequences[1].logits) amax = std::max(amax, std::fabs(x));
    EXPECT_GT(amax, 0.1f);
    EXPECT_TRUE(std::isfinite(amax));
    if (test::has_gguf_reference(name)) {
      auto g = test::load_expected_logits(test::parity_fixture_dir(name) / "logits_gguf.bin");
      ASSERT_TRUE(g.ok()) << name;
      EXPECT_EQ(g->sequences[1].tokens, l->sequences[1].tokens);
    }
  }
}

}  // namespace
}  // namespace cera::convert
