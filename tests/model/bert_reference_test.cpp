// all-MiniLM-L6-v2 (the BERT encoder, as sentence-transformers ships it: `make models` pulls the
// checkpoint folder) through `cera convert` and the Embedder, against what sentence-transformers
// itself computed on the same checkpoint (tests/fixtures/embeddings/all-minilm-l6-v2.json, made
// by tools/embeddings/make_reference.py): the WordPiece ids of 50 varied sentences, their
// model.encode() vectors (mean pooling + Normalize) at cosine >= 0.9999, and the encoder's last
// hidden states of four of them, from which the test derives cls / last / mean / none pooling
// itself. F32 and F16 conversions, on CERA_TEST_DEVICE's backend (the CPU by default).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "api/engine.h"
#include "convert/hf_convert.h"
#include "format/json.h"
#include "model_cache.h"
#include "runtime/embed/embedder.h"
#include "test_device.h"
#include "test_paths.h"

namespace cera {
namespace {

using runtime::embed::Embedder;
using runtime::embed::Embedding;
using runtime::embed::Pooling;

struct Reference {
  std::vector<std::string> sentences;
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::vector<float>> embeddings;
  std::vector<std::vector<std::vector<float>>> token_embeddings;  // [sentence][token][n_embd]
};

std::vector<float> floats(const format::JsonValue& arr) {
  std::vector<float> out;
  for (const auto& v : *arr.as_array()) out.push_back(static_cast<float>(*v.as_double()));
  return out;
}

Reference read_reference() {
  auto j = format::read_json_file((test::source_dir() / "tests/fixtures/embeddings/all-minilm-l6-v2.json").string());
  EXPECT_TRUE(j.ok()) << j.status().to_string();
  Reference r;
  if (!j.ok()) return r;
  for (const auto& s : *j->find("sentences")->as_array()) r.sentences.push_back(*s.as_string());
  for (const auto& ids : *j->find("token_ids")->as_array()) {
    r.ids.emplace_back();
    for (const auto& id : *ids.as_array()) r.ids.back().push_back(static_cast<int32_t>(*id.as_int()));
  }
  for (const auto& e : *j->find("embeddings")->as_array()) r.embeddings.push_back(floats(e));
  for (const auto& s : *j->find("token_embeddings")->as_array()) {
    r.token_embeddings.emplace_back();
    for (const auto& t : *s.as_array()) r.token_embeddings.back().push_back(floats(t));
  }
  return r;
}

double cosine(std::span<const float> a, std::span<const float> b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

std::filesystem::path checkpoint() { return test::model_cache() / "all-MiniLM-L6-v2"; }

// The checkpoint converted once per type for the whole test binary.
std::filesystem::path converted(DType type) {
  const auto out = test::temp_dir() / ("minilm-" + std::string(dtype_name(type)) + ".gguf");
  if (!std::filesystem::exists(out)) {
    auto r = convert::convert_hf({.dir = checkpoint(), .output = out, .type = type});
    EXPECT_TRUE(r.ok()) << r.status().to_string();
  }
  return out;
}

class MiniLm : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(checkpoint() / "model.safetensors")) << checkpoint() << " is missing: run `make models`";
    ref_ = read_reference();
    ASSERT_EQ(ref_.sentences.size(), 50u);
    const test::TestDevice d = test::test_device();
    ASSERT_TRUE(d.error.empty()) << d.error;
    auto engine = api::Engine::load({.model_path = converted(GetParam()), .device = d.choice});
    ASSERT_TRUE(engine.ok()) << engine.status().to_string() << " (CERA_TEST_DEVICE=" << d.name << ")";
    engine_ = std::move(*engine);
    auto e = Embedder::create(engine_->model(), engine_->tokenizer(), {.max_batch_tokens = 512});
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    embedder_ = std::move(*e);
  }

  Reference ref_;
  std::unique_ptr<api::Engine> engine_;
  std::unique_ptr<Embedder> embedder_;
};

TEST_P(MiniLm, WordPieceIdsEqualTheHfTokenizer) {
  for (size_t i = 0; i < ref_.sentences.size(); ++i) {
    EXPECT_EQ(embedder_->tokenize(ref_.sentences[i]), ref_.ids[i]) << "sentence " << i << ": " << ref_.sentences[i];
  }
}

TEST_P(MiniLm, EncodeEqualsSentenceTransformers) {
  EXPECT_EQ(embedder_->default_pooling(), Pooling::kMean) << "from 1_Pooling/config.json";
  EXPECT_TRUE(embedder_->default_normalize()) << "modules.json has a Normalize module";
  std::vector<std::vector<int32_t>> inputs;
  for (const auto& s : ref_.sentences) inputs.push_back(embedder_->tokenize(s));
  auto got = embedder_->embed(inputs, {});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->size(), ref_.embeddings.size());
  double worst = 1;
  for (size_t i = 0; i < got->size(); ++i) {
    ASSERT_EQ((*got)[i].values.size(), ref_.embeddings[i].size());
    const double c = cosine((*got)[i].values, ref_.embeddings[i]);
    worst = std::min(worst, c);
    EXPECT_GE(c, 0.9999) << "sentence " << i << ": " << ref_.sentences[i];
  }
  std::printf("[ minilm %s ] worst cosine over %zu sentences: %.7f\n", std::string(dtype_name(GetParam())).c_str(), got->size(), worst);
}

// cls / last / mean / none over the reference's own last hidden states of four sentences.
TEST_P(MiniLm, EveryPoolingFollowsTheHiddenStates) {
  const size_t n = ref_.token_embeddings.size();
  ASSERT_EQ(n, 4u);
  std::vector<std::vector<int32_t>> inputs(ref_.ids.begin(), ref_.ids.begin() + static_cast<ptrdiff_t>(n));
  for (const Pooling p : {Pooling::kNone, Pooling::kMean, Pooling::kCls, Pooling::kLast}) {
    auto got = embedder_->embed(inputs, {.pooling = p, .normalize = false});
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    for (size_t i = 0; i < n; ++i) {
      const auto& rows = ref_.token_embeddings[i];
      const size_t e = rows[0].size();
      std::vector<float> want;
      if (p == Pooling::kNone) {
        for (const auto& r : rows) want.insert(want.end(), r.begin(), r.end());
      } else if (p == Pooling::kCls) {
        want = rows.front();
      } else if (p == Pooling::kLast) {
        want = rows.back();
      } else {
        want.assign(e, 0.0f);
        for (const auto& r : rows) {
          for (size_t k = 0; k < e; ++k) want[k] += r[k] / static_cast<float>(rows.size());
        }
      }
      const auto& v = (*got)[i].values;
      ASSERT_EQ(v.size(), want.size()) << runtime::embed::pooling_name(p);
      if (p == Pooling::kNone) {
        for (size_t t = 0; t < rows.size(); ++t) {
          EXPECT_GE(cosine(std::span(v).subspan(t * e, e), rows[t]), 0.9999)
              << "sentence " << i << " token " << t;
        }
      } else {
        EXPECT_GE(cosine(v, want), 0.9999) << runtime::embed::pooling_name(p) << " sentence " << i;
      }
      // Not normalised: the length is the hidden state's own (within the cosine's tolerance).
      double nv = 0, nw = 0;
      for (size_t k = 0; k < v.size(); ++k) nv += double(v[k]) * v[k], nw += double(want[k]) * want[k];
      EXPECT_NEAR(std::sqrt(nv), std::sqrt(nw), 2e-2 * std::sqrt(nw)) << runtime::embed::pooling_name(p);
    }
  }
}

TEST_P(MiniLm, RefusesTextsPastTheLearnedPositions) {
  EXPECT_EQ(embedder_->max_input_tokens(), 512) << "n_batch 512 and 512 learned positions";
  std::vector<std::vector<int32_t>> inputs{std::vector<int32_t>(513, 1000)};
  auto got = embedder_->embed(inputs, {});
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("input 0 is 513 tokens"), std::string::npos) << got.status().to_string();
}

INSTANTIATE_TEST_SUITE_P(Types, MiniLm, ::testing::Values(DType::kF32, DType::kF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// A sentence-transformers module cera does not reproduce refuses the conversion by name.
TEST(MiniLmConvert, RefusesModulesItCannotReproduce) {
  ASSERT_TRUE(std::filesystem::exists(checkpoint() / "model.safetensors")) << "run `make models`";
  const auto dir = test::temp_dir() / "minilm-dense";
  std::filesystem::create_directories(dir);
  for (const auto& entry : std::filesystem::directory_iterator(checkpoint())) {
    if (entry.path().filename() != "modules.json") std::filesystem::create_symlink(entry.path(), dir / entry.path().filename());
  }
  std::ofstream(dir / "modules.json") << R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
 {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
 {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}])";
  auto r = convert::convert_hf({.dir = dir, .output = test::temp_dir() / "dense.gguf"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sentence_transformers.models.Dense"), std::string::npos) << r.status().to_string();
}

}  // namespace
}  // namespace cera
