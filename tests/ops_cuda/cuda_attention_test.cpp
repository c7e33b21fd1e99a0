// The paged-KV verbs of the CUDA backend against the CPU backend: attention for decode (one
// token per sequence, long contexts that take the split-context path) and prefill (many tokens
// of a sequence), GQA groups of 1, 4 and 9 (more than one group chunk), head_dim 8..256, block
// sizes 16 and 7, softcap and sliding window, decode batches of several tokens a sequence whose
// rows kv_store writes just before; kv_store / kv_copy (exact) and kv_rerotate (1e-5).
// Attention tolerance 1e-4 on ‖gpu − cpu‖₂ / ‖cpu‖₂: float32 on both sides, with __expf and a
// different merge order on the GPU. Prompt batches (> 16 tokens) at head_dim 64/128/256 take the
// tensor-core kernel (attention_prefill.cu), which rounds Q·scale, K, V and the softmax weights P
// to f16 (10-bit mantissa, relative rounding <= 2^-11) and accumulates in f32: a numpy model of
// it gives 1.5e-4 .. 4.3e-4 relative L2 on these inputs, so those cases are checked at 2e-3; so are
// decode batches over F16 rows at head_dim 64/128, which take the tensor-core decode kernel
// (attention_tc.cu: Q·scale and P rounded to f16 the same way). Every check runs with F32 and with F16 cache rows; both
// backends read the same fp16 bits (kv_store's rounding is compared bit for bit), so the F16
// tolerance is the F32 one.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/half.h"
#include "cuda_test_util.h"

namespace cera::ops::test {
namespace {

struct Cache {
  Tensor k, v;
  KvLayer layer;
};
// A cache row tensor of type t (F32, or F16 holding float_to_half of the values).
Tensor make_rows(Backend& b, DType t, std::array<int64_t, 4> ne, const std::vector<float>& values) {
  if (t == DType::kF32) return make_tensor(b, ne, values);
  CERA_CHECK(t == DType::kF16);
  std::vector<uint16_t> h(values.size());
  for (size_t i = 0; i < h.size(); ++i) h[i] = float_to_half(values[i]);
  Tensor out;
  auto buf = b.allocate(h.size() * sizeof(uint16_t));
  CERA_CHECK(buf.ok());
  out.buffer = std::move(buf).value();
  out.view = out.buffer->view(DType::kF16, ne, b.device());
  CERA_CHECK(out.view.n_elements() == static_cast<int64_t>(h.size()));
  b.upload(out.view, h.data());
  return out;
}
// The rows as float; F16 rows also as their bits (for exact comparisons).
std::vector<float> read_rows(Backend& b, const TensorView& v, std::vector<uint16_t>* bits = nullptr) {
  if (v.dtype == DType::kF32) return read_tensor(b, v);
  std::vector<uint16_t> h(static_cast<size_t>(v.n_elements()));
  b.download(h.data(), v);
  std::vector<float> out(h.size());
  for (size_t i = 0; i < h.size(); ++i) out[i] = half_to_float(h[i]);
  if (bits != nullptr) *bits = std::move(h);
  return out;
}
Cache make_cache(Backend& b, int64_t width, int64_t n_slots, int32_t block_size, const std::vector<float>& k,
                 const std::vector<float>& v, DType kv_type = DType::kF32) {
  Cache c;
  c.k = make_rows(b, kv_type, {width, n_slots, 1, 1}, k);
  c.v = make_rows(b, kv_type, {width, n_slots, 1, 1}, v);
  c.layer = {c.k.view, c.v.view, block_size};
  return c;
}
const char* dtype_label(DType t) { return t == DType::kF16 ? "F16" : "F32"; }
constexpr DType kKvTypes[] = {DType::kF32, DType::kF16};

struct Case {
  int32_t n_head_kv, n_group, head_dim, block_size;
  std::vector<int32_t> seq_len;  // context length of each sequence, including its query tokens
  int32_t queries_per_seq;       // the last queries_per_seq positions of each sequence are queried
  float softcap = 0.0f;
  int32_t window = 0;
  // CUDA: the batch's own cache rows start as NaN and kv_store writes them just before attention,
  // as in a decode step. Attention copies the rows of earlier steps before its PDL wait and the
  // batch's after it (attention_common.cuh, fresh_row); a batch row read too early would read NaN.
  bool store_batch_rows = false;
};

void check_attention(const Case& c, std::mt19937& rng, DType kv_type) {
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
  // The batch's cache slots and their rows of k and v (store_batch_rows).
  std::vector<int32_t> slots;
  std::vector<float> k_rows, v_rows, k_first = k, v_first = v;
  if (c.store_batch_rows) {
    for (int64_t t = 0; t < n_tokens; ++t) {
      const int32_t pos = positions[size_t(t)], seq = token_seq[size_t(t)];
      const int32_t slot = tables[size_t(offsets[size_t(seq)] + pos / c.block_size)] * c.block_size + pos % c.block_size;
      slots.push_back(slot);
      for (int32_t e = 0; e < width; ++e) {
        k_rows.push_back(k[size_t(int64_t(slot) * width + e)]);
        v_rows.push_back(v[size_t(int64_t(slot) * width + e)]);
        k_first[size_t(int64_t(slot) * width + e)] = v_first[size_t(int64_t(slot) * width + e)] = NAN;
      }
    }
  }
  std::vector<float> got[2];
  Backend* list[2] = {be.cuda.get(), be.cpu.get()};
  for (int i = 0; i < 2; ++i) {
    const bool store = c.store_batch_rows && i == 0;
    Cache cache = make_cache(*list[i], width, n_slots, c.block_size, store ? k_first : k, store ? v_first : v, kv_type);
    Tensor qt = make_tensor(*list[i], {c.head_dim, n_head, n_tokens, 1}, q);
    Tensor out = make_tensor(*list[i], {int64_t(n_head) * c.head_dim, n_tokens, 1, 1}, std::vector<float>(q.size()));
    poison(*list[i], out.view);
    if (store) {
      Tensor kt = make_tensor(*list[i], {width, n_tokens, 1, 1}, k_rows), vt = make_tensor(*list[i], {width, n_tokens, 1, 1}, v_rows);
      list[i]->kv_store(cache.layer, kt.view, vt.view, slots);
    }
    list[i]->attention(out.view, qt.view, cache.layer, batch, p);
    got[i] = read_tensor(*list[i], out.view);
  }
  const bool tensor_cores = (n_tokens > 16 && (c.head_dim == 64 || c.head_dim == 128 || c.head_dim == 256)) ||
                            (n_tokens <= 16 && kv_type == DType::kF16 && (c.head_dim == 64 || c.head_dim == 128));
  CERA_EXPECT_CLOSE(got[0], got[1], tensor_cores ? 2e-3 : 1e-4,
                    std::string("attention ") + dtype_label(kv_type) + " kv_heads=" + std::to_string(c.n_head_kv) + " group=" + std::to_string(c.n_group) +
                        " head_dim=" + std::to_string(c.head_dim) + " tokens=" + std::to_string(n_tokens) +
                        " len0=" + std::to_string(c.seq_len[0]) + " softcap=" + std::to_string(c.softcap) +
                        " window=" + std::to_string(c.window) + " block=" + std::to_string(c.block_size) +
                        (c.store_batch_rows ? " rows stored first" : ""));
}

TEST(CudaAttention, DecodeAndPrefillSweep) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(11);
  const std::vector<int32_t> head_dims = quick_sweep() ? std::vector<int32_t>{8, 128} : std::vector<int32_t>{8, 64, 128, 256};
  for (int32_t head_dim : head_dims) {
    for (int32_t group : {1, 4, 9}) {
      for (int32_t block_size : {16, 7}) {
        for (DType t : kKvTypes) {
          check_attention({2, group, head_dim, block_size, {1}, 1}, rng, t);              // first token
          check_attention({2, group, head_dim, block_size, {300, 33, 2049}, 1}, rng, t);  // decode, split
          check_attention({2, group, head_dim, block_size, {45}, 45}, rng, t);            // whole prompt
          check_attention({1, group, head_dim, block_size, {130, 70}, 19}, rng, t);       // chunked prefill
          // Several tokens a sequence through the decode kernels (speculative verification), the
          // batch's rows stored just before: 300 entries split, 90 not.
          check_attention({2, group, head_dim, block_size, {300, 90}, 5, 0.0f, 0, true}, rng, t);
        }
      }
    }
  }
}

TEST(CudaAttention, SoftcapAndSlidingWindow) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(12);
  for (int32_t head_dim : {64, 128, 256}) {
    for (DType t : kKvTypes) {
      check_attention({2, 4, head_dim, 16, {500}, 1, 50.0f, 0}, rng, t);
      check_attention({2, 4, head_dim, 16, {700, 40}, 1, 0.0f, 128}, rng, t);
      check_attention({2, 2, head_dim, 16, {300}, 37, 30.0f, 64}, rng, t);
    }
  }
}

// The tensor-core prompt kernel: prompts of 17 (one partial 64-token chunk), 64, 100 and 512
// tokens from position 0 and continuing a sequence (positions 300..811), GQA groups 1, 4 and 8,
// two sequences in one batch (a chunk holding the end of one and the start of the other), block
// size 7 (table lookups inside a tile), softcap and sliding windows (tiles skipped below the
// window, masks at both edges).
TEST(CudaAttention, PrefillTensorCores) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(16);
  const std::vector<int32_t> groups = quick_sweep() ? std::vector<int32_t>{4} : std::vector<int32_t>{1, 4, 8};
  for (int32_t head_dim : {64, 128, 256}) {
    for (DType t : kKvTypes) {
      for (int32_t group : groups) {
        check_attention({2, group, head_dim, 16, {17}, 17}, rng, t);
        check_attention({2, group, head_dim, 16, {64}, 64}, rng, t);
        check_attention({1, group, head_dim, 7, {100}, 100}, rng, t);
        check_attention({2, group, head_dim, 16, {512}, 512}, rng, t);
        check_attention({2, group, head_dim, 16, {812}, 512}, rng, t);          // positions 300..811
        check_attention({1, group, head_dim, 16, {300, 90}, 80}, rng, t);       // two sequences
      }
      check_attention({2, 4, head_dim, 16, {812}, 512, 30.0f, 0}, rng, t);      // softcap
      check_attention({2, 4, head_dim, 16, {812}, 512, 0.0f, 128}, rng, t);     // window, continuing
      check_attention({2, 4, head_dim, 7, {200}, 200, 50.0f, 100}, rng, t);     // both, from 0
      check_attention({1, 8, head_dim, 16, {100, 700, 65}, 60, 0.0f, 37}, rng, t);  // three sequences
    }
  }
}

// F16 rows whose head_dim is not a multiple of 8 (scalar loads: no vector alignment) and long
// decode contexts at the 8B shape's head_dim (4096 entries, the split path with 64 splits).
TEST(CudaAttention, F16UnalignedAndLongDecode) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(14);
  for (int32_t head_dim : {20, 36, 100}) {
    check_attention({2, 4, head_dim, 16, {333, 5}, 1}, rng, DType::kF16);
    check_attention({1, 3, head_dim, 7, {90}, 30}, rng, DType::kF16);
  }
  check_attention({8, 4, 128, 16, {4096}, 1}, rng, DType::kF16);
  check_attention({8, 4, 64, 16, {4096, 1000}, 1}, rng, DType::kF16);
}

TEST(CudaAttention, RejectsMixedCacheTypes) {
  CERA_SKIP_WITHOUT_CUDA();
  Backend& b = *backends().cuda;
  const std::vector<float> rows(64 * 16, 0.5f);
  Tensor kf = make_rows(b, DType::kF32, {64, 16, 1, 1}, rows), vh = make_rows(b, DType::kF16, {64, 16, 1, 1}, rows);
  Tensor q = make_tensor(b, {64, 1, 1, 1}, std::vector<float>(64, 0.5f));
  Tensor out = make_tensor(b, {64, 1, 1, 1}, std::vector<float>(64));
  const std::vector<int32_t> positions = {0}, token_seq = {0}, tables = {0}, offsets = {0, 1};
  const KvLayer mixed{kf.view, vh.view, 16};
  const AttentionParams p{.n_head = 1, .n_head_kv = 1, .head_dim = 64, .scale = 0.125f};
  EXPECT_THROW(b.attention(out.view, q.view, mixed, {positions, token_seq, tables, offsets}, p), CheckFailure);
  EXPECT_THROW(b.kv_store(mixed, q.view, q.view, std::vector<int32_t>{0}), CheckFailure);
  EXPECT_THROW(b.kv_copy(mixed, std::vector<int32_t>{0}, std::vector<int32_t>{1}), CheckFailure);
  b.synchronize();
}

void check_kv_moves(std::mt19937& rng, DType kv_type) {
  Backends& be = backends();
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
  std::vector<uint16_t> bits_k[2], bits_v[2];
  Backend* list[2] = {be.cuda.get(), be.cpu.get()};
  for (int i = 0; i < 2; ++i) {
    Backend& b = *list[i];
    Cache c = make_cache(b, width, n_slots, 16, k0, v0, kv_type);
    Tensor kt = make_tensor(b, {width, n, 1, 1}, kn), vt = make_tensor(b, {width, n, 1, 1}, vn);
    b.kv_store(c.layer, kt.view, vt.view, slots);
    b.kv_copy(c.layer, src, dst);
    got_k[i] = read_rows(b, c.k.view, &bits_k[i]);
    got_v[i] = read_rows(b, c.v.view, &bits_v[i]);
    EXPECT_EQ(got_k[i].size(), k0.size());
    b.kv_rerotate(c.layer, rot, -17, head_dim, rope);
    const auto rk = read_rows(b, c.k.view);
    if (i == 1) {
      CERA_EXPECT_CLOSE(got_k[0], rk, kv_type == DType::kF16 ? 1e-3 : 1e-5,
                        std::string("kv_rerotate ") + dtype_label(kv_type));
    }
    got_k[i] = rk;
  }
  EXPECT_EQ(got_v[0], got_v[1]) << dtype_label(kv_type);  // store + copy are exact moves
  EXPECT_EQ(bits_k[0], bits_k[1]) << dtype_label(kv_type);
  EXPECT_EQ(bits_v[0], bits_v[1]) << dtype_label(kv_type);
}

// rope(Q) ; rope(K) ; kv_store(K, V): graph replay fuses the three (fused.cu) and writes the
// cache rows in the cache's type. Compared with the CPU backend's three verbs.
void check_rope_store(std::mt19937& rng, DType kv_type) {
  Backends& be = backends();
  const int32_t head_dim = 128, n_head = 8, n_head_kv = 2, width = head_dim * n_head_kv;
  const int64_t n_slots = 48, n_tok = 3;
  const std::vector<int32_t> positions = {5, 900, 17}, slots = {40, 2, 33};
  const RopeParams rope{.kind = RopeKind::kNorm, .n_rot = 128, .freq_base = 500000.0f, .freq_scale = 1.0f,
                        .freq_factors = nullptr};
  const auto k0 = random_floats(rng, size_t(n_slots * width)), v0 = random_floats(rng, size_t(n_slots * width));
  const auto q = random_floats(rng, size_t(n_tok * n_head * head_dim), -2, 2);
  const auto kn = random_floats(rng, size_t(n_tok * width), -2, 2), vn = random_floats(rng, size_t(n_tok * width));
  std::vector<float> got_q[2], got_k[2], got_v[2];
  std::vector<uint16_t> bits_v[2];
  Backend* list[2] = {be.cuda.get(), be.cpu.get()};
  for (int i = 0; i < 2; ++i) {
    Backend& b = *list[i];
    Cache c = make_cache(b, width, n_slots, 16, k0, v0, kv_type);
    Tensor qt = make_tensor(b, {head_dim, n_head, n_tok, 1}, q), kt = make_tensor(b, {head_dim, n_head_kv, n_tok, 1}, kn);
    Tensor vt = make_tensor(b, {width, n_tok, 1, 1}, vn);
    b.rope(qt.view, positions, rope);
    b.rope(kt.view, positions, rope);
    b.kv_store(c.layer, kt.buffer->view(DType::kF32, {width, n_tok, 1, 1}, b.device()), vt.view, slots);
    got_q[i] = read_tensor(b, qt.view);
    got_k[i] = read_rows(b, c.k.view);
    got_v[i] = read_rows(b, c.v.view, &bits_v[i]);
  }
  const std::string what = std::string("rope+kv_store ") + dtype_label(kv_type);
  CERA_EXPECT_CLOSE(got_q[0], got_q[1], 1e-5, what + " q");
  CERA_EXPECT_CLOSE(got_k[0], got_k[1], kv_type == DType::kF16 ? 1e-3 : 1e-5, what + " k");
  EXPECT_EQ(got_v[0], got_v[1]) << what;
  EXPECT_EQ(bits_v[0], bits_v[1]) << what;
}

// F16: kv_store and kv_copy must give the CPU's bits exactly (same rounding); kv_rerotate rounds
// a float rotation, where the two backends' float results may differ by an ulp, so 1e-3.
TEST(CudaKv, StoreCopyRerotate) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(13);
  for (DType t : kKvTypes) check_kv_moves(rng, t);
}

TEST(CudaKv, RopeStoreFusionWritesF16Rows) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(15);
  check_rope_store(rng, DType::kF16);
  check_rope_store(rng, DType::kF32);
}

}  // namespace
}  // namespace cera::ops::test
