// matmul and embed of the CUDA backend against the CPU backend, every supported weight type over
// a sweep of odd and even shapes and batch sizes covering both paths (GEMV for <= 16 tokens,
// cuBLAS above). Tolerances on ‖gpu − cpu‖₂ / ‖cpu‖₂:
//  - F32 weights: 1e-5 (float32 arithmetic on both sides, different summation order);
//  - F16/BF16 GEMV: 1e-5 (float activations); GEMM: 2e-3 (f16 activations), 1e-2 (bf16);
//  - block formats: 1e-2. Both backends quantize the activations to 8 bits (the CPU to Q8_0 with
//    an fp16 scale or Q8_K, the GPU to 32-element blocks with a float scale), each off the exact
//    product by ~0.3 %; a wrong code, scale or nibble order gives errors of order 1.
// Embedding rows are exact dequantizations: 1e-6.
#include <cstring>

#include "core/half.h"
#include "cuda_test_util.h"
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

double tolerance(DType t, int64_t n_tokens) {
  if (t == DType::kF32) return 1e-5;
  if (t == DType::kF16) return n_tokens <= 16 ? 1e-5 : 2e-3;
  if (t == DType::kBF16) return n_tokens <= 16 ? 1e-5 : 1e-2;
  return 1e-2;
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

void check_matmul(DType t, int64_t n_in, int64_t n_out, int64_t n_tokens, bool with_bias, std::mt19937& rng) {
  Backends& be = backends();
  std::vector<std::byte> wbytes = random_weight(rng, t, n_in, n_out);
  const std::vector<float> x = random_floats(rng, size_t(n_in * n_tokens));
  const std::vector<float> bias = random_floats(rng, size_t(n_out));
  std::vector<float> results[2];
  Backend* list[2] = {be.cuda.get(), be.cpu.get()};
  for (int i = 0; i < 2; ++i) {
    Backend& b = *list[i];
    Imported w = import(b, t, wbytes, n_in, n_out);
    Tensor xt = make_tensor(b, {n_in, n_tokens, 1, 1}, x);
    Tensor bt = make_tensor(b, {n_out, 1, 1, 1}, bias);
    Tensor out = make_tensor(b, {n_out, n_tokens, 1, 1}, std::vector<float>(size_t(n_out * n_tokens)));
    poison(b, out.view);
    b.matmul(out.view, w.view, xt.view, with_bias ? &bt.view : nullptr);
    results[i] = read_tensor(b, out.view);
  }
  CERA_EXPECT_CLOSE(results[0], results[1], tolerance(t, n_tokens),
                    std::string(dtype_name(t)) + " n_in=" + std::to_string(n_in) + " n_out=" +
                        std::to_string(n_out) + " n_tokens=" + std::to_string(n_tokens));
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

TEST(CudaMatmul, LargeRowsBothPaths) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(99);
  for (DType t : kTypes) {
    for (int64_t n_tokens : {1, 4, 64}) check_matmul(t, 4096, 1000, n_tokens, false, rng);
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

}  // namespace
}  // namespace cera::ops::test
