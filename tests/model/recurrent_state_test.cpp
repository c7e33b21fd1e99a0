// The convolution state of lfm2 follows its sequence (runtime/kv_cache): a forked sequence
// (prefix reuse), a rollback to an earlier chunk and a context shift give the logits of a fresh
// run; the state is untouched by a shift; prompt processing calls short_conv once per layer and
// sequence with all of the sequence's tokens (the engine loop's overlapped decode, whose
// discarded steps also run on the state, is tests/model/engine_loop_models_test.cpp's
// EngineLoopPipelined). Models: the parity fixtures lfm2, lfm2moe and
// lfm2_conv (converted to F32 GGUF here), run on CERA_TEST_DEVICE's backend (test_device.h; the
// CPU by default) with an F32 KV cache; the call-count test wraps the CPU backend.
#include <gtest/gtest.h>

#include <cmath>

#include "api/engine.h"
#include "convert/hf_convert.h"
#include "convert/parity_fixture.h"
#include "ops/cpu/cpu_backend.h"
#include "runtime/kv_cache.h"
#include "test_device.h"
#include "forwarding_backend.h"
#include "generate_helpers.h"

namespace cera {
namespace {

using runtime::KvCache;
using runtime::SeqId;

// The engine on CERA_TEST_DEVICE's device; a bad device name fails the calling test.
Result<std::unique_ptr<api::Engine>> load(const std::filesystem::path& model) {
  const test::TestDevice d = test::test_device();
  if (!d.error.empty()) return invalid_argument(d.error);
  auto engine = api::Engine::load({.model_path = model, .device = d.choice, .kv_type = api::KvTypeChoice::kF32});
  if (!engine.ok()) return engine.status().with_context("CERA_TEST_DEVICE=" + d.name);
  return engine;
}

std::filesystem::path converted(const std::string& name) {
  const auto gguf = test::temp_dir() / (name + "-state-f32.gguf");
  if (!std::filesystem::exists(gguf)) {
    auto r = convert::convert_hf({.dir = test::parity_fixture_dir(name), .output = gguf, .type = DType::kF32});
    EXPECT_TRUE(r.ok()) << r.status().to_string();
  }
  return gguf;
}

// max |a - b| / max |b|
float rel_diff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0, m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d = std::max(d, std::fabs(a[i] - b[i]));
    m = std::max(m, std::fabs(b[i]));
  }
  return d / m;
}

// Evaluates chunks of one or more sequences through Model::forward, the way Session does.
class Runner {
 public:
  Runner(model::Model& m, KvCache& c) : m_(m), c_(c) {}

  // One forward over the sequences' new tokens (one contiguous run each); logits of every token.
  std::vector<float> eval(std::vector<std::pair<SeqId, std::vector<int32_t>>> parts) {
    std::vector<int32_t> tokens, positions, token_seq, slots, tables, offsets = {0}, outputs;
    std::vector<TensorView> states;
    for (size_t j = 0; j < parts.size(); ++j) {
      const auto& [seq, toks] = parts[j];
      const int32_t start = c_.length(seq);
      EXPECT_TRUE(c_.append(seq, static_cast<int32_t>(toks.size()), slots).ok());
      for (size_t i = 0; i < toks.size(); ++i) {
        outputs.push_back(static_cast<int32_t>(tokens.size()));
        tokens.push_back(toks[i]);
        positions.push_back(start + static_cast<int32_t>(i));
        token_seq.push_back(static_cast<int32_t>(j));
      }
      const auto table = c_.block_table(seq);
      tables.insert(tables.end(), table.begin(), table.end());
      offsets.push_back(static_cast<int32_t>(tables.size()));
      const auto st = c_.recurrent_state(seq);
      states.insert(states.end(), st.begin(), st.end());
    }
    const model::ForwardBatch batch{.tokens = tokens,
                                    .attention = {.positions = positions,
                                                  .token_seq = token_seq,
                                                  .block_tables = tables,
                                                  .table_offset = offsets},
                                    .kv_slots = slots,
                                    .output_rows = outputs,
                                    .recurrent_state = states};
    std::vector<float> logits(tokens.size() * static_cast<size_t>(m_.hparams().n_vocab));
    const Status st = m_.forward(batch, c_.layers(), logits);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return logits;
  }
  std::vector<float> eval(SeqId seq, const std::vector<int32_t>& toks) { return eval({{seq, toks}}); }

 private:
  model::Model& m_;
  KvCache& c_;
};

std::vector<int32_t> ids(int n, int seed) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(4 + (seed * 37 + i * 101) % 370);
  return out;
}
// The last n rows of logits.
std::span<const float> tail(const std::vector<float>& logits, size_t n, int32_t n_vocab) {
  return std::span(logits).subspan(logits.size() - n * n_vocab);
}

class RecurrentState : public ::testing::TestWithParam<std::string> {};

TEST_P(RecurrentState, ForkedSequenceContinuesLikeAFreshRun) {
  auto engine = load(converted(GetParam()));
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  model::Model& m = (*engine)->model();
  const int32_t nv = m.hparams().n_vocab;
  auto cache = KvCache::create(m, {.n_slots = 256, .block_size = 16});
  ASSERT_TRUE(cache.ok());
  Runner run(m, *cache);
  const std::vector<int32_t> prefix = ids(11, 1), a = ids(9, 2), b = ids(6, 3);  // 11: a partial block
  auto joined = [&](const std::vector<int32_t>& s) {
    std::vector<int32_t> all = prefix;
    all.insert(all.end(), s.begin(), s.end());
    return all;
  };
  const SeqId fresh_a = cache->new_sequence(), fresh_b = cache->new_sequence();
  const std::vector<float> want_a = run.eval(fresh_a, joined(a)), want_b = run.eval(fresh_b, joined(b));

  const SeqId base = cache->new_sequence();
  run.eval(base, prefix);
  auto fork = cache->fork(base);
  ASSERT_TRUE(fork.ok()) << fork.status().to_string();
  // Both continue from the same prefix, in one batch, with different tokens.
  const std::vector<float> got = run.eval({{*fork, a}, {base, b}});
  const std::span<const float> got_a = std::span(got).first(a.size() * nv), got_b = std::span(got).subspan(a.size() * nv);
  const float ra = rel_diff(got_a, tail(want_a, a.size(), nv)), rb = rel_diff(got_b, tail(want_b, b.size(), nv));
  EXPECT_LT(ra, 1e-5f);
  EXPECT_LT(rb, 1e-5f);
  std::printf("%s fork: forked %.2e, original %.2e (max |delta| / max |logit| vs fresh runs)\n", GetParam().c_str(), ra, rb);
}

TEST_P(RecurrentState, RollbackToAnEarlierChunkRestoresTheState) {
  auto engine = load(converted(GetParam()));
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  model::Model& m = (*engine)->model();
  const int32_t nv = m.hparams().n_vocab;
  auto cache = KvCache::create(m, {.n_slots = 256, .block_size = 16});
  ASSERT_TRUE(cache.ok());
  Runner run(m, *cache);
  const std::vector<int32_t> p = ids(13, 4), x1 = ids(7, 5), x2 = {9}, s = ids(5, 6);
  std::vector<int32_t> ps = p;
  ps.insert(ps.end(), s.begin(), s.end());
  const SeqId fresh = cache->new_sequence();
  const std::vector<float> want = run.eval(fresh, ps);

  const SeqId seq = cache->new_sequence();
  run.eval(seq, p);
  run.eval(seq, x1);  // two chunks that are then taken back
  run.eval(seq, x2);
  ASSERT_TRUE(cache->can_truncate(seq, 13));
  EXPECT_FALSE(cache->can_truncate(seq, 12));  // mid-chunk: no snapshot there
  cache->truncate(seq, 13);
  const float r = rel_diff(run.eval(seq, s), tail(want, s.size(), nv));
  EXPECT_LT(r, 1e-5f);
  // Back to the start: a zero state, like a new sequence.
  cache->truncate(seq, 0);
  const float r0 = rel_diff(run.eval(seq, ps), want);
  EXPECT_LT(r0, 1e-5f);
  std::printf("%s rollback: to a chunk boundary %.2e, to 0 %.2e\n", GetParam().c_str(), r, r0);
}

TEST_P(RecurrentState, ShiftLeavesTheStateOfTheKeptEnd) {
  auto engine = load(converted(GetParam()));
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  model::Model& m = (*engine)->model();
  auto cache = KvCache::create(m, {.n_slots = 256, .block_size = 16});
  ASSERT_TRUE(cache.ok());
  Runner run(m, *cache);
  const SeqId seq = cache->new_sequence();
  run.eval(seq, ids(40, 7));
  auto snapshot = [&] {
    std::vector<float> all;
    for (const TensorView& v : cache->recurrent_state(seq)) {
      if (v.data == nullptr) continue;
      std::vector<float> one(static_cast<size_t>(v.n_elements()));
      m.backend().download(one.data(), v);
      all.insert(all.end(), one.begin(), one.end());
    }
    return all;
  };
  const std::vector<float> before = snapshot();
  ASSERT_FALSE(before.empty());
  cache->shift(seq, 4, 17);
  EXPECT_EQ(cache->length(seq), 23);
  EXPECT_EQ(snapshot(), before);
  EXPECT_FALSE(cache->can_truncate(seq, 10));  // snapshots from before the shift are gone
}

INSTANTIATE_TEST_SUITE_P(Lfm2Family, RecurrentState, ::testing::Values("lfm2", "lfm2moe"),
                         [](const auto& info) { return info.param; });

// On a model whose only layer is a convolution, everything a sequence keeps is the state: the
// last L_cache-1 inputs, each a function of its own token alone. A context shift keeps the end
// of the sequence, so the shifted session holds exactly what a fresh run over the kept tokens
// computes, and their logits must agree (like runtime/session_test.cpp's ContextShift on a
// one-layer attention model). With more layers the comparison is not fair for any design: the
// kept K/V rows and states were computed while the dropped tokens were still visible.
TEST(RecurrentStateShift, LogitsMatchAFreshRunOverTheKeptTokens) {
  auto engine = load(converted("lfm2_conv"));
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  for (int n_keep : {0, 1, 10}) {
    auto s = (*engine)->new_session({.n_ctx = 48, .n_keep = n_keep});
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->append_text("The quick brown fox jumps over the lazy dog. Once upon a time", true).ok());
    auto r = test::generate_through_shifts(**s);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_GE((*s)->stats().n_context_shifts, 2);
    ASSERT_TRUE((*s)->append_text(" the end", false).ok());
    auto fresh = (*engine)->new_session({.n_ctx = 48});
    ASSERT_TRUE(fresh.ok());
    ASSERT_TRUE((*fresh)->append_tokens((*s)->tokens()).ok());
    const float rel = rel_diff((*s)->last_logits(), (*fresh)->last_logits());
    EXPECT_LT(rel, 1e-5f) << "n_keep " << n_keep;
    std::printf("lfm2_conv context shift, n_keep %d: %lld shifts, max |delta logit| / max |logit| = %.2e\n", n_keep,
                static_cast<long long>((*s)->stats().n_context_shifts), rel);
  }
}

// A CPU backend that counts short_conv calls and the tokens of each.
class CountingBackend final : public test::ForwardingBackend {
 public:
  CountingBackend() : ForwardingBackend(ops::make_cpu_backend({.n_threads = 2})) {}
  std::vector<int64_t> conv_tokens;  // n_tokens of every short_conv call

  std::string name() const override { return "counting " + inner().name(); }
  void short_conv(const TensorView& o, const TensorView& bcx, const TensorView& k, const TensorView& s) override {
    conv_tokens.push_back(o.rows());
    ForwardingBackend::short_conv(o, bcx, k, s);
  }
};

TEST(RecurrentStatePrompt, OneShortConvCallPerLayerAndSequence) {
  auto file = format::GgufFile::open(converted("lfm2"));
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  CountingBackend backend;
  auto m = model::load_model(*file, backend);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  auto cache = KvCache::create(**m, {.n_slots = 256, .block_size = 16});
  ASSERT_TRUE(cache.ok());
  int n_conv = 0;
  for (model::LayerKind k : (*m)->kv_geometry().kinds) n_conv += k == model::LayerKind::kShortConv;
  ASSERT_EQ(n_conv, 2);
  Runner run(**m, *cache);
  const SeqId a = cache->new_sequence(), b = cache->new_sequence();
  run.eval(a, ids(57, 8));
  EXPECT_EQ(backend.conv_tokens, std::vector<int64_t>(2, 57));  // the whole prompt in one call per layer
  backend.conv_tokens.clear();
  run.eval({{a, ids(3, 9)}, {b, ids(20, 10)}});  // two sequences: one call each per layer
  EXPECT_EQ(backend.conv_tokens, (std::vector<int64_t>{3, 20, 3, 20}));
}

}  // namespace
}  // namespace cera
