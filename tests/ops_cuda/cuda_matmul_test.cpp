// matmul and embed of the CUDA backend against the CPU backend, every supported weight type over
// a sweep of odd and even shapes and batch sizes covering every path (gemm_rows.h's matmul_path:
// the GEMV for 1 token, and for <= 16 where gemm_rows cannot take the weight; gemm_rows for 2-256
// tokens; above, the f16 copy + cuBLAS path, or with CERA_CUDA_GEMM=mma the tensor-core GEMM of
// gemm_q.cu for every type but F32: scripts/cuda-check.sh runs the suite both ways). The error of each output
// is measured against S = sum_i |w_i * x_i| (the
// dequantized weights times the float activations), which stays meaningful when a dot product
// cancels to near zero: max |gpu - cpu| / S must be under
//  - 2e-5 on the GEMV path, every type: the GPU quantizes activations exactly like the CPU (Q8_0
//    or Q8_K), so the integer block dots agree and only the float summation order differs;
//  - 2e-5 for F32 weights on the cuBLAS path (float32 SGEMM);
//  - 2e-3 for F16 and 1e-2 for BF16 and the block formats on gemm_rows and the prefill path
//    (gemm_q and cuBLAS alike: f16 or bf16 operands, f32 accumulation): activations are rounded to f16
//    (2^-11) or bf16 (2^-8) there, dequantized weights to f16 (2^-11), and the CPU's 8-bit
//    activations are off the exact product by up to ~1/127 of S.
// Embedding rows are exact dequantizations: 1e-6 on ‖gpu − cpu‖₂ / ‖cpu‖₂.
#include <algorithm>
#include <cstring>

#include "core/half.h"
#include "cuda_test_util.h"
#include "ops/cuda/gemm_rows.h"
#include "quant/quant.h"

namespace cera::ops::test {
namespace {

constexpr DType kTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                            DType::kQ5_1, DType::kQ8_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

std::vector<std::byte> random_weight(std::mt19937& rng, DType t, int64_t n_in, int64_t n_out) {
  const auto row_bytes = static_cast<int64_t>(*dtype_row_bytes(t, static_cast<uint64_t>(n_in)));
  std::vector<std::byte> w(static_cast<size_t>(row_bytes * n_out));
  for (int64_t r = 0; r < n_out; ++r) {
    const std::vector<float> f = random_floats(rng, static_cast<size_t>(n_in));
    if (t == DType::kF32) {
      std::memcpy(w.data() + r * row_bytes, f.data(), static_cast<size_t>(row_bytes));
    } else {
      quant::quantize_row(t, f.data(), w.data() + r * row_bytes, n_in);
    }
  }
  return w;
}

double tolerance(DType t, cuda::MatmulPath path) {
  if (path == cuda::MatmulPath::kGemv || t == DType::kF32) return 2e-5;
  return t == DType::kF16 ? 2e-3 : 1e-2;
}

// max over outputs of |got - ref| / sum_i |w_i x_i|; NaN counts as infinite.
double scaled_error(const std::vector<float>& got, const std::vector<float>& ref, DType t,
                    const std::vector<std::byte>& wbytes, const std::vector<float>& x, int64_t n_in, int64_t n_out) {
  const auto row_bytes = static_cast<int64_t>(*dtype_row_bytes(t, static_cast<uint64_t>(n_in)));
  std::vector<float> w(static_cast<size_t>(n_in));
  const int64_t n_tokens = int64_t(x.size()) / n_in;
  double worst = 0;
  for (int64_t o = 0; o < n_out; ++o) {
    quant::dequantize_row(t, wbytes.data() + o * row_bytes, w.data(), n_in);
    for (int64_t tok = 0; tok < n_tokens; ++tok) {
      double s = 0;
      for (int64_t i = 0; i < n_in; ++i) s += std::fabs(double(w[size_t(i)]) * x[size_t(tok * n_in + i)]);
      const float g = got[size_t(tok * n_out + o)], r = ref[size_t(tok * n_out + o)];
      if (std::isnan(g)) return INFINITY;
      worst = std::max(worst, std::fabs(double(g) - r) / std::max(s, 1e-30));
    }
  }
  return worst;
}

struct Imported {
  std::unique_ptr<Buffer> keep;
  TensorView view;
};
Imported import(Backend& b, DType t, std::vector<std::byte>& bytes, int64_t n_in, int64_t n_out) {
  Imported w;
  auto v = b.import_weight(make_view(bytes.data(), t, {n_in, n_out, 1, 1}), w.keep);
  CERA_CHECK_MSG(v.ok(), v.status().to_string());
  w.view = *v;
  return w;
}

// tol < 0: the path's tolerance.
void check_matmul(DType t, int64_t n_in, int64_t n_out, int64_t n_tokens, bool with_bias, std::mt19937& rng,
                  double tol = -1.0) {
  Backends& be = backends();
  std::vector<std::byte> wbytes = random_weight(rng, t, n_in, n_out);
  const std::vector<float> x = random_floats(rng, size_t(n_in * n_tokens));
  const std::vector<float> bias = random_floats(rng, size_t(n_out));
  std::vector<float> results[2];
  Backend* list[2] = {be.cuda.get(), be.cpu.get()};
  cuda::MatmulPath path = cuda::MatmulPath::kGemv;
  for (int i = 0; i < 2; ++i) {
    Backend& b = *list[i];
    Imported w = import(b, t, wbytes, n_in, n_out);
    if (i == 0) path = cuda::matmul_path(w.view, n_tokens);
    Tensor xt = make_tensor(b, {n_in, n_tokens, 1, 1}, x);
    Tensor bt = make_tensor(b, {n_out, 1, 1, 1}, bias);
    Tensor out = make_tensor(b, {n_out, n_tokens, 1, 1}, std::vector<float>(size_t(n_out * n_tokens)));
    poison(b, out.view);
    b.matmul(out.view, w.view, xt.view, with_bias ? &bt.view : nullptr);
    results[i] = read_tensor(b, out.view);
  }
  EXPECT_LE(scaled_error(results[0], results[1], t, wbytes, x, n_in, n_out), tol < 0 ? tolerance(t, path) : tol)
      << dtype_name(t) << " n_in=" << n_in << " n_out=" << n_out << " n_tokens=" << n_tokens
      << " path=" << int(path);
}

TEST(CudaMatmul, EveryTypeShapeAndBatch) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(1234);
  for (DType t : kTypes) {
    const bool k_quant = dtype_block_size(t) == 256;
    const bool plain = dtype_block_size(t) == 1;
    std::vector<int64_t> n_ins = k_quant ? std::vector<int64_t>{256, 768, 2816} : std::vector<int64_t>{32, 96, 1056, 4096};
    if (plain) n_ins.insert(n_ins.end(), {7, 33, 100});
    if (quick_sweep()) n_ins.resize(2);
    const std::vector<int64_t> batches =
        quick_sweep() ? std::vector<int64_t>{1, 3, 9, 17} : std::vector<int64_t>{1, 2, 3, 8, 9, 16, 17, 40};
    for (int64_t n_in : n_ins) {
      for (int64_t n_out : {1, 7, 64, 131}) {
        for (int64_t n_tokens : batches) {
          check_matmul(t, n_in, n_out, n_tokens, (n_out + n_tokens) % 3 == 0, rng);
        }
      }
    }
  }
}

// The tensor-core GEMM of the serving batches (gemm_rows.cu: 16, 32 or 64 tokens x 64 or 128
// rows x 128 or 64 k a stage, k split across blocks when the tiles are few): every row count
// 1-256 that changes a tile or leaves a tail (odd and even, 1 and 15 tokens past a tile), weight
// rows that leave 1 and 7 rows in the last tile, k with a partial last stage (96, 1056, 2816
// and, for F16/BF16, 40 = 8 mod 32), a k long enough to split (4096 with 64 rows) and a weight
// with enough tiles not to split (17000 rows at 16 tokens). Outputs are poisoned first
// (check_matmul); tolerances as for the prefill path.
TEST(CudaMatmul, ServingRowsEveryTypeAndTail) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(256);
  const std::vector<int64_t> rows = quick_sweep()
      ? std::vector<int64_t>{2, 16, 17, 33, 64, 65, 129, 256}
      : std::vector<int64_t>{2, 3, 4, 5, 7, 8, 15, 16, 17, 24, 31, 32, 33, 47, 63, 64, 65, 96, 127, 128, 129, 191, 200, 255, 256};
  for (DType t : kTypes) {
    if (t == DType::kF32) continue;  // not gemm_rows' (the GEMV and SGEMM paths above)
    const bool k_quant = dtype_block_size(t) == 256, plain = dtype_block_size(t) == 1;
    std::vector<int64_t> n_ins = k_quant ? std::vector<int64_t>{256, 2816} : std::vector<int64_t>{96, 1056};
    if (plain) n_ins.push_back(40);
    for (int64_t n_in : n_ins) {
      for (int64_t n_out : {65, 135}) {
        for (int64_t n_tokens : rows) check_matmul(t, n_in, n_out, n_tokens, (n_tokens + n_out) % 2 == 0, rng);
      }
    }
    for (int64_t n_tokens : {5, 40}) check_matmul(t, 4096, 64, n_tokens, true, rng);
    if (!quick_sweep()) check_matmul(t, k_quant ? 256 : 64, 17000, 16, false, rng);
  }
}

// gemm_rows_stream (gemm_rows_stream.cu: Q4_0 rows of a multiple of 256 elements, 128-row items
// of 8 / 16 / 32 / 64-token tiles, 256 k a stage, k split per weight): one stage a row (256),
// 11 stages that splits cannot share evenly (2816), 16 and 56 (4096, 14336); weights of 65, 135
// and 257 rows (1, 7 and 1 rows in the last tile, the splits' fix-up), and 17000 rows (more tiles
// than blocks: no split); every token count that changes or tails a tile. The tolerance is 3e-3
// of sum |w x|, not the path's 1e-2: Q4_0 weights are exact in f16 and the activations' f16
// rounding stays under 5e-4, while one Q4_0 block left out of 4096 elements costs ~8e-3. The
// kernel is off by default (gemm_rows.h): then these shapes check the direct kernels, gemm_rows
// and the prompt path at that tolerance; scripts/cuda-check.sh's `stream` section runs the test
// with CERA_CUDA_ROWS_STREAM=1, and =2 with CERA_CUDA_ROWS_STREAM_MAX=256 (several token tiles).
TEST(CudaMatmul, StreamRowsShapesAndTails) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(2816);
  const std::vector<int64_t> rows = quick_sweep()
      ? std::vector<int64_t>{5, 8, 9, 16, 17, 33, 64, 65, 200}
      : std::vector<int64_t>{5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 47, 63, 64, 65, 96, 127, 128, 129, 200, 256};
  for (int64_t n_in : {256, 2816, 4096}) {
    for (int64_t n_out : {65, 135, 257}) {
      for (int64_t n_tokens : rows) {
        check_matmul(DType::kQ4_0, n_in, n_out, n_tokens, (n_tokens + n_out) % 2 == 0, rng, 3e-3);
      }
    }
  }
  for (int64_t n_tokens : {16, 64}) check_matmul(DType::kQ4_0, 14336, 512, n_tokens, false, rng, 3e-3);
  if (!quick_sweep()) check_matmul(DType::kQ4_0, 256, 17000, 16, true, rng, 3e-3);
}

// The tensor-core GEMM (gemm_q.cu, 128 tokens x 128 rows x 64 k per block): token counts that
// leave 1, 44 and 0 tokens in the last tile (257, 300, 512; up to 256 the batch is gemm_rows'),
// row counts that leave a partial tile with an odd
// (scalar stores) and an even (paired stores) output stride, k with a half-filled last stage
// (n_in % 64 == 32) and, for F16/BF16, n_in % 32 == 8. Tolerances as for the cuBLAS path: the
// kernel rounds weights and activations to f16 (bf16 for BF16) and accumulates in f32.
TEST(CudaMatmul, PrefillTilesAndTails) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(4096);
  for (DType t : kTypes) {
    const bool k_quant = dtype_block_size(t) == 256, plain = dtype_block_size(t) == 1;
    std::vector<int64_t> n_ins = k_quant ? std::vector<int64_t>{256, 768} : std::vector<int64_t>{96, 320};
    if (plain) n_ins.push_back(40);
    if (quick_sweep()) n_ins.resize(1);
    // (Up to 256 tokens gemm_rows takes the batch: 257, 300 and 512 are gemm_q's or cuBLAS'.)
    const std::vector<int64_t> batches =
        quick_sweep() ? std::vector<int64_t>{17, 300} : std::vector<int64_t>{17, 33, 130, 257, 300, 512};
    for (int64_t n_in : n_ins) {
      for (int64_t n_out : {131, 200}) {
        for (int64_t n_tokens : batches) check_matmul(t, n_in, n_out, n_tokens, n_out == 200, rng);
      }
    }
  }
}

TEST(CudaMatmul, LargeRowsBothPaths) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(99);
  for (DType t : kTypes) {
    for (int64_t n_tokens : {1, 4, 64, 300}) check_matmul(t, 4096, 1000, n_tokens, n_tokens == 300, rng);
  }
}

TEST(CudaEmbed, EveryTypeMatchesDequantization) {
  CERA_SKIP_WITHOUT_CUDA();
  Backends& be = backends();
  std::mt19937 rng(7);
  for (DType t : kTypes) {
    const int64_t n_vocab = 37;
    for (int64_t n_embd : dtype_block_size(t) == 256 ? std::vector<int64_t>{256, 512} : std::vector<int64_t>{32, 96, 288}) {
      std::vector<std::byte> table = random_weight(rng, t, n_embd, n_vocab);
      const std::vector<int32_t> tokens = {3, 0, 36, 3, 17};
      for (float scale : {1.0f, 0.37f}) {
        std::vector<float> results[2];
        Backend* list[2] = {be.cuda.get(), be.cpu.get()};
        for (int i = 0; i < 2; ++i) {
          Imported w = import(*list[i], t, table, n_embd, n_vocab);
          Tensor out = make_tensor(*list[i], {n_embd, int64_t(tokens.size()), 1, 1},
                                   std::vector<float>(size_t(n_embd) * tokens.size()));
          poison(*list[i], out.view);
          list[i]->embed(out.view, w.view, tokens, scale);
          results[i] = read_tensor(*list[i], out.view);
        }
        CERA_EXPECT_CLOSE(results[0], results[1], 1e-6, std::string(dtype_name(t)) + " embed n_embd=" + std::to_string(n_embd));
      }
    }
  }
}

// embed_ids (ids in device memory, read when the kernel runs) against embed of the same ids on
// the CUDA backend: identical bytes, recorded into a graph (<= 16 ids) or eager (more); an id
// outside the vocabulary, which the host cannot check, gives a zero row.
TEST(CudaEmbed, EmbedIdsMatchesEmbed) {
  CERA_SKIP_WITHOUT_CUDA();
  Backend& cuda = *backends().cuda;
  std::mt19937 rng(17);
  const int64_t n_vocab = 41;
  std::uniform_int_distribution<int32_t> pick(0, int32_t(n_vocab) - 1);
  for (DType t : kTypes) {
    const int64_t n_embd = dtype_block_size(t) == 256 ? 512 : 96;
    std::vector<std::byte> table = random_weight(rng, t, n_embd, n_vocab);
    Imported w = import(cuda, t, table, n_embd, n_vocab);
    for (int64_t n : {1, 5, 16, 23}) {
      std::vector<int32_t> ids(static_cast<size_t>(n));
      for (int32_t& id : ids) id = pick(rng);
      auto buf = cuda.allocate(uint64_t(n) * 4);
      ASSERT_TRUE(buf.ok());
      const TensorView dev_ids = (*buf)->view(DType::kI32, {n, 1, 1, 1}, Device::kCuda);
      cuda.upload(dev_ids, ids.data());
      Tensor a = make_tensor(cuda, {n_embd, n, 1, 1}, std::vector<float>(size_t(n_embd * n)));
      Tensor b = make_tensor(cuda, {n_embd, n, 1, 1}, std::vector<float>(size_t(n_embd * n)));
      poison(cuda, a.view);
      poison(cuda, b.view);
      cuda.embed(a.view, w.view, ids, 0.37f);
      cuda.embed_ids(b.view, w.view, dev_ids, 0.37f);
      const std::vector<float> ra = read_tensor(cuda, a.view), rb = read_tensor(cuda, b.view);
      CERA_EXPECT_CLOSE(rb, ra, 0.0, std::string(dtype_name(t)) + " embed_ids n=" + std::to_string(n));
      EXPECT_EQ(ra, rb) << dtype_name(t) << " n=" << n;
    }
    // Out-of-range ids (negative, n_vocab) between valid ones: zero rows, the others intact.
    const std::vector<int32_t> bad = {2, -1, int32_t(n_vocab), 7};
    auto buf = cuda.allocate(bad.size() * 4);
    ASSERT_TRUE(buf.ok());
    const TensorView dev_bad = (*buf)->view(DType::kI32, {4, 1, 1, 1}, Device::kCuda);
    cuda.upload(dev_bad, bad.data());
    Tensor out = make_tensor(cuda, {n_embd, 4, 1, 1}, std::vector<float>(size_t(n_embd * 4)));
    poison(cuda, out.view);
    cuda.embed_ids(out.view, w.view, dev_bad, 1.0f);
    const std::vector<float> got = read_tensor(cuda, out.view);
    Tensor ref = make_tensor(cuda, {n_embd, 2, 1, 1}, std::vector<float>(size_t(n_embd * 2)));
    cuda.embed(ref.view, w.view, std::vector<int32_t>{2, 7}, 1.0f);
    const std::vector<float> want = read_tensor(cuda, ref.view);
    for (int64_t j = 0; j < n_embd; ++j) {
      EXPECT_EQ(got[size_t(j)], want[size_t(j)]) << dtype_name(t);
      EXPECT_EQ(got[size_t(n_embd + j)], 0.0f) << dtype_name(t);
      EXPECT_EQ(got[size_t(2 * n_embd + j)], 0.0f) << dtype_name(t);
      EXPECT_EQ(got[size_t(3 * n_embd + j)], want[size_t(n_embd + j)]) << dtype_name(t);
    }
  }
}

TEST(CudaEmbed, GathersRowsOfADeviceActivation) {
  CERA_SKIP_WITHOUT_CUDA();
  Backends& be = backends();
  std::mt19937 rng(8);
  const int64_t n = 45, rows = 9;
  const std::vector<float> x = random_floats(rng, size_t(n * rows));
  const std::vector<int32_t> picks = {8, 2, 2};
  Tensor src = make_tensor(*be.cuda, {n, rows, 1, 1}, x);
  Tensor out = make_tensor(*be.cuda, {n, 3, 1, 1}, std::vector<float>(size_t(n) * 3));
  poison(*be.cuda, out.view);
  be.cuda->embed(out.view, src.view, picks, 1.0f);
  const std::vector<float> got = read_tensor(*be.cuda, out.view);
  std::vector<float> want;
  for (int32_t p : picks) want.insert(want.end(), x.begin() + p * n, x.begin() + (p + 1) * n);
  EXPECT_EQ(got, want);
}

// Long rows go to GEMVs that split a row over 2 or 4 warps (1 and 2 tokens; src/ops/cuda/gemv.cu
// split_for): unit counts that split unevenly (8224 = 257 units of 32, 16416 = 513), a row count
// that leaves a block half empty (37), and 3 tokens (no split) beside them.
TEST(CudaMatmul, LongRowsSplitOverWarps) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(8224);
  for (DType t : kTypes) {
    const bool k_quant = dtype_block_size(t) == 256;
    for (int64_t n_in : k_quant ? std::vector<int64_t>{8448} : std::vector<int64_t>{8224, 16416}) {
      for (int64_t n_tokens : {1, 2, 3}) check_matmul(t, n_in, 37, n_tokens, n_tokens == 2, rng);
    }
  }
}

// The streaming GEMV (src/ops/cuda/gemv_stream.cuh; 1 and 2 tokens, rows a multiple of 256
// elements, F16/BF16 rows a multiple of 8; by default only where it is faster, every type with
// CERA_CUDA_GEMV_STREAM=all, which scripts/cuda-check.sh also runs): rows of several tile columns
// with a shorter last one (5632 = 22 x 256 elements: 2 columns of Q4_0 units, 64 + 64 + 48 Q8_0
// units, 6 columns of F16) in 1061 rows (133 groups of 8, the last one partial: one a block); and
// 6001 rows of 256 elements, 751 groups, so that blocks take further groups from the queue.
TEST(CudaMatmul, StreamingTileColumnsAndQueue) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(5632);
  for (DType t : kTypes) {
    for (int64_t n_tokens : {1, 2}) {
      check_matmul(t, 5632, 1061, n_tokens, n_tokens == 2, rng);
      check_matmul(t, 256, 6001, n_tokens, n_tokens == 1, rng);
    }
  }
}

// Prompt GEMMs dequantize their weight one GEMM ahead on a side stream, guessing the next weight
// from the order seen before (src/ops/cuda/dequant_ahead.h). A sequence of three weights repeated,
// then taken out of order (wrong guesses), and a weight freed and another imported in its place:
// every product must still equal the CPU's.
TEST(CudaMatmul, PrefillCopiesMadeAheadFollowTheWeights) {
  CERA_SKIP_WITHOUT_CUDA();
  Backends& be = backends();
  std::mt19937 rng(77);
  const int64_t n_in = 256, n_tokens = 300;  // past gemm_rows' 256
  const DType types[] = {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K};
  const int64_t n_outs[] = {96, 200, 64};
  std::vector<std::byte> bytes[3];
  Imported cuda_w[3], cpu_w[3];
  for (int i = 0; i < 3; ++i) {
    bytes[i] = random_weight(rng, types[i], n_in, n_outs[i]);
    cuda_w[i] = import(*be.cuda, types[i], bytes[i], n_in, n_outs[i]);
    cpu_w[i] = import(*be.cpu, types[i], bytes[i], n_in, n_outs[i]);
  }
  const std::vector<float> x = random_floats(rng, size_t(n_in * n_tokens));
  Tensor x_cuda = make_tensor(*be.cuda, {n_in, n_tokens, 1, 1}, x), x_cpu = make_tensor(*be.cpu, {n_in, n_tokens, 1, 1}, x);
  auto product = [&](Backend& b, const Imported& w, const Tensor& xt, int64_t n_out) {
    Tensor out = make_tensor(b, {n_out, n_tokens, 1, 1}, std::vector<float>(size_t(n_out * n_tokens)));
    poison(b, out.view);
    b.matmul(out.view, w.view, xt.view, nullptr);
    return read_tensor(b, out.view);
  };
  auto check = [&](int i) {
    const auto got = product(*be.cuda, cuda_w[i], x_cuda, n_outs[i]);
    const auto ref = product(*be.cpu, cpu_w[i], x_cpu, n_outs[i]);
    EXPECT_LE(scaled_error(got, ref, types[i], bytes[i], x, n_in, n_outs[i]),
              tolerance(types[i], cuda::matmul_path(cuda_w[i].view, n_tokens)))
        << "weight " << i;
  };
  for (int round = 0; round < 3; ++round) {
    for (int i : {0, 1, 2}) check(i);
  }
  for (int i : {0, 2, 1, 1, 0, 2, 0}) check(i);
  // Weight 1 freed; a new weight of the same type and shape may take its address.
  cuda_w[1] = {};
  bytes[1] = random_weight(rng, types[1], n_in, n_outs[1]);
  cuda_w[1] = import(*be.cuda, types[1], bytes[1], n_in, n_outs[1]);
  cpu_w[1] = import(*be.cpu, types[1], bytes[1], n_in, n_outs[1]);
  for (int i : {0, 1, 2, 0, 1}) check(i);
}

}  // namespace
}  // namespace cera::ops::test
