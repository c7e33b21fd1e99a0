// The NCCL collectives (ops/cuda/nccl_collective.h) on the one GPU a machine may have: a group of
// one rank, whose all-reduce is the identity and whose gather is a copy, queued among ordinary
// verbs, recorded into the backend's graphs and replayed (the second step relaunches the cached
// graph); the results must be exactly the inputs. What this cannot show is the transport between
// GPUs (two ranks need two devices). A GPU named twice is refused, naming it.
#include "cuda_test_util.h"
#include "ops/cuda/nccl_collective.h"

namespace cera::ops::test {
namespace {

TEST(CudaNccl, OneRankCollectivesRunInOrderInsideTheGraphs) {
  CERA_SKIP_WITHOUT_CUDA();
  Backend& cuda = *backends().cuda;
  Backend* ranks[] = {&cuda};
  const int32_t devices[] = {0};
  auto group = make_nccl_group(ranks, devices);
  ASSERT_TRUE(group.ok()) << group.status().to_string();
  Collective& c = (*group)->rank(0);
  EXPECT_EQ(c.n_ranks(), 1);
  std::vector<float> xs(37), parts(3 * 4);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = 0.25f * float(i) - 3.0f;
  for (size_t i = 0; i < parts.size(); ++i) parts[i] = float(i * i) + 0.5f;
  Tensor x = make_tensor(cuda, {37, 1, 1, 1}, xs);
  Tensor part = make_tensor(cuda, {3, 4, 1, 1}, parts);
  Tensor whole = make_tensor(cuda, {3, 4, 1, 1}, std::vector<float>(parts.size(), -1.0f));
  for (int step = 0; step < 3; ++step) {  // the later steps replay the cached graph
    cuda.scale(x.view, 2.0f);
    c.all_reduce_sum(x.view);
    cuda.scale(x.view, 0.5f);
    c.all_gather_cols(part.view, whole.view);
    cuda.scale(whole.view, 3.0f);
    std::vector<float> got_x(xs.size()), got_whole(parts.size());
    cuda.download(got_x.data(), x.view);
    cuda.download(got_whole.data(), whole.view);
    EXPECT_EQ(got_x, xs) << "step " << step;  // x * 2, summed over one rank, / 2: exact
    for (size_t i = 0; i < parts.size(); ++i)
      EXPECT_EQ(got_whole[i], 3.0f * parts[i]) << "step " << step << " " << i;
  }
}

TEST(CudaNccl, AGpuNamedTwiceIsRefused) {
  CERA_SKIP_WITHOUT_CUDA();
  Backend& cuda = *backends().cuda;
  Backend* ranks[] = {&cuda, &cuda};
  const int32_t devices[] = {0, 0};
  auto group = make_nccl_group(ranks, devices);
  ASSERT_FALSE(group.ok());
  EXPECT_NE(group.status().message().find("both on CUDA device 0"), std::string::npos)
      << group.status().message();
}

}  // namespace
}  // namespace cera::ops::test
