// runtime::embed::Embedder over the decoders (ForwardOutput::kHidden): the hidden states it
// returns, multiplied by the file's output matrix, are the logits a plain Session computes for
// the same tokens, alone, so they are the final-norm rows every position's logits come from;
// packing several texts into one forward changes nothing; mean/last pooling and normalisation
// follow from those rows. Models: the parity fixtures llama (dense), lfm2 (recurrent state:
// texts packed in one forward keep separate states) and gemma3 (sliding-window layers, which the
// embedder pages), as F32 GGUFs, on CERA_TEST_DEVICE's backend (the CPU by default).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "api/engine.h"
#include "fixture_models.h"
#include "runtime/embed/embedder.h"
#include "test_device.h"

namespace cera {
namespace {

using runtime::embed::Embedder;
using runtime::embed::Embedding;
using runtime::embed::Pooling;

std::unique_ptr<api::Engine> load(const std::filesystem::path& model) {
  const test::TestDevice d = test::test_device();
  EXPECT_TRUE(d.error.empty()) << d.error;
  auto engine = api::Engine::load({.model_path = model, .device = d.choice, .kv_type = api::KvTypeChoice::kF32});
  EXPECT_TRUE(engine.ok()) << engine.status().to_string() << " (CERA_TEST_DEVICE=" << d.name << ")";
  return engine.ok() ? std::move(*engine) : nullptr;
}

// Deterministic token ids inside the vocabulary (away from the first, special, ids).
std::vector<int32_t> text_ids(int32_t n, int32_t salt, int32_t n_vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = 3 + (i * 131 + salt * 71) % (n_vocab - 3);
  return ids;
}

// The file's output matrix ([n_vocab][n_embd] F32; tied models use token_embd).
std::vector<float> output_matrix(const api::Engine& engine) {
  const auto& file = engine.file();
  const format::GgufTensorInfo* t = file.find_tensor("output.weight");
  if (t == nullptr) t = file.find_tensor("token_embd.weight");
  EXPECT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, DType::kF32) << "the fixtures are F32 GGUFs";
  const auto bytes = file.tensor_data(*t);
  std::vector<float> w(bytes.size() / sizeof(float));
  std::memcpy(w.data(), bytes.data(), w.size() * sizeof(float));
  return w;
}

// logits = W h / logit_scale, then the final softcap: what the output head computes.
std::vector<float> logits_of(std::span<const float> h, std::span<const float> w, const model::HParams& hp) {
  const size_t e = static_cast<size_t>(hp.n_embd);
  std::vector<float> out(w.size() / e);
  for (size_t v = 0; v < out.size(); ++v) {
    double s = 0;
    for (size_t i = 0; i < e; ++i) s += double(w[v * e + i]) * h[i];
    out[v] = static_cast<float>(s / hp.logit_scale);
  }
  model::apply_logit_softcap(out, hp.final_logit_softcap);
  return out;
}

float rel_diff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0, m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d = std::max(d, std::fabs(a[i] - b[i]));
    m = std::max(m, std::fabs(b[i]));
  }
  return d / m;
}

class EmbedderDecoders : public ::testing::TestWithParam<std::string> {};

TEST_P(EmbedderDecoders, HiddenRowsTimesOutputMatrixAreTheSessionsLogits) {
  auto engine = load(test::fixture_gguf(GetParam()));
  ASSERT_NE(engine, nullptr);
  const model::HParams& hp = engine->model().hparams();
  auto embedder = Embedder::create(engine->model(), engine->tokenizer(), {.kv_type = DType::kF32});
  ASSERT_TRUE(embedder.ok()) << embedder.status().to_string();
  EXPECT_EQ((*embedder)->default_pooling(), Pooling::kLast) << "a decoder without pooling_type";
  const std::vector<std::vector<int32_t>> texts = {text_ids(5, 1, hp.n_vocab), text_ids(17, 2, hp.n_vocab),
                                                   text_ids(40, 3, hp.n_vocab)};
  // All three in one forward, every token's row.
  auto rows = (*embedder)->embed(texts, {.pooling = Pooling::kNone, .normalize = false});
  ASSERT_TRUE(rows.ok()) << rows.status().to_string();
  ASSERT_EQ(rows->size(), texts.size());
  const std::vector<float> w = output_matrix(*engine);
  const size_t e = static_cast<size_t>(hp.n_embd), nv = static_cast<size_t>(hp.n_vocab);
  for (size_t j = 0; j < texts.size(); ++j) {
    const Embedding& r = (*rows)[j];
    ASSERT_EQ(r.n_tokens, static_cast<int32_t>(texts[j].size()));
    ASSERT_EQ(r.values.size(), texts[j].size() * e);
    auto session = engine->new_session({.n_ctx = 64, .context_shift = false});
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    ASSERT_TRUE((*session)->append_tokens(texts[j], /*all_logits=*/true).ok());
    const auto ref = (*session)->all_logits();
    ASSERT_EQ(ref.size(), texts[j].size() * nv);
    for (size_t t = 0; t < texts[j].size(); ++t) {
      const auto logits = logits_of(std::span(r.values).subspan(t * e, e), w, hp);
      EXPECT_LT(rel_diff(logits, ref.subspan(t * nv, nv)), 2e-4f) << GetParam() << " text " << j << " token " << t;
    }
  }
  // Mean and last pooling, normalised, from those rows.
  auto mean = (*embedder)->embed(texts, {.pooling = Pooling::kMean, .normalize = true});
  auto last = (*embedder)->embed(texts, {.pooling = Pooling::kLast, .normalize = false});
  ASSERT_TRUE(mean.ok() && last.ok());
  for (size_t j = 0; j < texts.size(); ++j) {
    const auto& all = (*rows)[j].values;
    const size_t n = texts[j].size();
    std::vector<double> m(e, 0.0);
    for (size_t t = 0; t < n; ++t) {
      for (size_t i = 0; i < e; ++i) m[i] += all[t * e + i] / double(n);
    }
    double norm = 0;
    for (double x : m) norm += x * x;
    norm = std::sqrt(norm);
    ASSERT_EQ((*mean)[j].values.size(), e);
    ASSERT_EQ((*last)[j].values.size(), e);
    for (size_t i = 0; i < e; ++i) {
      EXPECT_NEAR((*mean)[j].values[i], m[i] / norm, 1e-5) << GetParam() << " text " << j << " dim " << i;
      EXPECT_NEAR((*last)[j].values[i], all[(n - 1) * e + i], 1e-5) << GetParam() << " text " << j << " dim " << i;
    }
  }
}

TEST_P(EmbedderDecoders, TextsPackedTogetherEqualTextsAlone) {
  auto engine = load(test::fixture_gguf(GetParam()));
  ASSERT_NE(engine, nullptr);
  const int32_t n_vocab = engine->model().hparams().n_vocab;
  // Forwards of at most 64 tokens force several groups in the first embedder; the second runs
  // one text per forward.
  auto packed = Embedder::create(engine->model(), engine->tokenizer(), {.max_batch_tokens = 64});
  auto alone = Embedder::create(engine->model(), engine->tokenizer(), {.max_batch_tokens = 64, .max_sequences = 1});
  ASSERT_TRUE(packed.ok() && alone.ok());
  std::vector<std::vector<int32_t>> texts;
  for (int32_t j = 0; j < 7; ++j) texts.push_back(text_ids(3 + 5 * j % 19, j, n_vocab));
  auto a = (*packed)->embed(texts, {.pooling = Pooling::kLast});
  auto b = (*alone)->embed(texts, {.pooling = Pooling::kLast});
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t j = 0; j < texts.size(); ++j) {
    EXPECT_LT(rel_diff((*a)[j].values, (*b)[j].values), 1e-5f) << GetParam() << " text " << j;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EmbedderDecoders, ::testing::Values("llama", "lfm2", "gemma3"));

TEST(Embedder, RefusesWhatItCannotEmbedNamingTheInput) {
  auto engine = load(test::fixture_gguf("llama"));
  ASSERT_NE(engine, nullptr);
  const int32_t n_vocab = engine->model().hparams().n_vocab;
  auto e = Embedder::create(engine->model(), engine->tokenizer(), {.max_batch_tokens = 32});
  ASSERT_TRUE(e.ok());
  const auto message = [&](std::vector<std::vector<int32_t>> texts) {
    auto r = (*e)->embed(texts, {});
    return r.ok() ? std::string("(accepted)") : r.status().message();
  };
  EXPECT_EQ(message({{5, 6}, {}}), "input 1 is empty: there is nothing to embed");
  EXPECT_EQ(message({std::vector<int32_t>(33, 5)}),
            "input 0 is 33 tokens, more than the 32 an embedding takes (max_batch_tokens; raise it or shorten the text)");
  EXPECT_EQ(message({{5}, {5, n_vocab}}), "input 1 has token id " + std::to_string(n_vocab) +
                                              ", outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
  // After refusals the embedder still works (its cache holds nothing).
  auto ok = (*e)->embed(std::vector<std::vector<int32_t>>{{5, 6, 7}}, {});
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ((*ok)[0].n_tokens, 3);
}

}  // namespace
}  // namespace cera
