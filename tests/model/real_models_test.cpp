// Whole-model oracle on the two real models (SmolLM2-135M-Instruct Q4_1, Gemma 3 270M Q4_K_M):
// transformers in float32 on the dequantized GGUF gives the top-4 logits at the first 96 positions
// of tools/quality/passage.txt (tests/fixtures/real_models/<name>.top, written by
// tools/quality/real_models.py kld --write-top). cera on the CPU runs the quantized file with its
// default two-term int8 activations: it must rank the same token first wherever the reference's
// margin is above 0.05, and give those four logits within 0.02 (single-term int8 activations miss
// by up to ~0.4 on these models, docs/quality.md). Gemma 3's part also covers its sliding window
// and sandwich norms, for which no transformers-built parity fixture exists. The same bounds hold
// split over 2 and 4 tensor-parallel CPU ranks (uneven and replicated KV heads, quant blocks of
// the split inputs kept whole), through the whole engine: Session, the per-rank KV cache, the
// ranks. (SmolLM2 over 3 ranks and Gemma 3 over 2 passed too, 0.0023 and 0.0049; left out to keep
// the sanitizer build's suite short.)
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "api/engine.h"
#include "model_cache.h"
#include "slow_build.h"
#include "test_paths.h"

namespace cera {
namespace {

struct TopRow {
  std::vector<std::pair<int32_t, float>> best;  // reference's best ids and logits, best first
};

struct TopReference {
  std::vector<int32_t> ids;
  std::vector<TopRow> rows;
};

TopReference read_top_reference(const std::filesystem::path& path) {
  TopReference r;
  std::ifstream in(path);
  std::string line;
  EXPECT_TRUE(std::getline(in, line)) << path;
  std::istringstream ids(line);
  for (int32_t id; ids >> id;) r.ids.push_back(id);
  while (std::getline(in, line)) {
    TopRow row;
    std::istringstream items(line);
    for (std::string item; items >> item;) {
      const size_t colon = item.find(':');
      row.best.emplace_back(std::stoi(item.substr(0, colon)), std::stof(item.substr(colon + 1)));
    }
    r.rows.push_back(std::move(row));
  }
  return r;
}

struct RealModel {
  const char* name;
  const char* file;
  int tensor_parallel = 1;  // > 1: split over that many CPU ranks (model/tensor_parallel.h)
};

class RealModelLogits : public ::testing::TestWithParam<RealModel> {};

TEST_P(RealModelLogits, MatchTransformersFloat32) {
  const RealModel m = GetParam();
  if (m.tensor_parallel > 1 && test::kSlowBuild) {
    GTEST_SKIP() << "split real models took 104 s of the sanitizer suite (2 cores); there the stories260K split "
                    "tests run the same sharding and collectives, and the release suite runs these";
  }
  const auto path = test::model_cache() / m.file;
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing: run `make models`";
  const TopReference ref = read_top_reference(test::source_dir() / "tests/fixtures/real_models" / (std::string(m.name) + ".top"));
  ASSERT_EQ(ref.ids.size(), ref.rows.size());
  ASSERT_GE(ref.ids.size(), 64u);
  auto engine = api::Engine::load({.model_path = path, .device = api::DeviceChoice::kCpu, .tensor_parallel = m.tensor_parallel});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto session = (*engine)->new_session({.n_ctx = 256});
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->append_tokens(ref.ids, /*all_logits=*/true).ok());
  const auto logits = (*session)->all_logits();
  const int32_t n_vocab = (*engine)->model().hparams().n_vocab;
  int compared = 0, agreed = 0;
  float worst = 0;
  for (size_t pos = 0; pos < ref.rows.size(); ++pos) {
    const float* row = logits.data() + pos * n_vocab;
    const auto& best = ref.rows[pos].best;
    for (const auto& [id, want] : best) {
      worst = std::max(worst, std::fabs(row[id] - want));
      EXPECT_NEAR(row[id], want, 0.02f) << m.name << " x" << m.tensor_parallel << " position " << pos << " token " << id;
    }
    if (best[0].second - best[1].second > 0.05f) {
      ++compared;
      const int32_t ours = static_cast<int32_t>(std::max_element(row, row + n_vocab) - row);
      agreed += ours == best[0].first;
      EXPECT_EQ(ours, best[0].first) << m.name << " x" << m.tensor_parallel << " position " << pos;
    }
  }
  std::printf("%s, %d rank(s): top-1 agrees at %d/%d positions with a clear reference winner; worst |delta logit| %.4f\n",
              m.name, m.tensor_parallel, agreed, compared, worst);
}

INSTANTIATE_TEST_SUITE_P(Models, RealModelLogits,
                         ::testing::Values(RealModel{"smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"},
                                           RealModel{"gemma3", "gemma-3-270m-q4_k_m.gguf"},
                                           // 3 KV heads over 2 ranks: 2 + 1, unevenly.
                                           RealModel{"smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", 2},
                                           // 1 KV head replicated on 4 ranks; Q4_K/Q6_K inputs cut
                                           // at 256-element blocks (one block a rank for O).
                                           RealModel{"gemma3", "gemma-3-270m-q4_k_m.gguf", 4}),
                         [](const auto& info) {
                           return std::string(info.param.name) +
                                  (info.param.tensor_parallel > 1 ? "_tp" + std::to_string(info.param.tensor_parallel) : "");
                         });

}  // namespace
}  // namespace cera
