// Tensor-parallel weight slices (src/model/shard.h) against the unsplit tensor's math: the
// reference is the whole tensor dequantized by quant::dequantize_row and multiplied in double;
// a row-split (kInputs) Linear's rank products must sum to it, a column-split (kOutputs) one's
// outputs must be its rows in order.
#include "model/shard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "format/gguf.h"
#include "model/shard_hparams.h"
#include "model/weights.h"
#include "ops/cpu/cpu_backend.h"
#include "quant/quant.h"
#include "stories_model.h"

namespace cera::model {
namespace {

struct Quantized {
  std::array<int64_t, 4> shape;
  std::vector<std::byte> bytes;
  std::vector<float> dequantized;  // ne[0] * rows floats
};

Quantized make_weight(DType type, std::array<int64_t, 4> shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  const int64_t rows = shape[1] * shape[2] * shape[3];
  const int64_t row_bytes = shape[0] / dtype_block_size(type) * dtype_type_size(type);
  Quantized q{shape, std::vector<std::byte>(static_cast<size_t>(rows * row_bytes)),
              std::vector<float>(static_cast<size_t>(rows * shape[0]))};
  std::vector<float> row(static_cast<size_t>(shape[0]));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = dist(rng);
    if (type == DType::kF32) {  // no quantizer: the floats are the bytes
      std::memcpy(q.bytes.data() + r * row_bytes, row.data(), static_cast<size_t>(row_bytes));
    } else {
      quant::quantize_row(type, row.data(), q.bytes.data() + r * row_bytes, shape[0]);
    }
    quant::dequantize_row(type, q.bytes.data() + r * row_bytes, q.dequantized.data() + r * shape[0],
                          shape[0]);
  }
  return q;
}

std::vector<float> dequantize(DType type, const std::vector<std::byte>& bytes, int64_t ne0,
                              int64_t rows) {
  std::vector<float> out(static_cast<size_t>(ne0 * rows));
  const int64_t row_bytes = ne0 / dtype_block_size(type) * dtype_type_size(type);
  for (int64_t r = 0; r < rows; ++r)
    quant::dequantize_row(type, bytes.data() + r * row_bytes, out.data() + r * ne0, ne0);
  return out;
}

class ShardTypes : public ::testing::TestWithParam<DType> {};

TEST_P(ShardTypes, InputSplitProductsSumToTheUnsplitProduct) {
  const DType type = GetParam();
  const int64_t block = dtype_block_size(type);
  const std::array<int64_t, 4> shape = {block * 8, 12, 1, 1};  // 8 blocks of inputs, 12 outputs
  const Quantized w = make_weight(type, shape, 7);
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(shape[0]));
  for (float& v : x) v = dist(rng);

  for (int n : {2, 4}) {
    std::vector<double> sum(static_cast<size_t>(shape[1]), 0.0);
    for (int r = 0; r < n; ++r) {
      const ShardSpec spec{r, n};
      auto part_shape =
          shard_shape("blk.0.ffn_down.weight", type, shape, ShardSplit::kInputs, {}, spec);
      ASSERT_TRUE(part_shape.ok()) << part_shape.status().message();
      ASSERT_EQ((*part_shape)[0], shape[0] / n);
      auto part =
          shard_bytes("blk.0.ffn_down.weight", type, shape, w.bytes, ShardSplit::kInputs, {}, spec);
      ASSERT_TRUE(part.ok()) << part.status().message();
      const std::vector<float> wp = dequantize(type, *part, shape[0] / n, shape[1]);
      for (int64_t o = 0; o < shape[1]; ++o) {
        for (int64_t i = 0; i < shape[0] / n; ++i) {
          sum[o] += static_cast<double>(wp[o * (shape[0] / n) + i]) * x[r * (shape[0] / n) + i];
        }
      }
    }
    for (int64_t o = 0; o < shape[1]; ++o) {
      double ref = 0;
      for (int64_t i = 0; i < shape[0]; ++i)
        ref += static_cast<double>(w.dequantized[o * shape[0] + i]) * x[i];
      EXPECT_NEAR(sum[o], ref, 1e-9 * (1 + std::abs(ref))) << "N=" << n << " output " << o;
    }
  }
}

TEST_P(ShardTypes, OutputSplitHoldsItsRowsOfEveryMatrix) {
  const DType type = GetParam();
  const std::array<int64_t, 4> shape = {dtype_block_size(type) * 2, 16, 3,
                                        1};  // 3 experts of 16 rows
  const Quantized w = make_weight(type, shape, 5);
  for (int n : {2, 4}) {
    for (int r = 0; r < n; ++r) {
      auto part = shard_bytes("blk.0.ffn_gate_exps.weight", type, shape, w.bytes,
                              ShardSplit::kOutputs, {1, "FFN column"}, ShardSpec{r, n});
      ASSERT_TRUE(part.ok()) << part.status().message();
      const int64_t rows = shape[1] / n;
      const std::vector<float> got = dequantize(type, *part, shape[0], rows * shape[2]);
      for (int64_t e = 0; e < shape[2]; ++e) {
        for (int64_t j = 0; j < rows; ++j) {
          for (int64_t i = 0; i < shape[0]; ++i) {
            ASSERT_EQ(got[(e * rows + j) * shape[0] + i],
                      w.dequantized[(e * shape[1] + r * rows + j) * shape[0] + i])
                << "N=" << n << " rank " << r << " expert " << e << " row " << j;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ShardTypes,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kQ4_0, DType::kQ8_0,
                                           DType::kQ4_K, DType::kQ6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Shard, HeadsThatDoNotDivideAreRefusedNamingTheTensor) {
  // 3 units that must divide evenly (as the vocabulary's rows must) cannot go to 2 ranks.
  auto r = shard_shape("blk.0.attn_k.weight", DType::kF16, {576, 192, 1, 1}, ShardSplit::kOutputs,
                       {64, "KV head"}, ShardSpec{0, 2});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("blk.0.attn_k.weight"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("3 KV heads"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("2 tensor-parallel ranks"), std::string::npos)
      << r.status().message();
}

TEST(Shard, AnInputSplitThatWouldCutAQuantBlockIsRefused) {
  // 512 inputs of Q4_K (256-element blocks) over 4 ranks: 128 each, half a block.
  auto r = shard_shape("blk.1.ffn_down.weight", DType::kQ4_K, {512, 64, 1, 1}, ShardSplit::kInputs,
                       {}, ShardSpec{3, 4});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("blk.1.ffn_down.weight"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("256-element quant blocks"), std::string::npos)
      << r.status().message();
  // Over 2 ranks the blocks stay whole.
  EXPECT_TRUE(shard_shape("blk.1.ffn_down.weight", DType::kQ4_K, {512, 64, 1, 1},
                          ShardSplit::kInputs, {}, ShardSpec{1, 2})
                  .ok());
}

TEST(Shard, ReplicatedAndUnsplitKeepTheWholeTensor) {
  const Quantized w = make_weight(DType::kQ8_0, {64, 4, 1, 1}, 3);
  for (auto [split, spec] : {std::pair{ShardSplit::kReplicated, ShardSpec{1, 4}},
                             std::pair{ShardSplit::kInputs, ShardSpec{0, 1}}}) {
    auto part = shard_bytes("output_norm.weight", DType::kQ8_0, w.shape, w.bytes, split, {}, spec);
    ASSERT_TRUE(part.ok());
    EXPECT_EQ(*part, w.bytes);
  }
}

TEST(Shard, ARankOutsideTheGroupIsRefused) {
  auto r = shard_range("token_embd.weight", 1024, {1, "vocabulary row"}, 1, ShardSpec{2, 2});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("token_embd.weight"), std::string::npos);
}

// The loader's slice of a real file's tensors, on the CPU backend, against the whole tensor read
// from the file: stories260K's ffn_down (inputs split) and attn_q (outputs split by heads).
TEST(Shard, TheLoaderImportsARanksSliceOfAFileTensor) {
  auto file = format::GgufFile::open(test::stories_gguf());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto backend = ops::make_cpu_backend({.n_threads = 1});
  WeightLoader loader(*file, *backend);
  int compared = 0;  // slices read back (not repacked by the backend)
  for (const char* name : {"blk.0.ffn_down.weight", "blk.0.attn_q.weight"}) {
    const format::GgufTensorInfo* info = file->find_tensor(name);
    ASSERT_NE(info, nullptr) << name;
    const auto shape = *loader.shape_of(name);
    const bool inputs = std::string(name).find("ffn_down") != std::string::npos;
    const ShardSplit split = inputs ? ShardSplit::kInputs : ShardSplit::kOutputs;
    const std::vector<float> whole = dequantize(
        info->dtype,
        std::vector<std::byte>(file->tensor_data(*info).begin(), file->tensor_data(*info).end()),
        shape[0], shape[1]);
    for (int r = 0; r < 2; ++r) {
      auto view = loader.require_shard(name, shape, WeightUse::kMatmul, split, {}, ShardSpec{r, 2});
      ASSERT_TRUE(view.ok()) << view.status().to_string();
      const int64_t n_in = inputs ? shape[0] / 2 : shape[0],
                    n_out = inputs ? shape[1] : shape[1] / 2;
      ASSERT_EQ(view->ne[0], n_in);
      ASSERT_EQ(view->ne[1], n_out);
      if (!view->packed() || view->data == nullptr)
        continue;  // repacked by the backend: shape only
      std::vector<std::byte> got(view->data, view->data + view->row_bytes() * n_out);
      const std::vector<float> part = dequantize(info->dtype, got, n_in, n_out);
      ++compared;
      for (int64_t o = 0; o < n_out; ++o) {
        for (int64_t i = 0; i < n_in; ++i) {
          const int64_t wo = inputs ? o : r * n_out + o, wi = inputs ? r * n_in + i : i;
          ASSERT_EQ(part[o * n_in + i], whole[wo * shape[0] + wi]) << name << " rank " << r;
        }
      }
    }
  }
  EXPECT_GT(compared, 0);
}

TEST(ShardHParams, ARankComputesItsHeadGroupAndFfnShare) {
  auto file = format::GgufFile::open(test::stories_gguf());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto whole = read_hparams(*file, Arch::kLlama);
  ASSERT_TRUE(whole.ok()) << whole.status().to_string();
  for (int n : {2, 4}) {
    auto hp = shard_hparams(*whole, ShardSpec{n - 1, n});
    ASSERT_TRUE(hp.ok()) << hp.status().to_string();
    EXPECT_EQ(hp->n_head * n, whole->n_head);
    EXPECT_EQ(hp->n_head_kv * n, whole->n_head_kv);
    EXPECT_EQ(hp->n_ff * n, whole->n_ff);
    EXPECT_EQ(hp->n_embd, whole->n_embd);  // the residual stream is every rank's
    EXPECT_EQ(hp->head_dim, whole->head_dim);
  }
}

TEST(ShardHParams, HeadsAreDealtByKvGroupsOrReplicatedAndImpossibleCountsNamed) {
  HParams hp;
  hp.arch = Arch::kLfm2;
  hp.n_head = 16;
  hp.n_head_kv = 8;
  hp.n_head_kv_layer = {0, 8, 0, 6};
  hp.n_ff = 4096;
  auto r = shard_hparams(hp, ShardSpec{3, 4});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->n_head_kv, 2);
  EXPECT_EQ(r->n_head, 4);
  EXPECT_EQ(r->n_head_kv_layer, (std::vector<int32_t>{0, 2, 0, 1}));  // 6 KV heads: 2, 2, 1, 1
  EXPECT_EQ(r->n_ff, 1024);
  // Uneven KV heads (SmolLM2-135M: 9 heads, 3 KV heads, over 2 ranks): whole groups, 2 + 1.
  hp.n_head = 9;
  hp.n_head_kv = 3;
  hp.n_head_kv_layer.clear();
  for (int rank : {0, 1}) {
    auto u = shard_hparams(hp, ShardSpec{rank, 2});
    ASSERT_TRUE(u.ok()) << u.status().to_string();
    EXPECT_EQ(u->n_head_kv, rank == 0 ? 2 : 1);
    EXPECT_EQ(u->n_head, rank == 0 ? 6 : 3);
  }
  // Fewer KV heads than ranks: each rank holds one, replicated (2 KV heads over 4 ranks).
  hp.n_head = 4;
  hp.n_head_kv = 2;
  auto replicated = shard_hparams(hp, ShardSpec{3, 4});
  ASSERT_TRUE(replicated.ok()) << replicated.status().to_string();
  EXPECT_EQ(replicated->n_head_kv, 1);
  EXPECT_EQ(replicated->n_head, 1);
  EXPECT_EQ(kv_head_shard(ShardSpec{3, 4}, 2).rank, 1);  // ranks 2 and 3 hold KV head 1
  EXPECT_EQ(kv_head_shard(ShardSpec{3, 4}, 2).n_ranks, 2);
  EXPECT_EQ(kv_head_shard(ShardSpec{3, 4}, 8).rank, 3);
  // 3 KV heads over 4 ranks: neither dealt (too few) nor replicated (4 is no multiple of 3).
  hp.n_head = 12;
  hp.n_head_kv = 3;
  r = shard_hparams(hp, ShardSpec{0, 4});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("lfm2.attention.head_count_kv is 3"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("1, 2, 3, 6"), std::string::npos) << r.status().message();
  hp.n_head_kv = 4;
  hp.n_ff = 2;
  r = shard_hparams(hp, ShardSpec{0, 4});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("lfm2.feed_forward_length is 2, fewer than the 4"), std::string::npos)
      << r.status().message();
  hp.arch = Arch::kBert;
  EXPECT_EQ(shard_hparams(hp, ShardSpec{0, 2}).status().code(), ErrorCode::kUnsupported);
}

TEST(ShardRange, UnevenUnitsAreDealtBalancedOnWholeBlocks) {
  // 3 KV heads of 64 over 2 ranks: rows 0..127 and 128..191.
  const ShardUnit kv{.elements = 64, .what = "KV head", .uneven = true};
  auto r0 = shard_range("blk.0.attn_k.weight", 192, kv, 1, ShardSpec{0, 2});
  auto r1 = shard_range("blk.0.attn_k.weight", 192, kv, 1, ShardSpec{1, 2});
  ASSERT_TRUE(r0.ok() && r1.ok());
  EXPECT_EQ(r0->first, 0);
  EXPECT_EQ(r0->count, 128);
  EXPECT_EQ(r1->first, 128);
  EXPECT_EQ(r1->count, 64);
  // The O projection's inputs in 256-element blocks: rank 1 would start inside a block.
  auto cut = shard_range("blk.0.attn_output.weight", 192, kv, 256, ShardSpec{1, 2});
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("256-element quant blocks"), std::string::npos) << cut.status().message();
  // Fewer units than ranks.
  auto few = shard_range("blk.0.attn_k.weight", 192, kv, 1, ShardSpec{0, 4});
  ASSERT_FALSE(few.ok());
  EXPECT_NE(few.status().message().find("fewer than the 4"), std::string::npos) << few.status().message();
}

}  // namespace
}  // namespace cera::model
