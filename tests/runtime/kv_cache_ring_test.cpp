// The sliding-window layers' rings in the KV cache: storage sized to the window (bytes, also for
// Gemma 3 270M at a 32k context), fork and truncate judged by transformers' logits (the gemma3
// parity fixture, window 6, tools/parity), can_truncate / can_shift at their boundaries, and a
// context shift on the one-local-layer gemma3_local fixture against a fresh run over the kept
// tokens (the oracle of session_test.cpp's ContextShift: with one layer, K/V depend on the token
// alone, so the shifted cache must hold what a fresh run computes, up to the re-rotation's rounding).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "api/engine.h"
#include "convert/parity_fixture.h"
#include "model_cache.h"
#include "runtime/kv_cache.h"
#include "stories_model.h"
#include "generate_helpers.h"

namespace cera::runtime {
namespace {

std::filesystem::path fixture(const std::string& name) { return test::parity_fixture_dir(name) / "model.gguf"; }

// max |a - b| / max |b|, and whether every row's argmax agrees.
std::pair<float, bool> compare(std::span<const float> a, std::span<const float> b, size_t n_vocab) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0, m = 0;
  bool same_argmax = true;
  for (size_t row = 0; row * n_vocab < std::min(a.size(), b.size()); ++row) {
    const auto ra = a.subspan(row * n_vocab, n_vocab), rb = b.subspan(row * n_vocab, n_vocab);
    for (size_t i = 0; i < n_vocab; ++i) {
      d = std::max(d, std::fabs(ra[i] - rb[i]));
      m = std::max(m, std::fabs(rb[i]));
    }
    same_argmax &= std::ranges::max_element(ra) - ra.begin() == std::ranges::max_element(rb) - rb.begin();
  }
  return {d / m, same_argmax};
}

// Evaluates one chunk of one sequence through Model::forward with both table sets, the way
// Session does; logits of every token.
std::vector<float> eval(model::Model& m, KvCache& c, SeqId seq, std::span<const int32_t> toks) {
  std::vector<int32_t> positions, token_seq(toks.size(), 0), slots, ring_slots, outputs;
  const int32_t start = c.length(seq);
  const Status appended = c.append(seq, static_cast<int32_t>(toks.size()), slots);
  EXPECT_TRUE(appended.ok()) << appended.to_string();
  for (int32_t i = 0; i < static_cast<int32_t>(toks.size()); ++i) {
    positions.push_back(start + i);
    ring_slots.push_back(c.ring_slot(seq, start + i));
    outputs.push_back(i);
  }
  const auto table = c.block_table(seq), ring_table = c.ring_table(seq);
  const std::vector<int32_t> offsets = {0, static_cast<int32_t>(table.size())},
                             ring_offsets = {0, static_cast<int32_t>(ring_table.size())};
  const model::ForwardBatch batch{
      .tokens = toks,
      .attention = {.positions = positions, .token_seq = token_seq, .block_tables = table, .table_offset = offsets},
      .kv_slots = slots,
      .ring = {.block_tables = ring_table, .table_offset = ring_offsets, .kv_slots = ring_slots},
      .output_rows = outputs};
  std::vector<float> logits(toks.size() * static_cast<size_t>(m.hparams().n_vocab));
  const Status st = m.forward(batch, c.layers(), logits);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return logits;
}

// Feeds tokens [from, to) in chunks of the given sizes (cycled); logits of every token.
std::vector<float> feed(model::Model& m, KvCache& c, SeqId seq, std::span<const int32_t> tokens,
                        const std::vector<size_t>& chunks) {
  std::vector<float> all;
  for (size_t at = 0, k = 0; at < tokens.size(); ++k) {
    const size_t n = std::min(chunks[k % chunks.size()], tokens.size() - at);
    const std::vector<float> l = eval(m, c, seq, tokens.subspan(at, n));
    all.insert(all.end(), l.begin(), l.end());
    at += n;
  }
  return all;
}

uint64_t kv_row_bytes(const model::KvGeometry& g) { return 2 * static_cast<uint64_t>(g.kv_width) * sizeof(float); }

TEST(KvCacheRing, SlidingWindowLayersGetWindowSizedStorage) {
  auto engine = api::Engine::load({.model_path = fixture("gemma3"), .device = api::DeviceChoice::kCpu});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  model::Model& m = (*engine)->model();
  const model::KvGeometry g = m.kv_geometry();
  ASSERT_EQ(g.sliding, (std::vector<bool>{true, true, false}));
  auto cache = KvCache::create(m, {.n_slots = 4096, .block_size = 4, .max_batch_tokens = 8, .max_sequences = 2});
  ASSERT_TRUE(cache.ok()) << cache.status().to_string();
  EXPECT_EQ(cache->ring_tokens(), 16);  // window 6 + max(8, 6), whole blocks of 4
  for (int il = 0; il < 3; ++il) EXPECT_EQ(cache->layers()[il].k.rows(), g.sliding[il] ? 2 * 16 : 4096) << il;
  EXPECT_EQ(cache->bytes().full, 4096 * kv_row_bytes(g));
  EXPECT_EQ(cache->bytes().ring, 2 * (2 * 16) * kv_row_bytes(g));

  // A model without sliding-window layers keeps everything full-length.
  auto stories = api::Engine::load({.model_path = test::stories_gguf(), .device = api::DeviceChoice::kCpu});
  ASSERT_TRUE(stories.ok());
  auto plain = KvCache::create((*stories)->model(), {.n_slots = 64, .block_size = 16});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->ring_tokens(), 0);
  EXPECT_EQ(plain->bytes().ring, 0u);
}

// Gemma 3 270M at n_ctx 32768 (the default n_batch 512, window 512): 15 local layers keep
// rings of 1024 slots, 3 global layers the whole context.
TEST(KvCacheRing, Gemma3_270mAt32kContext) {
  const auto path = test::model_cache() / "gemma-3-270m-q4_k_m.gguf";
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing: run `make models`";
  auto engine = api::Engine::load({.model_path = path, .device = api::DeviceChoice::kCpu});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  const model::KvGeometry g = (*engine)->model().kv_geometry();
  int n_local = 0;
  for (bool s : g.sliding) n_local += s;
  ASSERT_EQ(g.sliding_window, 512);
  ASSERT_EQ(n_local, 15);
  auto cache = KvCache::create((*engine)->model(), {.n_slots = 32768, .block_size = 16, .max_batch_tokens = 512});
  ASSERT_TRUE(cache.ok()) << cache.status().to_string();
  const uint64_t every_layer_full = uint64_t(g.n_layer) * 32768 * kv_row_bytes(g);
  EXPECT_EQ(cache->bytes().full, uint64_t(g.n_layer - n_local) * 32768 * kv_row_bytes(g));
  EXPECT_EQ(cache->bytes().ring, uint64_t(n_local) * 1024 * kv_row_bytes(g));
  std::printf("gemma-3-270m KV cache at n_ctx 32768 (F32): every layer full-length %.1f MiB; with rings %.1f MiB "
              "(global %.1f + local rings %.1f)\n",
              every_layer_full / 1048576.0, cache->bytes().total() / 1048576.0, cache->bytes().full / 1048576.0,
              cache->bytes().ring / 1048576.0);
}

class KvCacheRingFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    auto engine = api::Engine::load({.model_path = fixture("gemma3"), .device = api::DeviceChoice::kCpu});
    ASSERT_TRUE(engine.ok()) << engine.status().to_string();
    engine_ = std::move(engine).value();
    auto expected = test::load_expected_logits(test::parity_fixture_dir("gemma3") / "logits.bin");
    ASSERT_TRUE(expected.ok()) << expected.status().to_string();
    ASSERT_EQ(expected->sequences.size(), 3u);
    seq_ = expected->sequences[2];  // 48 tokens
    n_vocab_ = expected->n_vocab;
  }
  // transformers' logits of positions [from, to) of the 48-token sequence.
  std::span<const float> want(size_t from, size_t to) const {
    return std::span(seq_.logits).subspan(from * n_vocab_, (to - from) * n_vocab_);
  }
  std::span<const int32_t> tokens(size_t from, size_t to) const { return std::span(seq_.tokens).subspan(from, to - from); }
  void expect_matches(const std::vector<float>& got, size_t from, size_t to, const char* what) {
    const auto [rel, same] = compare(got, want(from, to), n_vocab_);
    EXPECT_LT(rel, 1e-4f) << what;
    EXPECT_TRUE(same) << what;
    std::printf("ring %-44s max|delta|/max|logit| = %.2e vs transformers\n", what, rel);
  }

  std::unique_ptr<api::Engine> engine_;
  test::LogitsSequence seq_;
  size_t n_vocab_ = 0;
};

// Ring of 16 slots (window 6, appends of at most 8): 30 tokens wrap it; a fork copies it, and
// both sequences then continue as transformers does, after the original has turned its own
// ring further with other tokens and been truncated back.
TEST_F(KvCacheRingFixture, ForkAndTruncateContinueLikeTransformers) {
  model::Model& m = engine_->model();
  auto cache = KvCache::create(m, {.n_slots = 256, .block_size = 4, .max_batch_tokens = 8, .max_sequences = 3});
  ASSERT_TRUE(cache.ok()) << cache.status().to_string();
  ASSERT_EQ(cache->ring_tokens(), 16);
  const SeqId base = cache->new_sequence();
  expect_matches(feed(m, *cache, base, tokens(0, 30), {8}), 0, 30, "prefix of 30 in chunks of 8");
  auto fork = cache->fork(base);
  ASSERT_TRUE(fork.ok()) << fork.status().to_string();
  const std::vector<int32_t> other = {5, 77, 123, 9, 300, 42, 17, 250, 8, 99};
  feed(m, *cache, base, other, {5});  // length 40: the ring now holds entries 24..39
  expect_matches(feed(m, *cache, *fork, tokens(30, 48), {7}), 30, 48, "fork, then 18 more in chunks of 7");

  // Truncating to n needs entries (n - 6, n) still in the ring: n - 5 >= 40 - 16.
  EXPECT_TRUE(cache->can_truncate(base, 29));
  EXPECT_FALSE(cache->can_truncate(base, 28));
  EXPECT_TRUE(cache->can_truncate(base, 0));
  cache->truncate(base, 30);
  expect_matches(feed(m, *cache, base, tokens(30, 48), {8, 8, 2}), 30, 48, "original truncated to 30, then 18 more");
  cache->truncate(base, 0);
  expect_matches(feed(m, *cache, base, tokens(0, 48), {3}), 0, 48, "truncated to 0, all 48 in chunks of 3");

  // Appends larger than the rings allow, or more sequences than they were made for, are refused.
  std::vector<int32_t> slots;
  EXPECT_EQ(cache->append(*fork, 9, slots).code(), ErrorCode::kInvalidArgument);
  const SeqId third = cache->new_sequence(), fourth = cache->new_sequence();
  EXPECT_TRUE(cache->append(third, 8, slots).ok());
  EXPECT_TRUE(cache->append(third, 8, slots).ok());  // its whole ring: the last 4 of 12 ring blocks
  EXPECT_EQ(cache->append(fourth, 1, slots).code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(cache->length(fourth), 0);
  EXPECT_EQ(cache->fork(third).status().code(), ErrorCode::kOutOfRange);
}

// After a shift the next query at new_len sees new positions (new_len - 6, new_len); the kept
// prefix entries among them stay in their ring rows and must not have been overwritten.
TEST_F(KvCacheRingFixture, CanShiftOnlyWhileTheRingHoldsTheKeptWindow) {
  model::Model& m = engine_->model();
  auto cache = KvCache::create(m, {.n_slots = 256, .block_size = 4, .max_batch_tokens = 8});
  ASSERT_TRUE(cache.ok()) << cache.status().to_string();
  const SeqId seq = cache->new_sequence();
  feed(m, *cache, seq, tokens(0, 40), {8});  // the ring holds entries 24..39
  EXPECT_TRUE(cache->can_shift(seq, 10, 10));   // new window 25..29: all moved tail entries
  EXPECT_TRUE(cache->can_shift(seq, 28, 10));   // prefix entries 25..27 are in the ring
  EXPECT_FALSE(cache->can_shift(seq, 28, 12));  // prefix entries 23..27: 23 is overwritten
  EXPECT_FALSE(cache->can_shift(seq, 10, 31));
}

// One-layer models: gemma3_local (its layer keeps a ring) and stories260K's one-layer variant
// (a full-length layer; session_test.cpp's ContextShift runs it too, but reads the shifted
// session's logits after the fresh run, when a session's device-side logits are the model's
// last forward, i.e. the fresh run's own).
class KvCacheShift : public ::testing::TestWithParam<std::string> {};

TEST_P(KvCacheShift, LogitsMatchAFreshRunOverTheKeptTokens) {
  // "<model>_tp2": split over 2 tensor-parallel ranks, each re-rotating its own heads' K.
  const bool split = GetParam().ends_with("_tp2");
  const bool ring = GetParam().starts_with("gemma3_local");
  auto engine = api::Engine::load({.model_path = ring ? fixture("gemma3_local") : test::stories_one_layer_gguf(),
                                   .device = api::DeviceChoice::kCpu,
                                   .tensor_parallel = split ? 2 : 1});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  ASSERT_EQ((*engine)->model().kv_geometry().sliding, ring ? std::vector<bool>{true} : std::vector<bool>{});
  struct Case {
    int32_t n_ctx, n_keep, n_batch;
  };
  // Rings of 12 (n_batch 4) and 16 (n_batch 8) slots; n_ctx 16 with n_keep 8 keeps prefix
  // entries inside the new window.
  for (const Case c : {Case{48, 0, 4}, Case{48, 1, 4}, Case{48, 10, 8}, Case{16, 10, 4}, Case{40, 3, 1}}) {
    auto s = (*engine)->new_session({.n_ctx = c.n_ctx, .n_batch = c.n_batch, .n_keep = c.n_keep, .kv_block_size = 4});
    ASSERT_TRUE(s.ok());
    // A prompt must fit the context (longer ones are refused, session_long_prompt_test.cpp):
    // the 16-token context gets a shorter one, and generation shifts it as the others.
    const Status appended = (*s)->append_text(
        c.n_ctx > 16 ? "Once upon a time there was a little girl" : "Once upon a time there", true);
    ASSERT_TRUE(appended.ok()) << appended.to_string();
    auto r = test::generate_through_shifts(**s);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_GE((*s)->stats().n_context_shifts, 2);
    // Compare right after one more shift, while the window holds entries the shift moved (and
    // re-rotated) rather than entries computed since: feed tokens one by one until it happens.
    const int64_t shifts = (*s)->stats().n_context_shifts;
    for (int32_t t = 20; (*s)->stats().n_context_shifts == shifts; ++t) {
      ASSERT_TRUE((*s)->append_tokens(std::span(&t, 1)).ok());
    }
    // Read before the fresh run: both sessions run on one model.
    const std::vector<float> shifted((*s)->last_logits().begin(), (*s)->last_logits().end());
    auto fresh = (*engine)->new_session({.n_ctx = c.n_ctx});
    ASSERT_TRUE(fresh.ok());
    ASSERT_TRUE((*fresh)->append_tokens((*s)->tokens()).ok());
    const auto [rel, same] = compare(shifted, (*fresh)->last_logits(), (*engine)->model().hparams().n_vocab);
    EXPECT_LT(rel, 1e-5f) << "n_ctx " << c.n_ctx << ", n_keep " << c.n_keep;
    EXPECT_TRUE(same);
    std::printf("%s context shift, n_ctx %d, n_keep %d, n_batch %d: %lld shifts, max|delta|/max|logit| = %.2e\n",
                GetParam().c_str(), c.n_ctx, c.n_keep, c.n_batch, static_cast<long long>((*s)->stats().n_context_shifts),
                rel);
  }
}

INSTANTIATE_TEST_SUITE_P(OneLayer, KvCacheShift,
                         ::testing::Values("gemma3_local", "stories_one_layer", "gemma3_local_tp2",
                                           "stories_one_layer_tp2"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace cera::runtime
