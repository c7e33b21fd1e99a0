// The paged-KV verbs of the CPU backend: kv_store, attention, kv_copy, kv_rerotate. Attention runs
// several sequences of different lengths in one batch (prefill chunks and decode tokens mixed),
// block tables out of order, GQA ratios 1/2/4, sliding window and softcap, against a naive
// double-precision softmax(q·Kᵀ)·V; tolerance 1e-5 (+1e-5 relative) on unit-range values. Every
// test runs with F32 and F16 cache rows; the F16 reference reads the same fp16-rounded K/V, so the
// tolerance stays the same (only the summation order differs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/half.h"
#include "cpu_test_util.h"

namespace cera::ops::test {
namespace {

// A cache of F32 or F16 rows. For F16 the rows live in kh/vh and k/v are kept as their float
// values (sync_from_half after the backend wrote, set_values before it reads).
struct Cache {
  DType dtype = DType::kF32;
  int32_t block_size = 16;
  int64_t width = 0;  // n_head_kv * head_dim
  int64_t n_slots = 0;
  std::vector<float> k, v;
  std::vector<uint16_t> kh, vh;
  KvLayer layer() {
    if (dtype == DType::kF16) {
      return {make_view(kh.data(), DType::kF16, {width, n_slots, 1, 1}),
              make_view(vh.data(), DType::kF16, {width, n_slots, 1, 1}), block_size};
    }
    return {make_view(k.data(), DType::kF32, {width, n_slots, 1, 1}),
            make_view(v.data(), DType::kF32, {width, n_slots, 1, 1}), block_size};
  }
  // Sets the contents (rounded to fp16 for an F16 cache, so k/v hold what the backend reads).
  void set_values(std::vector<float> k0, std::vector<float> v0) {
    k = std::move(k0);
    v = std::move(v0);
    if (dtype != DType::kF16) return;
    kh.resize(k.size());
    vh.resize(v.size());
    for (size_t i = 0; i < k.size(); ++i) k[i] = half_to_float(kh[i] = float_to_half(k[i]));
    for (size_t i = 0; i < v.size(); ++i) v[i] = half_to_float(vh[i] = float_to_half(v[i]));
  }
  void sync_from_half() {
    if (dtype != DType::kF16) return;
    for (size_t i = 0; i < k.size(); ++i) k[i] = half_to_float(kh[i]);
    for (size_t i = 0; i < v.size(); ++i) v[i] = half_to_float(vh[i]);
  }
};

const char* dtype_label(DType t) { return t == DType::kF16 ? "F16" : "F32"; }

struct Case {
  int32_t n_head, n_head_kv, head_dim, window;
  float softcap;
};

void run_attention_case(const Case& c, DType kv_type, std::mt19937& rng) {
  const std::vector<int32_t> seq_len = {1, 40, 7, 19};  // entries stored per sequence
  const std::vector<int32_t> n_query = {1, 9, 7, 1};    // last tokens of each queried now
  Cache cache;
  cache.dtype = kv_type;
  cache.width = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
  std::vector<int32_t> table_offset = {0};
  int32_t n_blocks = 0;
  for (int32_t len : seq_len) {
    n_blocks += (len + cache.block_size - 1) / cache.block_size;
    table_offset.push_back(n_blocks);
  }
  n_blocks += 3;  // spare blocks nobody uses
  cache.n_slots = static_cast<int64_t>(n_blocks) * cache.block_size;
  cache.set_values(random_floats(rng, static_cast<size_t>(cache.width * cache.n_slots)),
                   random_floats(rng, static_cast<size_t>(cache.width * cache.n_slots)));
  std::vector<int32_t> perm(static_cast<size_t>(n_blocks));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);  // block tables out of order
  std::vector<int32_t> tables(perm.begin(), perm.begin() + table_offset.back());

  std::vector<int32_t> positions, token_seq;
  for (size_t j = 0; j < seq_len.size(); ++j) {
    for (int32_t i = seq_len[j] - n_query[j]; i < seq_len[j]; ++i) {
      positions.push_back(i);
      token_seq.push_back(static_cast<int32_t>(j));
    }
  }
  const auto n_tok = static_cast<int64_t>(positions.size());
  const int64_t q_width = static_cast<int64_t>(c.n_head) * c.head_dim;
  const std::vector<float> q = random_floats(rng, static_cast<size_t>(q_width * n_tok), -2, 2);
  AttentionParams params{.n_head = c.n_head, .n_head_kv = c.n_head_kv, .head_dim = c.head_dim,
                         .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                         .softcap = c.softcap, .sliding_window = c.window};
  AttentionBatch batch{positions, token_seq, tables, table_offset};

  // Reference.
  std::vector<double> ref(static_cast<size_t>(q_width * n_tok));
  const int32_t group = c.n_head / c.n_head_kv;
  for (int64_t t = 0; t < n_tok; ++t) {
    const int32_t pos = positions[static_cast<size_t>(t)];
    const int32_t seq = token_seq[static_cast<size_t>(t)];
    const int32_t first = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
    for (int32_t h = 0; h < c.n_head; ++h) {
      const int32_t kvh = h / group;
      const float* qh = q.data() + t * q_width + static_cast<int64_t>(h) * c.head_dim;
      std::vector<double> s;
      std::vector<const float*> vrows;
      for (int32_t e = first; e <= pos; ++e) {
        const int64_t slot = static_cast<int64_t>(tables[static_cast<size_t>(table_offset[seq] + e / cache.block_size)]) *
                                 cache.block_size + e % cache.block_size;
        const float* kr = cache.k.data() + slot * cache.width + static_cast<int64_t>(kvh) * c.head_dim;
        double dot = 0;
        for (int32_t i = 0; i < c.head_dim; ++i) dot += double(qh[i]) * kr[i];
        dot *= params.scale;
        if (c.softcap > 0) dot = c.softcap * std::tanh(dot / c.softcap);
        s.push_back(dot);
        vrows.push_back(cache.v.data() + slot * cache.width + static_cast<int64_t>(kvh) * c.head_dim);
      }
      const double mx = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int32_t i = 0; i < c.head_dim; ++i) {
        double o = 0;
        for (size_t j = 0; j < s.size(); ++j) o += s[j] * vrows[j][i];
        ref[static_cast<size_t>(t * q_width + static_cast<int64_t>(h) * c.head_dim + i)] = o / sum;
      }
    }
  }

  for (IsaBackend& ib : all_backends()) {
    for (bool per_token_layout : {false, true}) {  // [head_dim, n_head, n_tok] and [n_head*head_dim, n_tok]
      std::vector<float> out(ref.size(), nan_value());
      const std::array<int64_t, 4> shape =
          per_token_layout ? std::array<int64_t, 4>{q_width, n_tok, 1, 1}
                           : std::array<int64_t, 4>{c.head_dim, c.n_head, n_tok, 1};
      ib.backend->attention(make_view(out.data(), DType::kF32, shape),
                            make_view(const_cast<float*>(q.data()), DType::kF32, shape), cache.layer(),
                            batch, params);
      for (size_t i = 0; i < ref.size(); ++i) {
        ASSERT_NEAR(out[i], ref[i], 1e-5 + 1e-5 * std::fabs(ref[i]))
            << cpu_isa_name(ib.isa) << " " << dtype_label(kv_type) << " heads " << c.n_head << "/" << c.n_head_kv << " dim "
            << c.head_dim << " window " << c.window << " softcap " << c.softcap << " at " << i;
      }
    }
  }
}

TEST(AttentionTest, PagedBatchGqaWindowSoftcap) {
  std::mt19937 rng(11);
  std::vector<Case> cases = {{2, 2, 64, 0, 0.0f},  {4, 2, 64, 0, 0.0f},   {8, 2, 32, 0, 0.0f},
                             {4, 1, 80, 0, 0.0f},  {4, 2, 64, 8, 0.0f},   {8, 2, 128, 5, 0.0f},
                             {4, 4, 48, 0, 0.5f},  {32, 2, 16, 0, 0.0f}};  // group 16 > kAttnGroup
  for (DType kv_type : {DType::kF32, DType::kF16}) {
    for (const Case& c : cases) run_attention_case(c, kv_type, rng);
  }
}

// Long contexts in fp16 (the accumulation runs over hundreds of rows), one decode token per sequence.
TEST(AttentionTest, F16LongContext) {
  std::mt19937 rng(15);
  const int32_t n_head = 8, n_head_kv = 2, head_dim = 128, len = 700;
  Cache cache;
  cache.dtype = DType::kF16;
  cache.width = int64_t{n_head_kv} * head_dim;
  const int32_t n_blocks = (len + cache.block_size - 1) / cache.block_size;
  cache.n_slots = int64_t{n_blocks} * cache.block_size;
  cache.set_values(random_floats(rng, static_cast<size_t>(cache.width * cache.n_slots), -3, 3),
                   random_floats(rng, static_cast<size_t>(cache.width * cache.n_slots)));
  std::vector<int32_t> tables(static_cast<size_t>(n_blocks));
  std::iota(tables.rbegin(), tables.rend(), 0);  // reversed
  const std::vector<int32_t> positions = {len - 1}, token_seq = {0}, offsets = {0, n_blocks};
  const std::vector<float> q = random_floats(rng, static_cast<size_t>(n_head * head_dim), -1, 1);
  const AttentionParams params{.n_head = n_head,
                               .n_head_kv = n_head_kv,
                               .head_dim = head_dim,
                               .scale = 1.0f / std::sqrt(float(head_dim))};
  std::vector<double> ref(q.size());
  for (int32_t h = 0; h < n_head; ++h) {
    const int64_t off = int64_t{h / (n_head / n_head_kv)} * head_dim;
    std::vector<double> s(static_cast<size_t>(len));
    for (int32_t e = 0; e < len; ++e) {
      const int64_t slot =
          int64_t{tables[static_cast<size_t>(e / cache.block_size)]} * cache.block_size +
          e % cache.block_size;
      double dot = 0;
      for (int32_t i = 0; i < head_dim; ++i) {
        dot += double(q[static_cast<size_t>(h * head_dim + i)]) *
               cache.k[static_cast<size_t>(slot * cache.width + off + i)];
      }
      s[static_cast<size_t>(e)] = dot * params.scale;
    }
    const double mx = *std::max_element(s.begin(), s.end());
    double sum = 0;
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (int32_t e = 0; e < len; ++e) {
      const int64_t slot =
          int64_t{tables[static_cast<size_t>(e / cache.block_size)]} * cache.block_size +
          e % cache.block_size;
      for (int32_t i = 0; i < head_dim; ++i) {
        ref[static_cast<size_t>(h * head_dim + i)] +=
            s[static_cast<size_t>(e)] / sum *
            cache.v[static_cast<size_t>(slot * cache.width + off + i)];
      }
    }
  }
  for (IsaBackend& ib : all_backends()) {
    std::vector<float> out(q.size(), nan_value());
    ib.backend->attention(
        make_view(out.data(), DType::kF32, {head_dim, n_head, 1, 1}),
        make_view(const_cast<float*>(q.data()), DType::kF32, {head_dim, n_head, 1, 1}),
        cache.layer(), AttentionBatch{positions, token_seq, tables, offsets}, params);
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_NEAR(out[i], ref[i], 1e-5 + 1e-5 * std::fabs(ref[i]))
          << cpu_isa_name(ib.isa) << " at " << i;
    }
  }
}

TEST(AttentionTest, RejectsMixedOrUnsupportedCacheTypes) {
  std::vector<float> kf(64 * 16, 0.5f), q(64, 0.5f), out(64);
  std::vector<uint16_t> vh(64 * 16, float_to_half(0.5f));
  std::vector<std::byte> vq(64 * 16);
  const std::vector<int32_t> positions = {0}, token_seq = {0}, tables = {0}, offsets = {0, 1};
  const AttentionParams params{.n_head = 1, .n_head_kv = 1, .head_dim = 64, .scale = 0.125f};
  const AttentionBatch batch{positions, token_seq, tables, offsets};
  const KvLayer mixed{make_view(kf.data(), DType::kF32, {64, 16, 1, 1}),
                      make_view(vh.data(), DType::kF16, {64, 16, 1, 1}), 16};
  const KvLayer bf16{make_view(vh.data(), DType::kBF16, {64, 16, 1, 1}),
                     make_view(vh.data(), DType::kBF16, {64, 16, 1, 1}), 16};
  for (IsaBackend& ib : all_backends()) {
    const TensorView qv = make_view(q.data(), DType::kF32, {64, 1, 1, 1});
    const TensorView ov = make_view(out.data(), DType::kF32, {64, 1, 1, 1});
    for (const KvLayer& layer : {mixed, bf16}) {
      EXPECT_THROW(ib.backend->attention(ov, qv, layer, batch, params), CheckFailure);
      EXPECT_THROW(ib.backend->kv_store(layer, qv, qv, std::vector<int32_t>{0}), CheckFailure);
      EXPECT_THROW(ib.backend->kv_copy(layer, std::vector<int32_t>{0}, std::vector<int32_t>{1}),
                   CheckFailure);
    }
  }
}

// F16 rows must equal float_to_half of the input bit for bit on every ISA level (F16C rounds like
// the reference); 37 values per row leave a tail after the 8- and 16-lane conversions.
TEST(KvStoreTest, WritesOnlyTheGivenSlots) {
  std::mt19937 rng(12);
  for (DType kv_type : {DType::kF32, DType::kF16}) {
    Cache cache;
    cache.dtype = kv_type;
    cache.width = 2 * 37;
    cache.n_slots = 40;
    const std::vector<int32_t> slots = {33, 0, 17, 5};
    std::vector<float> k = random_floats(rng, static_cast<size_t>(cache.width * 4), -70000, 70000);
    const std::vector<float> v =
        random_floats(rng, static_cast<size_t>(cache.width * 4), -1e-5f, 1e-5f);
    for (size_t i = 0; i < k.size(); i += 5) k[i] *= 1e-3f;  // normal halves too, not only overflow
    for (IsaBackend& ib : all_backends()) {
      cache.set_values(
          std::vector<float>(static_cast<size_t>(cache.width * cache.n_slots), nan_value()),
          std::vector<float>(static_cast<size_t>(cache.width * cache.n_slots), nan_value()));
      ib.backend->kv_store(
          cache.layer(),
          make_view(const_cast<float*>(k.data()), DType::kF32, {cache.width, 4, 1, 1}),
          make_view(const_cast<float*>(v.data()), DType::kF32, {cache.width, 4, 1, 1}), slots);
      cache.sync_from_half();
      const auto stored = [&](float x) {
        return kv_type == DType::kF16 ? half_to_float(float_to_half(x)) : x;
      };
      for (int64_t s = 0; s < cache.n_slots; ++s) {
        const auto it = std::find(slots.begin(), slots.end(), s);
        for (int64_t i = 0; i < cache.width; ++i) {
          const float gk = cache.k[static_cast<size_t>(s * cache.width + i)];
          const float gv = cache.v[static_cast<size_t>(s * cache.width + i)];
          if (it == slots.end()) {
            ASSERT_TRUE(is_nan(gk) && is_nan(gv)) << "slot " << s << " written";
          } else {
            const auto t = static_cast<int64_t>(it - slots.begin());
            ASSERT_EQ(gk, stored(k[static_cast<size_t>(t * cache.width + i)]))
                << cpu_isa_name(ib.isa) << " " << dtype_label(kv_type);
            ASSERT_EQ(gv, stored(v[static_cast<size_t>(t * cache.width + i)]))
                << cpu_isa_name(ib.isa) << " " << dtype_label(kv_type);
          }
        }
      }
    }
  }
}

TEST(KvCopyTest, CopiesRows) {
  std::mt19937 rng(13);
  for (DType kv_type : {DType::kF32, DType::kF16}) {
    Cache cache;
    cache.dtype = kv_type;
    cache.width = 32;
    cache.n_slots = 20;
    cache.set_values(random_floats(rng, static_cast<size_t>(cache.width * cache.n_slots)),
                     random_floats(rng, static_cast<size_t>(cache.width * cache.n_slots)));
    const std::vector<float> k0 = cache.k, v0 = cache.v;
    const std::vector<uint16_t> kh0 = cache.kh, vh0 = cache.vh;
    const std::vector<int32_t> src = {1, 2, 3, 19}, dst = {10, 11, 12, 0};
    for (IsaBackend& ib : all_backends()) {
      cache.k = k0;
      cache.v = v0;
      cache.kh = kh0;
      cache.vh = vh0;
      ib.backend->kv_copy(cache.layer(), src, dst);
      cache.sync_from_half();
      for (int64_t s = 0; s < cache.n_slots; ++s) {
        const auto it = std::find(dst.begin(), dst.end(), s);
        const int64_t from = it == dst.end() ? s : src[static_cast<size_t>(it - dst.begin())];
        for (int64_t i = 0; i < cache.width; ++i) {
          ASSERT_EQ(cache.k[static_cast<size_t>(s * cache.width + i)],
                    k0[static_cast<size_t>(from * cache.width + i)]);
          ASSERT_EQ(cache.v[static_cast<size_t>(s * cache.width + i)],
                    v0[static_cast<size_t>(from * cache.width + i)]);
        }
      }
    }
  }
}

// F16: the stored K is rounded once on store and once after the rotation, so the bound is two
// half-ulps of values below 2 in magnitude (2^-10 each) instead of 1e-5.
TEST(KvRerotateTest, EqualsFreshRopeAtTheNewPosition) {
  std::mt19937 rng(14);
  const int32_t head_dim = 64, n_head_kv = 2;
  const int64_t width = head_dim * n_head_kv;
  const std::vector<float> factors = random_floats(rng, 32, 1.0f, 4.0f);
  const std::vector<int32_t> slots = {4, 9, 2};
  const std::vector<int32_t> pos = {100, 3000, 7};
  for (DType kv_type : {DType::kF32, DType::kF16}) {
    const double tol = kv_type == DType::kF16 ? 2.0 / 1024 : 1e-5;
    for (RopeKind kind : {RopeKind::kNorm, RopeKind::kNeox}) {
      for (int32_t delta : {-50, 1, 1234}) {
        RopeParams p{.kind = kind,
                     .n_rot = kind == RopeKind::kNorm ? 64 : 48,
                     .freq_base = 10000.0f,
                     .freq_scale = 1.0f,
                     .freq_factors = kind == RopeKind::kNorm ? factors.data() : nullptr};
        const std::vector<float> raw = random_floats(rng, static_cast<size_t>(width * 3));
        for (IsaBackend& ib : all_backends()) {
          Cache cache;
          cache.dtype = kv_type;
          cache.width = width;
          cache.n_slots = 12;
          const std::vector<float> fill =
              random_floats(rng, static_cast<size_t>(width * cache.n_slots));
          cache.set_values(fill, fill);
          std::vector<float> rotated = raw, fresh = raw;
          ib.backend->rope(make_view(rotated.data(), DType::kF32, {head_dim, n_head_kv, 3, 1}), pos,
                           p);
          std::vector<int32_t> moved(pos);
          for (int32_t& m : moved) m += delta;
          ib.backend->rope(make_view(fresh.data(), DType::kF32, {head_dim, n_head_kv, 3, 1}), moved,
                           p);
          ib.backend->kv_store(cache.layer(),
                               make_view(rotated.data(), DType::kF32, {width, 3, 1, 1}),
                               make_view(rotated.data(), DType::kF32, {width, 3, 1, 1}), slots);
          ib.backend->kv_rerotate(cache.layer(), slots, delta, head_dim, p);
          cache.sync_from_half();
          const auto stored = [&](float x) {
            return kv_type == DType::kF16 ? half_to_float(float_to_half(x)) : x;
          };
          for (size_t t = 0; t < slots.size(); ++t) {
            for (int64_t i = 0; i < width; ++i) {
              ASSERT_NEAR(cache.k[static_cast<size_t>(slots[t] * width + i)],
                          fresh[t * width + static_cast<size_t>(i)], tol)
                  << cpu_isa_name(ib.isa) << " " << dtype_label(kv_type) << " delta " << delta
                  << " kind " << int(kind);
              // V rows are never rotated.
              ASSERT_EQ(cache.v[static_cast<size_t>(slots[t] * width + i)],
                        stored(rotated[t * width + static_cast<size_t>(i)]));
            }
            // Rows not listed keep their contents.
            for (int64_t s = 0; s < cache.n_slots; ++s) {
              if (std::find(slots.begin(), slots.end(), s) != slots.end()) continue;
              ASSERT_EQ(cache.k[static_cast<size_t>(s * width)],
                        stored(fill[static_cast<size_t>(s * width)]));
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace cera::ops::test
