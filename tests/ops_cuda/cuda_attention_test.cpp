// The paged-KV verbs of the CUDA backend against the CPU backend: attention for decode (one
// token per sequence, long contexts that take the split-context path) and prefill (many tokens
// of a sequence), GQA groups of 1, 4 and 9 (more than one group chunk), head_dim 8..256, block
// sizes 16 and 7, softcap and sliding window; kv_store / kv_copy (exact) and kv_rerotate (1e-5).
// Attention tolerance 1e-4 on ‖gpu − cpu‖₂ / ‖cpu‖₂: float32 on both sides, with __expf and a
// different merge order on the GPU.
#include <algorithm>
#include <numeric>

#include "cuda_test_util.h"

namespace cera::ops::test {
namespace {

struct Cache {
  Tensor k, v;
  KvLayer layer;
};
Cache make_cache(Backend& b, int64_t width, int64_t n_slots, int32_t block_size, const std::vector<float>& k,
                 const std::vector<float>& v) {
  Cache c;
  c.k = make_tensor(b, {width, n_slots, 1, 1}, k);
  c.v = make_tensor(b, {width, n_slots, 1, 1}, v);
  c.layer = {c.k.view, c.v.view, block_size};
  return c;
}

struct Case {
  int32_t n_head_kv, n_group, head_dim, block_size;
  std::vector<int32_t> seq_len;  // context length of each sequence, including its query tokens
  int32_t queries_per_seq;       // the last queries_per_seq positions of each sequence are queried
  float softcap = 0.0f;
  int32_t window = 0;
};

void check_attention(const Case& c, std::mt19937& rng) {
  Backends& be = backends();
  const int32_t n_head = c.n_head_kv * c.n_group, width = c.n_head_kv * c.head_dim;
  std::vector<int32_t> offsets = {0}, tables;
  int32_t total_blocks = 0;
  for (int32_t len : c.seq_len) total_blocks += (len + c.block_size - 1) / c.block_size;
  total_blocks += 3;  // unused blocks in between
  std::vector<int32_t> perm(static_cast<size_t>(total_blocks));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  size_t next = 0;
  AttentionBatch batch;
  std::vector<int32_t> positions, token_seq;
  for (size_t s = 0; s < c.seq_len.size(); ++s) {
    const int32_t nb = (c.seq_len[s] + c.block_size - 1) / c.block_size;
    for (int32_t b = 0; b < nb; ++b) tables.push_back(perm[next++]);
    offsets.push_back(int32_t(tables.size()));
    for (int32_t q = 0; q < c.queries_per_seq; ++q) {
      positions.push_back(c.seq_len[s] - c.queries_per_seq + q);
      token_seq.push_back(int32_t(s));
    }
  }
  batch = {positions, token_seq, tables, offsets};
  const int64_t n_slots = int64_t(total_blocks) * c.block_size, n_tokens = int64_t(positions.size());
  const auto k = random_floats(rng, size_t(n_slots * width), -2, 2), v = random_floats(rng, size_t(n_slots * width));
  const auto q = random_floats(rng, size_t(n_tokens * n_head * c.head_dim), -2, 2);
  const AttentionParams p{.n_head = n_head, .n_head_kv = c.n_head_kv, .head_dim = c.head_dim,
                          .scale = 1.0f / std::sqrt(float(c.head_dim)), .softcap = c.softcap,
                          .sliding_window = c.window};
  std::vector<float> got[2];
  Backend* list[2] = {be.cuda.get(), be.cpu.get()};
  for (int i = 0; i < 2; ++i) {
    Cache cache = make_cache(*list[i], width, n_slots, c.block_size, k, v);
    Tensor qt = make_tensor(*list[i], {c.head_dim, n_head, n_tokens, 1}, q);
    Tensor out = make_tensor(*list[i], {int64_t(n_head) * c.head_dim, n_tokens, 1, 1}, std::vector<float>(q.size()));
    poison(*list[i], out.view);
    list[i]->attention(out.view, qt.view, cache.layer, batch, p);
    got[i] = read_tensor(*list[i], out.view);
  }
  CERA_EXPECT_CLOSE(got[0], got[1], 1e-4,
                    "attention kv_heads=" + std::to_string(c.n_head_kv) + " group=" + std::to_string(c.n_group) +
                        " head_dim=" + std::to_string(c.head_dim) + " tokens=" + std::to_string(n_tokens) +
                        " len0=" + std::to_string(c.seq_len[0]));
}

TEST(CudaAttention, DecodeAndPrefillSweep) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(11);
  const std::vector<int32_t> head_dims = quick_sweep() ? std::vector<int32_t>{8, 128} : std::vector<int32_t>{8, 64, 128, 256};
  for (int32_t head_dim : head_dims) {
    for (int32_t group : {1, 4, 9}) {
      for (int32_t block_size : {16, 7}) {
        check_attention({2, group, head_dim, block_size, {1}, 1}, rng);                  // first token
        check_attention({2, group, head_dim, block_size, {300, 33, 2049}, 1}, rng);      // decode, split
        check_attention({2, group, head_dim, block_size, {45}, 45}, rng);                // whole prompt
        check_attention({1, group, head_dim, block_size, {130, 70}, 19}, rng);           // chunked prefill
      }
    }
  }
}

TEST(CudaAttention, SoftcapAndSlidingWindow) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(12);
  for (int32_t head_dim : {64, 256}) {
    check_attention({2, 4, head_dim, 16, {500}, 1, 50.0f, 0}, rng);
    check_attention({2, 4, head_dim, 16, {700, 40}, 1, 0.0f, 128}, rng);
    check_attention({2, 2, head_dim, 16, {300}, 37, 30.0f, 64}, rng);
  }
}

TEST(CudaKv, StoreCopyRerotate) {
  CERA_SKIP_WITHOUT_CUDA();
  Backends& be = backends();
  std::mt19937 rng(13);
  const int32_t head_dim = 64, n_head_kv = 3, width = head_dim * n_head_kv;
  const int64_t n_slots = 80;
  const auto k0 = random_floats(rng, size_t(n_slots * width)), v0 = random_floats(rng, size_t(n_slots * width));
  const int64_t n = 5;
  const auto kn = random_floats(rng, size_t(n * width)), vn = random_floats(rng, size_t(n * width));
  const std::vector<int32_t> slots = {77, 3, 40, 41, 0};
  const std::vector<int32_t> src = {3, 40, 10, 11}, dst = {60, 61, 62, 3};
  const std::vector<int32_t> rot = {60, 61, 5, 79};
  const RopeParams rope{.kind = RopeKind::kNeox, .n_rot = 64, .freq_base = 10000.0f, .freq_scale = 1.0f,
                        .freq_factors = nullptr};
  std::vector<float> got_k[2], got_v[2];
  Backend* list[2] = {be.cuda.get(), be.cpu.get()};
  for (int i = 0; i < 2; ++i) {
    Backend& b = *list[i];
    Cache c = make_cache(b, width, n_slots, 16, k0, v0);
    Tensor kt = make_tensor(b, {width, n, 1, 1}, kn), vt = make_tensor(b, {width, n, 1, 1}, vn);
    b.kv_store(c.layer, kt.view, vt.view, slots);
    b.kv_copy(c.layer, src, dst);
    got_k[i] = read_tensor(b, c.k.view);
    got_v[i] = read_tensor(b, c.v.view);
    EXPECT_EQ(got_k[i].size(), k0.size());
    b.kv_rerotate(c.layer, rot, -17, head_dim, rope);
    const auto rk = read_tensor(b, c.k.view);
    if (i == 1) CERA_EXPECT_CLOSE(got_k[0], rk, 1e-5, "kv_rerotate");
    got_k[i] = rk;
  }
  EXPECT_EQ(got_v[0], got_v[1]);  // store + copy are exact moves
}

}  // namespace
}  // namespace cera::ops::test
