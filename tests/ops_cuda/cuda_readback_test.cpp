// Backend::download_async on CUDA, and the device-fed decode chain it exists for: readbacks
// queued behind device work see exactly the bytes of their point in the stream, however many are
// outstanding (more than the pinned ring's slots) and in whatever order they are waited for; and a
// chain in which each step embeds the id the previous step's top_k wrote (embed_ids), queued one
// step ahead of the host as the engine loop's overlapped decode does, follows a known successor function
// with graphs (steps alternating between the staging arena's halves) and without.
#include <cmath>

#include "cuda_test_util.h"
#include "ops/cuda/cuda_backend.h"

namespace cera::ops::test {
namespace {

TEST(CudaReadback, AsyncReadbacksSeeTheirPointInTheStream) {
  CERA_SKIP_WITHOUT_CUDA();
  Backend& cuda = *backends().cuda;
  const int64_t n = 8;
  Tensor x = make_tensor(cuda, {n, 1, 1, 1}, std::vector<float>(size_t(n), 1.0f));
  // A readback larger than a pinned slot (synchronous fallback) in the middle.
  const int64_t big = 5000;
  Tensor y = make_tensor(cuda, {big, 1, 1, 1}, std::vector<float>(size_t(big), 3.0f));
  constexpr int kReads = 11;
  std::vector<std::vector<float>> got(kReads, std::vector<float>(size_t(n), -1.0f));
  std::vector<float> big_got(size_t(big), -1.0f);
  Readback r[kReads], big_r;
  for (int i = 0; i < kReads; ++i) {
    cuda.scale(x.view, 2.0f);  // logged verb: download_async launches it first
    r[i] = cuda.download_async(got[size_t(i)].data(), x.view);
    if (i == 5) big_r = cuda.download_async(big_got.data(), y.view);
  }
  EXPECT_TRUE(cuda.overlaps_host());
  cuda.wait(big_r);
  EXPECT_EQ(big_got, std::vector<float>(size_t(big), 3.0f));
  for (int i = kReads - 1; i >= 0; --i) {  // out of order, the oldest long finished by slot reuse
    cuda.wait(r[i]);
    EXPECT_EQ(got[size_t(i)], std::vector<float>(size_t(n), std::ldexp(1.0f, i + 1))) << "readback " << i;
  }
}

// The next id of the chain: row r of the table peaks at successor(r).
int32_t successor(int32_t r, int32_t n_vocab) { return (r * 7 + 3) % n_vocab; }

// Steps of the chain, each one step ahead of the host: step s embeds ids[s % 2] (device), takes
// its top_k into ids[(s + 1) % 2] and reads that back asynchronously; a staged host array (an
// embed of host ids) rides along, as positions and slots do in a real step. The host waits for
// step s - 1 only after queuing step s.
void run_chain(Backend& cuda, int steps) {
  const int32_t n_vocab = 97;
  std::mt19937 rng(5);
  std::vector<float> table = random_floats(rng, size_t(n_vocab) * n_vocab);
  for (int32_t r = 0; r < n_vocab; ++r) table[size_t(r) * n_vocab + successor(r, n_vocab)] = 5.0f;
  Tensor t = make_tensor(cuda, {n_vocab, n_vocab, 1, 1}, table);
  Tensor rows = make_tensor(cuda, {n_vocab, 2, 1, 1}, std::vector<float>(size_t(2 * n_vocab)));
  Tensor side = make_tensor(cuda, {n_vocab, 2, 1, 1}, std::vector<float>(size_t(2 * n_vocab)));
  auto pick_buf = cuda.allocate(2 * 3 * 4);  // per slot: id, value, lse
  ASSERT_TRUE(pick_buf.ok());
  auto slot = [&](int i, int word, DType d) {
    return make_view((*pick_buf)->data() + (3 * i + word) * 4, d, {1, 1, 1, 1}, Device::kCuda);
  };
  auto row = [&](Tensor& b, int i) {
    return make_view(b.buffer->data() + i * n_vocab * 4, DType::kF32, {n_vocab, 1, 1, 1}, Device::kCuda);
  };
  const int32_t first = 11;
  cuda.upload(slot(0, 0, DType::kI32), &first);
  const auto n_steps = static_cast<size_t>(steps);
  const auto row_floats = static_cast<size_t>(n_vocab);
  std::vector<int32_t> got(n_steps, -1);
  std::vector<std::vector<float>> side_got(n_steps, std::vector<float>(row_floats));
  std::vector<Readback> r(n_steps), side_r(n_steps);
  std::vector<int32_t> host_ids(n_steps);
  auto check = [&](int s, int32_t want) {
    cuda.wait(r[size_t(s)]);
    cuda.wait(side_r[size_t(s)]);
    EXPECT_EQ(got[size_t(s)], want) << "step " << s;
    const int32_t h = host_ids[size_t(s)];
    const std::vector<float> want_row(table.begin() + h * n_vocab, table.begin() + (h + 1) * n_vocab);
    EXPECT_EQ(side_got[size_t(s)], want_row) << "step " << s;
  };
  int32_t id = first;
  for (int s = 0; s < steps; ++s) {
    const int cur = s % 2, next = cur ^ 1;
    host_ids[size_t(s)] = (s * 13 + 1) % n_vocab;
    cuda.embed(row(side, cur), t.view, std::span(&host_ids[size_t(s)], 1), 1.0f);
    cuda.embed_ids(row(rows, cur), t.view, slot(cur, 0, DType::kI32), 1.0f);
    cuda.top_k(slot(next, 0, DType::kI32), slot(next, 1, DType::kF32), slot(next, 2, DType::kF32), row(rows, cur),
               {.k = 1});
    r[size_t(s)] = cuda.download_async(&got[size_t(s)], slot(next, 0, DType::kI32));
    side_r[size_t(s)] = cuda.download_async(side_got[size_t(s)].data(), row(side, cur));
    if (s > 0) {
      check(s - 1, id = successor(id, n_vocab));
    }
  }
  check(steps - 1, successor(id, n_vocab));
}

TEST(CudaReadback, DeviceFedChainOneStepAhead) {
  CERA_SKIP_WITHOUT_CUDA();
  for (const bool graphs : {true, false}) {
    auto cuda = make_cuda_backend({.graphs = graphs});
    ASSERT_TRUE(cuda.ok()) << cuda.status().to_string();
    SCOPED_TRACE(graphs ? "graphs" : "eager");
    run_chain(**cuda, 40);
  }
}

}  // namespace
}  // namespace cera::ops::test
