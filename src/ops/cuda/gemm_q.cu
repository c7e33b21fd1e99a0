// Tensor-core GEMM of the prefill path (> kGemvMaxTokens tokens) with the weight dequantized
// inside the kernel: out[t][o] = sum_k x[t][k] * W[o][k] (+ bias[o]). One block computes 128
// tokens x 128 weight rows with 8 warps (each 64 x 32) of mma.sync m16n8k16 (f16 or bf16
// operands, f32 accumulation), 64 along k per stage, two shared-memory stages. Activations are
// converted once per call to a zero-padded f16 copy and staged by cp.async; each thread loads
// the raw bytes of one 32-weight chunk (GemmChunk<T>, gemm_q.cuh) one stage ahead into
// registers and decodes them into the next stage while the tensor cores work on this one.
// Decision: the weight never exists in f16 outside shared memory, so a call reads the quantized
// bytes once from DRAM (blocks along tokens run adjacent and share each weight tile in L2).
// The wgmma variant (kWg, CERA_CUDA_GEMM_Q=wgmma) keeps the same tiles, stages and weight
// decoding but multiplies with Hopper's asynchronous warpgroup MMA: each of the two warpgroups
// takes 64 tokens x the 128 rows (m64n128k16 straight from the swizzled tiles, which are already
// wgmma's 128-byte-swizzle K-major layout), and the warps decode the next stage's weights while
// the tensor cores work, instead of issuing mma.sync themselves. On the H200 it is as fast as
// mma.sync (docs/benchmarks/cuda.md v8): the weight decoding, not the products, bounds both.
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "ops/cuda/gemm_q.cuh"
#include "ops/cuda/gemm_q.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/mma.cuh"
#include "ops/cuda/wgmma.cuh"

namespace cera::ops::cuda {
namespace {

using namespace qgemm;
using namespace mma;

constexpr int kBM = 128;  // tokens per block
constexpr int kBN = 128;  // weight rows per block
constexpr int kBK = 64;   // k per stage: two 32-weight chunks per row
constexpr int kThreads = 256;
constexpr int kTileHalves = kBM * kBK;                // == kBN * kBK
constexpr int kSmemBytes = 2 * 2 * kTileHalves * 2;  // 2 stages x (x, w) tiles of f16: 64 KiB
constexpr int kWgSmemBytes = kSmemBytes + 1024;      // wgmma: the tiles 1024-byte aligned (the swizzle's period)
static_assert(kBM == kBN && kThreads == 2 * kBN, "one weight chunk per thread and stage");

struct GemmQParams {
  QWeight w;
  const __half* x;  // [m_pad, k_pad] f16 (bf16 bits for BF16 weights), zero padded
  float* out;       // [n_tokens rows of n_out], out_stride floats apart
  int64_t out_stride;
  const float* bias;  // [n_out] or nullptr
  int64_t n_in;
  int n_tokens, n_out, k_pad;
  bool out_pairs;  // float2 stores allowed (even stride, 8-byte aligned base)
};

// Half offset of 16-byte column c (0..7) of row r in a [rows][kBK] tile. The XOR swizzle puts the
// 8 rows one ldmatrix phase reads (and the 8 stores of a quarter warp) on distinct bank groups.
__device__ __forceinline__ int swz(int r, int c) { return r * kBK + ((c ^ (r & 7)) << 3); }

template <DType T, bool kWg>
__global__ void __launch_bounds__(kThreads, 2) gemm_q_kernel(const __grid_constant__ GemmQParams p) {
  pdl_entry();
  using Chunk = GemmChunk<T>;
  using Raw = typename Chunk::Raw;
  extern __shared__ __align__(128) uint8_t smem_raw[];
  uint8_t* smem = smem_raw;
  if constexpr (kWg) smem += (1024 - (smem_addr(smem_raw) & 1023)) & 1023;
  __half* xs = reinterpret_cast<__half*>(smem);  // [2][kBM][kBK] swizzled
  __half* ws = xs + 2 * kTileHalves;              // [2][kBN][kBK] swizzled
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int m0 = int(blockIdx.x) * kBM, n0 = int(blockIdx.y) * kBN;
  const int n_ktiles = p.k_pad / kBK;

  // This thread's weight chunk of every stage: row w_row, chunk 2 kt + w_half (rows past n_out
  // re-read the last row; their products are never stored).
  const int w_row = tid >> 1, w_half = tid & 1;
  const int64_t w_grow = min(n0 + w_row, p.n_out - 1);
  const int64_t n_chunks = (p.n_in + 31) / 32;
  auto load_w = [&](int kt) -> Raw {
    const int64_t j = 2 * int64_t(kt) + w_half;
    if (j < n_chunks) return Chunk::load(p.w, w_grow, j, p.n_in);
    return Raw{};  // all-zero bytes decode to zeros in every format
  };
  auto store_w = [&](const Raw& raw, __half* wt) {
    uint32_t v[16];
    Chunk::decode(raw, v);
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      *reinterpret_cast<uint4*>(wt + swz(w_row, 4 * w_half + g)) =
          make_uint4(v[4 * g], v[4 * g + 1], v[4 * g + 2], v[4 * g + 3]);
    }
  };
  auto load_x = [&](int kt, __half* xt) {
#pragma unroll
    for (int i = 0; i < kBM * kBK / 8 / kThreads; ++i) {
      const int id = tid + kThreads * i, r = id >> 3, c = id & 7;
      cp_async16(smem_addr(xt + swz(r, c)), p.x + int64_t(m0 + r) * p.k_pad + kt * kBK + c * 8);
    }
  };

  constexpr bool kBf16 = T == DType::kBF16;
  const int wm = warp & 1, wn = warp >> 1;  // warp tile: tokens 64 wm .. +63, rows 32 wn .. +31
  // mma.sync: [mi][ni][e] of the warp tile; wgmma: d[64] of the warpgroup's 64 tokens x 128 rows.
  std::conditional_t<kWg, float[64], float[4][4][4]> acc;
  {
    float* a = reinterpret_cast<float*>(&acc);
#pragma unroll
    for (int i = 0; i < 64; ++i) a[i] = 0.0f;
  }

  // (d: acc, generic so that each variant instantiates only its own product.)
  auto compute = [&](const __half* xt, const __half* wt, auto& d) {
    const uint32_t xb = smem_addr(xt), wb = smem_addr(wt);
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks) {
      uint32_t b[4][2];
#pragma unroll
      for (int nj = 0; nj < 2; ++nj) {
        // Matrices: rows 0-7 k 0-7, rows 0-7 k 8-15, rows 8-15 k 0-7, rows 8-15 k 8-15.
        const int r = 32 * wn + 16 * nj + (lane & 7) + ((lane >> 4) << 3), c = 2 * ks + ((lane >> 3) & 1);
        uint32_t t[4];
        ldsm_x4(wb + 2 * swz(r, c), t);
        b[2 * nj][0] = t[0];
        b[2 * nj][1] = t[1];
        b[2 * nj + 1][0] = t[2];
        b[2 * nj + 1][1] = t[3];
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        // Matrices: tokens 0-7 k 0-7, 8-15 k 0-7, 0-7 k 8-15, 8-15 k 8-15 (the a0..a3 order).
        const int r = 64 * wm + 16 * mi + (lane & 15), c = 2 * ks + (lane >> 4);
        uint32_t a[4];
        ldsm_x4(xb + 2 * swz(r, c), a);
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) mma16816<kBf16>(d[mi][ni], a, b[ni][0], b[ni][1]);
      }
    }
  };
  // wgmma: warpgroup g multiplies its 64 tokens by the 128 rows, 4 products of k 16 per stage,
  // issued and left running (the caller waits before the stage is overwritten).
  auto compute_wg = [&](const __half* xt, const __half* wt, auto& d) {
    const uint64_t da = wgmma::desc_k128(smem_addr(xt + 64 * (warp >> 2) * kBK)), db = wgmma::desc_k128(smem_addr(wt));
    wgmma::fence_operands(d);
    wgmma::fence();
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks) wgmma::mma_m64n128k16<kBf16>(d, da + 2 * ks, db + 2 * ks);
    wgmma::commit();
    wgmma::fence_operands(d);
  };
  // The stage just written (this thread's stores and finished cp.async copies) made visible to the
  // products, and the products that read the stage about to be overwritten finished.
  auto stage_written = [&] {
    if constexpr (kWg) {
      wgmma::wait<0>();
      wgmma::fence_operands(acc);
      wgmma::fence_smem_writes();
    }
  };

  // Pipeline: raw weight bytes for stage kt+1 sit in registers while stage kt multiplies; the
  // activation tile for kt+1 is in flight by cp.async. One barrier per stage.
  Raw raw = load_w(0);
  load_x(0, xs);
  cp_async_commit();
  store_w(raw, ws);
  if (n_ktiles > 1) {
    raw = load_w(1);
    load_x(1, xs + kTileHalves);
    cp_async_commit();
  }
  cp_async_wait<0>();
  stage_written();
  __syncthreads();
  for (int kt = 0; kt < n_ktiles; ++kt) {
    const int s = kt & 1;
    if constexpr (kWg) {
      compute_wg(xs + s * kTileHalves, ws + s * kTileHalves, acc);
    } else {
      compute(xs + s * kTileHalves, ws + s * kTileHalves, acc);
    }
    if (kt + 1 < n_ktiles) store_w(raw, ws + (s ^ 1) * kTileHalves);
    cp_async_wait<0>();
    stage_written();
    __syncthreads();
    if (kt + 2 < n_ktiles) {
      raw = load_w(kt + 2);
      load_x(kt + 2, xs + s * kTileHalves);
      cp_async_commit();
    }
  }

  // Bias of rows o and o + 1 (zero without bias or past n_out), read once per column pair.
  auto bias_pair = [&](int o) {
    float2 b = make_float2(0.0f, 0.0f);
    if (p.bias != nullptr) {
      b.x = p.bias[o];
      if (o + 1 < p.n_out) b.y = p.bias[o + 1];
    }
    return b;
  };
  // Token t's outputs of rows o and o + 1 (o + 1 only inside n_out); t and o are in range.
  auto store_pair = [&](int t, int o, float v0, float v1) {
    const bool both = o + 1 < p.n_out;
    float* dst = p.out + int64_t(t) * p.out_stride + o;
    if (both && p.out_pairs) {
      *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);
    } else {
      dst[0] = v0;
      if (both) dst[1] = v1;
    }
  };
  if constexpr (kWg) {
    // d[4j + 2h + {0, 1}]: token 64 g + 16 (warp % 4) + lane / 4 + 8 h, rows 8 j + 2 (lane % 4) + {0, 1}.
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int o = n0 + 8 * j + 2 * (lane & 3);
      if (o >= p.n_out) continue;
      const float2 b = bias_pair(o);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int t = m0 + 64 * (warp >> 2) + 16 * (warp & 3) + (lane >> 2) + 8 * h;
        if (t < p.n_tokens) store_pair(t, o, acc[4 * j + 2 * h] + b.x, acc[4 * j + 2 * h + 1] + b.y);
      }
    }
  } else {
    // Accumulator (mi, ni): c0, c1 at token lane / 4, rows 2 (lane % 4) + {0, 1}; c2, c3 8 tokens on.
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
      const int o = n0 + 32 * wn + 8 * ni + 2 * (lane & 3);
      if (o >= p.n_out) continue;
      const float2 b = bias_pair(o);
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int t = m0 + 64 * wm + 16 * mi + (lane >> 2) + 8 * h;
          if (t < p.n_tokens) store_pair(t, o, acc[mi][ni][2 * h] + b.x, acc[mi][ni][2 * h + 1] + b.y);
        }
      }
    }
  }
}

struct ConvertXParams {
  const float* x;
  int64_t x_stride;  // floats
  uint4* out;        // [m_pad, k_pad] halves, 8 per uint4
  int64_t n_in, n_vec;
  int n_tokens, k_pad;
};

// x (float rows) -> zero-padded f16 / bf16 rows: one thread per 8 outputs.
template <bool kBf16>
__global__ void convert_x_kernel(const __grid_constant__ ConvertXParams p) {
  pdl_entry();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.n_vec) return;
  const int64_t per_row = p.k_pad / 8, row = i / per_row, k0 = (i % per_row) * 8;
  float v[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) v[e] = row < p.n_tokens && k0 + e < p.n_in ? p.x[row * p.x_stride + k0 + e] : 0.0f;
  uint32_t h[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    if constexpr (kBf16) {
      const __nv_bfloat162 b = __floats2bfloat162_rn(v[2 * e], v[2 * e + 1]);
      h[e] = *reinterpret_cast<const uint32_t*>(&b);
    } else {
      h[e] = u32(__floats2half2_rn(v[2 * e], v[2 * e + 1]));
    }
  }
  p.out[i] = make_uint4(h[0], h[1], h[2], h[3]);
}

// CERA_CUDA_GEMM_Q=wgmma: the wgmma variant (see the top of this file).
bool use_wgmma() {
  static const bool on = [] {
    const char* e = std::getenv("CERA_CUDA_GEMM_Q");
    return e != nullptr && std::string_view(e) == "wgmma";
  }();
  return on;
}

using GemmKernel = void (*)(GemmQParams);
template <bool kWg>
GemmKernel kernel_of(DType t) {
  switch (t) {
    case DType::kF16: return gemm_q_kernel<DType::kF16, kWg>;
    case DType::kBF16: return gemm_q_kernel<DType::kBF16, kWg>;
    case DType::kQ4_0: return gemm_q_kernel<DType::kQ4_0, kWg>;
    case DType::kQ4_1: return gemm_q_kernel<DType::kQ4_1, kWg>;
    case DType::kQ5_0: return gemm_q_kernel<DType::kQ5_0, kWg>;
    case DType::kQ5_1: return gemm_q_kernel<DType::kQ5_1, kWg>;
    case DType::kQ8_0: return gemm_q_kernel<DType::kQ8_0, kWg>;
    case DType::kQ4_K: return gemm_q_kernel<DType::kQ4_K, kWg>;
    case DType::kQ5_K: return gemm_q_kernel<DType::kQ5_K, kWg>;
    case DType::kQ6_K: return gemm_q_kernel<DType::kQ6_K, kWg>;
    default: return nullptr;
  }
}

// The dynamic shared-memory limit is raised once per kernel (and device: one device per process).
void allow_smem(DType t, bool wg, GemmKernel k) {
  static bool done[2][32] = {};
  bool& d = done[wg ? 1 : 0][size_t(t) % 32];
  if (d) return;
  CERA_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, wg ? kWgSmemBytes : kSmemBytes));
  d = true;
}

template <DType T>
void decode_host(const QWeight& w, int64_t row, int64_t j, int64_t n_in, float (&out)[32]) {
  uint32_t v[16];
  GemmChunk<T>::decode(GemmChunk<T>::load(w, row, j, n_in), v);
  for (int i = 0; i < 32; ++i) {
    const uint32_t bits = (v[i / 2] >> (16 * (i % 2))) & 0xFFFF;
    if constexpr (T == DType::kBF16) {
      const uint32_t f = bits << 16;
      std::memcpy(&out[i], &f, 4);
    } else {
      out[i] = f16_bits(bits);
    }
  }
}

}  // namespace

bool gemm_q_supports(const TensorView& weight) {
  const DType t = weight.dtype;
  if (t == DType::kF32 || kernel_of<false>(t) == nullptr) return false;
  if (dtype_block_size(t) != 1) return true;
  return weight.cols() % 8 == 0 && weight.stride() % 16 == 0 && reinterpret_cast<uintptr_t>(weight.data) % 16 == 0;
}

void gemm_q(CudaContext& ctx, const TensorView& out, const TensorView& weight, const TensorView& x,
            const TensorView* bias) {
  const int64_t n_in = weight.cols(), n_out = weight.rows(), n_tokens = x.rows();
  const bool bf16 = weight.dtype == DType::kBF16;
  const int64_t m_pad = (n_tokens + kBM - 1) / kBM * kBM, k_pad = (n_in + kBK - 1) / kBK * kBK;
  CERA_CHECK_MSG(n_out < (int64_t{1} << 31) && k_pad < (int64_t{1} << 31) && m_pad / kBM < (int64_t{1} << 31),
                 "gemm_q: dimensions too large");
  auto* xh = static_cast<uint4*>(ctx.scratch(ScratchKind::kGemmX, uint64_t(m_pad * k_pad) * 2));
  ctx.act_cache() = {};  // the padded copy below replaces whatever kGemmX held
  if (!ctx.launching()) return;
  ConvertXParams cp{reinterpret_cast<const float*>(x.data), x.stride() / 4, xh, n_in, m_pad * k_pad / 8,
                    int(n_tokens), int(k_pad)};
  if (bf16) {
    launch(ctx.stream(), convert_x_kernel<true>, ceil_div(cp.n_vec, 256), 256, 0, cp);
  } else {
    launch(ctx.stream(), convert_x_kernel<false>, ceil_div(cp.n_vec, 256), 256, 0, cp);
  }
  CERA_CUDA_LAUNCHED();

  const bool plain = dtype_block_size(weight.dtype) == 1;
  GemmQParams p{};
  p.w = qweight_of(weight.dtype, weight.data, n_in, n_out, plain ? weight.stride() : 0);
  p.x = reinterpret_cast<const __half*>(xh);
  p.out = reinterpret_cast<float*>(out.data);
  p.out_stride = out.stride() / 4;
  p.bias = bias != nullptr ? reinterpret_cast<const float*>(bias->data) : nullptr;
  p.n_in = n_in;
  p.n_tokens = int(n_tokens);
  p.n_out = int(n_out);
  p.k_pad = int(k_pad);
  p.out_pairs = p.out_stride % 2 == 0 && reinterpret_cast<uintptr_t>(out.data) % 8 == 0;
  const bool wg = use_wgmma();
  const GemmKernel k = wg ? kernel_of<true>(weight.dtype) : kernel_of<false>(weight.dtype);
  allow_smem(weight.dtype, wg, k);
  const dim3 grid(unsigned(m_pad / kBM), ceil_div(n_out, kBN));
  launch(ctx.stream(), k, grid, kThreads, wg ? kWgSmemBytes : kSmemBytes, p);
  CERA_CUDA_LAUNCHED();
}

void gemm_q_decode_chunk_host(DType t, const QWeight& w, int64_t row, int64_t j, int64_t n_in, float (&out)[32]) {
  switch (t) {
    case DType::kF16: return decode_host<DType::kF16>(w, row, j, n_in, out);
    case DType::kBF16: return decode_host<DType::kBF16>(w, row, j, n_in, out);
    case DType::kQ4_0: return decode_host<DType::kQ4_0>(w, row, j, n_in, out);
    case DType::kQ4_1: return decode_host<DType::kQ4_1>(w, row, j, n_in, out);
    case DType::kQ5_0: return decode_host<DType::kQ5_0>(w, row, j, n_in, out);
    case DType::kQ5_1: return decode_host<DType::kQ5_1>(w, row, j, n_in, out);
    case DType::kQ8_0: return decode_host<DType::kQ8_0>(w, row, j, n_in, out);
    case DType::kQ4_K: return decode_host<DType::kQ4_K>(w, row, j, n_in, out);
    case DType::kQ5_K: return decode_host<DType::kQ5_K>(w, row, j, n_in, out);
    case DType::kQ6_K: return decode_host<DType::kQ6_K>(w, row, j, n_in, out);
    default: CERA_CHECK_MSG(false, "gemm_q: no decoder for this type");
  }
}

}  // namespace cera::ops::cuda
