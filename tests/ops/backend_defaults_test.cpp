// The default bodies of Backend's device-id verbs on the CPU backend (the overlapped decode of
// the engine loop uses them): embed_ids equals embed of the same ids read on the host, and
// download_async has the bytes by wait(), several outstanding, waited out of order.
#include <gtest/gtest.h>

#include <vector>

#include "ops/cpu/cpu_backend.h"

namespace cera::ops {
namespace {

TEST(BackendDefaults, EmbedIdsAndDownloadAsync) {
  auto cpu = make_cpu_backend({.n_threads = 1});
  const int64_t n_embd = 7, n_vocab = 11;
  std::vector<float> table(n_embd * n_vocab);
  for (size_t i = 0; i < table.size(); ++i) table[i] = 0.25f * float(i % 13) - 1.0f + 0.01f * float(i);
  const TensorView t = make_view(table.data(), DType::kF32, {n_embd, n_vocab, 1, 1}, Device::kCpu);
  std::vector<int32_t> ids = {3, 10, 0, 3};
  const TensorView idv = make_view(ids.data(), DType::kI32, {4, 1, 1, 1}, Device::kCpu);
  std::vector<float> a(n_embd * 4, -7.0f), b(n_embd * 4, 9.0f);
  cpu->embed(make_view(a.data(), DType::kF32, {n_embd, 4, 1, 1}, Device::kCpu), t, ids, 0.5f);
  cpu->embed_ids(make_view(b.data(), DType::kF32, {n_embd, 4, 1, 1}, Device::kCpu), t, idv, 0.5f);
  EXPECT_EQ(a, b);
  for (int64_t j = 0; j < n_embd; ++j) EXPECT_EQ(b[n_embd + j], 0.5f * table[10 * n_embd + j]);

  int32_t got[3] = {-1, -1, -1};
  Readback r[3];
  for (int i = 0; i < 3; ++i) r[i] = cpu->download_async(&got[i], make_view(&ids[i], DType::kI32, {1, 1, 1, 1}, Device::kCpu));
  EXPECT_FALSE(cpu->overlaps_host());
  for (int i : {2, 0, 1}) {
    cpu->wait(r[i]);
    EXPECT_EQ(got[i], ids[i]);
  }
}

}  // namespace
}  // namespace cera::ops
