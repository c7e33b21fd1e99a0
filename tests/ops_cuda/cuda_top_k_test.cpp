// Backend::top_k on CUDA against the host selection (ops/top_k.h) over vocabulary sizes that
// take one to four reduction rounds, k from 1 (argmax path) to the maximum, ties, softcap, and
// several rows. Without softcap ids and values must be identical (the selection is exact); the
// log-sum-exp is float32 work in a different order: 1e-5 relative. With softcap, tanhf on the
// device and std::tanh on the host may differ in the last bit, so ranks are compared by value.
#include <cmath>

#include "cuda_test_util.h"
#include "ops/top_k.h"

namespace cera::ops::test {
namespace {

struct DeviceOut {
  std::unique_ptr<Buffer> buffer;
  TensorView ids, values, lse;
};

DeviceOut make_out(Backend& b, int32_t k, int64_t rows) {
  DeviceOut o;
  auto buffer = b.allocate(uint64_t(2 * k + 1) * uint64_t(rows) * 4);
  EXPECT_TRUE(buffer.ok());
  o.buffer = std::move(buffer).value();
  std::byte* p = o.buffer->data();
  o.ids = make_view(p, DType::kI32, {k, rows, 1, 1}, b.device());
  o.values = make_view(p + 4 * k * rows, DType::kF32, {k, rows, 1, 1}, b.device());
  o.lse = make_view(p + 8 * k * rows, DType::kF32, {1, rows, 1, 1}, b.device());
  return o;
}

TEST(CudaTopK, MatchesTheHostSelection) {
  CERA_SKIP_WITHOUT_CUDA();
  Backend& cuda = *backends().cuda;
  std::mt19937 rng(11);
  const std::vector<int64_t> sizes = quick_sweep() ? std::vector<int64_t>{7, 2049, 32000}
                                                   : std::vector<int64_t>{1, 7, 2048, 2049, 32000, 151936, 262144};
  for (int64_t n : sizes) {
    for (int32_t k : {1, 2, 40, 256}) {
      if (k > n) continue;
      for (const bool ties : {false, true}) {
        for (const float softcap : {0.0f, 30.0f}) {
          const int64_t rows = n > 100000 ? 1 : 3;
          std::normal_distribution<float> d(0.0f, 4.0f);
          std::vector<float> logits(size_t(n * rows));
          for (float& x : logits) x = ties ? std::round(d(rng) / 4.0f) : d(rng);
          Tensor in = make_tensor(cuda, {n, rows, 1, 1}, logits);
          DeviceOut out = make_out(cuda, k, rows);
          poison(cuda, out.values);
          cuda.top_k(out.ids, out.values, out.lse, in.view, {.k = k, .softcap = softcap});
          std::vector<int32_t> ids(size_t(k * rows));
          cuda.download(ids.data(), out.ids);
          const std::vector<float> values = read_tensor(cuda, out.values), lse = read_tensor(cuda, out.lse);
          for (int64_t r = 0; r < rows; ++r) {
            std::vector<int32_t> want_ids(static_cast<size_t>(k));
            std::vector<float> want_values(static_cast<size_t>(k));
            const float want_lse = select_top_k(std::span(logits).subspan(size_t(r * n), size_t(n)),
                                                {.k = k, .softcap = softcap}, want_ids, want_values);
            const std::string what = "n=" + std::to_string(n) + " k=" + std::to_string(k) + " ties=" +
                                     std::to_string(ties) + " softcap=" + std::to_string(softcap) + " row " +
                                     std::to_string(r);
            for (int32_t j = 0; j < k; ++j) {
              const int32_t id = ids[size_t(r * k + j)];
              const float v = values[size_t(r * k + j)];
              if (softcap == 0.0f) {
                ASSERT_EQ(id, want_ids[j]) << what << " rank " << j;
                ASSERT_EQ(v, want_values[j]) << what << " rank " << j;
              } else {
                ASSERT_TRUE(id >= 0 && id < n) << what;
                ASSERT_NEAR(v, want_values[j], 1e-5f) << what << " rank " << j;
                ASSERT_NEAR(softcap * std::tanh(logits[size_t(r * n + id)] / softcap), want_values[j], 1e-5f)
                    << what << " rank " << j;
              }
            }
            EXPECT_NEAR(lse[size_t(r)], want_lse, 1e-5 * std::max(1.0f, std::fabs(want_lse))) << what;
          }
        }
      }
    }
  }
}

// Backend::mask_logits on CUDA: the masked rows hold -inf exactly where their bits are clear and
// their logits elsewhere, the other rows are untouched; top_k of masked rows (softcap too) then
// equals the host selection over the host-masked logits (-inf stays -inf under the softcap).
TEST(CudaMaskLogits, ForbidsExactlyTheClearedBits) {
  CERA_SKIP_WITHOUT_CUDA();
  Backend& cuda = *backends().cuda;
  std::mt19937 rng(12);
  for (int64_t n : {int64_t{33}, int64_t{2049}, int64_t{49152}, int64_t{262145}}) {
    const int64_t rows = 5;
    const size_t n_words = size_t((n + 31) / 32);
    std::normal_distribution<float> d(0.0f, 4.0f);
    std::vector<float> logits(size_t(n * rows));
    for (float& x : logits) x = d(rng);
    const std::vector<int32_t> masked_rows = {4, 1, 3};
    std::vector<uint32_t> masks(masked_rows.size() * n_words);
    for (size_t i = 0; i < masks.size(); ++i) {
      // Mostly empty words with a few bits, some full words, as grammar masks are.
      const uint32_t kind = rng() % 8;
      masks[i] = kind == 0 ? ~0u : kind < 3 ? uint32_t(rng()) & uint32_t(rng()) : 0u;
    }
    for (size_t i = 0; i < masked_rows.size(); ++i) masks[i * n_words] |= 1u;  // never an empty row
    Tensor in = make_tensor(cuda, {n, rows, 1, 1}, logits);
    cuda.mask_logits(in.view, masks, masked_rows);
    std::vector<float> want = logits;
    for (size_t i = 0; i < masked_rows.size(); ++i) {
      for (int64_t id = 0; id < n; ++id) {
        if (((masks[i * n_words + size_t(id >> 5)] >> (id & 31)) & 1u) == 0) {
          want[size_t(masked_rows[i] * n + id)] = -INFINITY;
        }
      }
    }
    const std::vector<float> got = read_tensor(cuda, in.view);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "n=" << n << " element " << i;
    for (const float softcap : {0.0f, 30.0f}) {
      const int32_t k = static_cast<int32_t>(std::min<int64_t>(40, n));
      DeviceOut out = make_out(cuda, k, rows);
      cuda.top_k(out.ids, out.values, out.lse, in.view, {.k = k, .softcap = softcap});
      std::vector<int32_t> ids(size_t(k * rows));
      cuda.download(ids.data(), out.ids);
      const std::vector<float> values = read_tensor(cuda, out.values), lse = read_tensor(cuda, out.lse);
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<int32_t> want_ids(static_cast<size_t>(k));
        std::vector<float> want_values(static_cast<size_t>(k));
        const float want_lse = select_top_k(std::span(want).subspan(size_t(r * n), size_t(n)),
                                            {.k = k, .softcap = softcap}, want_ids, want_values);
        const std::string what = "n=" + std::to_string(n) + " softcap=" + std::to_string(softcap) + " row " +
                                 std::to_string(r);
        for (int32_t j = 0; j < k; ++j) {
          if (std::isinf(want_values[j])) {
            ASSERT_TRUE(std::isinf(values[size_t(r * k + j)]) && values[size_t(r * k + j)] < 0) << what << " rank " << j;
            continue;
          }
          if (softcap == 0.0f) {
            ASSERT_EQ(ids[size_t(r * k + j)], want_ids[j]) << what << " rank " << j;
          }
          ASSERT_NEAR(values[size_t(r * k + j)], want_values[j], 1e-5f) << what << " rank " << j;
        }
        EXPECT_NEAR(lse[size_t(r)], want_lse, 1e-5 * std::max(1.0f, std::fabs(want_lse))) << what;
      }
    }
  }
}

}  // namespace
}  // namespace cera::ops::test
