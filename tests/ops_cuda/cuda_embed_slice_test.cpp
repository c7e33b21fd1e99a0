// embed_slice on CUDA (the tensor-parallel embedding: a rank's vocabulary rows, zero rows for the
// other ranks' tokens) against the CPU backend's, which is the interface's default body (embed of
// the held tokens, zeros uploaded over the rest): equal bit for bit on an F32 table, outputs
// poisoned first, in a graph and replayed, with tokens of this rank, of the ranks before and after.
#include "cuda_test_util.h"

namespace cera::ops::test {
namespace {

TEST(CudaEmbedSlice, EqualsTheCpuBodyAndZeroesOtherRanksTokens) {
  CERA_SKIP_WITHOUT_CUDA();
  Backend& cuda = *backends().cuda;
  Backend& cpu = *backends().cpu;
  std::mt19937 rng(7);
  const int64_t n_embd = 64, rows = 10, first = 20;  // this rank holds ids 20..29
  const std::vector<float> table = random_floats(rng, size_t(n_embd * rows));
  Tensor t_gpu = make_tensor(cuda, {n_embd, rows, 1, 1}, table);
  Tensor t_cpu = make_tensor(cpu, {n_embd, rows, 1, 1}, table);
  const std::vector<int32_t> tokens = {20, 3, 29, 30, 25, 0, 19, 21, 100};
  const int64_t n = int64_t(tokens.size());
  Tensor out_gpu =
      make_tensor(cuda, {n_embd, n, 1, 1}, std::vector<float>(size_t(n_embd * n), 0.0f));
  Tensor out_cpu =
      make_tensor(cpu, {n_embd, n, 1, 1}, std::vector<float>(size_t(n_embd * n), 0.0f));
  for (int step = 0; step < 3; ++step) {  // the later steps replay the logged graph
    poison(cuda, out_gpu.view);
    poison(cpu, out_cpu.view);
    cuda.embed_slice(out_gpu.view, t_gpu.view, tokens, first, 0.5f);
    cpu.embed_slice(out_cpu.view, t_cpu.view, tokens, first, 0.5f);
    const std::vector<float> got = read_tensor(cuda, out_gpu.view),
                             want = read_tensor(cpu, out_cpu.view);
    ASSERT_EQ(got, want) << "step " << step;
    for (int64_t j = 0; j < n_embd; ++j) {
      EXPECT_EQ(got[size_t(1 * n_embd + j)], 0.0f);        // id 3: another rank's
      EXPECT_EQ(got[size_t(j)], 0.5f * table[size_t(j)]);  // id 20: row 0
      EXPECT_EQ(got[size_t(2 * n_embd + j)], 0.5f * table[size_t(9 * n_embd + j)]);  // id 29: row 9
    }
  }
}

}  // namespace
}  // namespace cera::ops::test
