// The in-kernel weight decoders of the tensor-core GEMM (gemm_q.cuh), run on the host over a
// host copy of the GPU layout, against the CPU dequantizers. Needs no GPU (the decoders are
// __host__ __device__), so CI checks every format's bit twiddling. Tolerance: the decoders round
// to f16 (bf16 passes through), and the K-quants round the sub-block scale and minimum to f16
// before the fused multiply-add (host: multiply, then add): |got - ref| <= 2^-8 * max |weight| of
// the chunk (each of up to four roundings costs 2^-11 of a term no larger than twice that max).
#include <cuda_fp16.h>

#include <cstring>

#include "cuda_test_util.h"
#include "ops/cuda/gemm_q.h"
#include "quant/quant.h"

namespace cera::ops::test {
namespace {

// File blocks -> GPU layout, on the host (what repack_weight does on the device).
std::vector<std::byte> to_gpu_layout(DType t, const std::vector<std::byte>& raw, int64_t n_in, int64_t n_rows) {
  const cuda::WeightLayout l = cuda::weight_layout(t, n_in, n_rows);
  std::vector<std::byte> out(l.total_bytes + 16);
  if (l.repacked) {
    cuda::repack_weight_host(t, raw.data(), out.data(), n_in, n_rows);
  } else {
    std::memcpy(out.data(), raw.data(), raw.size());
  }
  return out;
}

TEST(GemmQDecode, EveryTypeMatchesCpuDequantization) {
  constexpr DType kTypes[] = {DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                              DType::kQ5_1, DType::kQ8_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
  std::mt19937 rng(4242);
  for (DType t : kTypes) {
    const int64_t n_in = dtype_block_size(t) == 256 ? 768 : 96, n_rows = 5;
    const auto row_bytes = int64_t(*dtype_row_bytes(t, uint64_t(n_in)));
    std::vector<std::byte> raw(size_t(row_bytes * n_rows));
    std::vector<float> ref(size_t(n_in * n_rows));
    for (int64_t r = 0; r < n_rows; ++r) {
      // Rows of different scales and an offset, so minimums and signed codes all matter.
      std::vector<float> f = random_floats(rng, size_t(n_in), -1.0f, 1.0f);
      for (float& v : f) v = v * float(r + 1) * 0.3f + (r % 2 == 0 ? 0.0f : 0.4f);
      quant::quantize_row(t, f.data(), raw.data() + r * row_bytes, n_in);
      quant::dequantize_row(t, raw.data() + r * row_bytes, ref.data() + r * n_in, n_in);
    }
    const std::vector<std::byte> gpu = to_gpu_layout(t, raw, n_in, n_rows);
    const cuda::QWeight w =
        cuda::qweight_of(t, gpu.data(), n_in, n_rows, dtype_block_size(t) == 1 ? row_bytes : 0);
    double worst = 0;
    for (int64_t r = 0; r < n_rows; ++r) {
      for (int64_t j = 0; j < n_in / 32; ++j) {
        float got[32];
        cuda::gemm_q_decode_chunk_host(t, w, r, j, n_in, got);
        float amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(ref[size_t(r * n_in + 32 * j + i)]));
        for (int i = 0; i < 32; ++i) {
          const double err = std::fabs(double(got[i]) - ref[size_t(r * n_in + 32 * j + i)]) / std::max(amax, 1e-20f);
          ASSERT_FALSE(std::isnan(got[i])) << dtype_name(t) << " row " << r << " chunk " << j << " elem " << i;
          worst = std::max(worst, err);
          ASSERT_LE(err, 1.0 / 256) << dtype_name(t) << " row " << r << " chunk " << j << " elem " << i << ": got "
                                    << got[i] << " want " << ref[size_t(r * n_in + 32 * j + i)];
        }
      }
    }
    // Exactness where it is expected: the plain types pass through, and the legacy formats'
    // products of an f16 scale and a small code are rounded once, like the f16 copy of the CPU value.
    if (t == DType::kF16 || t == DType::kBF16 || t == DType::kQ4_0 || t == DType::kQ8_0) {
      for (int64_t r = 0; r < n_rows; ++r) {
        for (int64_t j = 0; j < n_in / 32; ++j) {
          float got[32];
          cuda::gemm_q_decode_chunk_host(t, w, r, j, n_in, got);
          for (int i = 0; i < 32; ++i) {
            const float want = ref[size_t(r * n_in + 32 * j + i)];
            const float want_rounded = t == DType::kBF16 ? want : __half2float(__float2half_rn(want));
            ASSERT_EQ(got[i], want_rounded) << dtype_name(t) << " row " << r << " chunk " << j << " elem " << i;
          }
        }
      }
    }
    RecordProperty(std::string(dtype_name(t)), std::to_string(worst));
  }
}

// A plain row whose length is a multiple of 8 but not of 32: the last chunk reads zeros past n_in.
TEST(GemmQDecode, PlainTailReadsZeros) {
  const int64_t n_in = 40;
  std::vector<uint16_t> row(64, 0x3C00);  // 1.0 in f16, beyond n_in too (it must not be read)
  const cuda::QWeight w = cuda::qweight_of(DType::kF16, row.data(), n_in, 1, 128);
  float got[32];
  cuda::gemm_q_decode_chunk_host(DType::kF16, w, 0, 1, n_in, got);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(got[i], i < 8 ? 1.0f : 0.0f) << i;
}

}  // namespace
}  // namespace cera::ops::test
