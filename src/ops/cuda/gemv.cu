// GEMV for 1..16 tokens: one warp per weight row, every lane streaming 16-byte loads of codes
// (several units in flight per lane before the first use), dequantization fused into a dp4a dot
// with 8-bit activations, one pass over the weight for up to 8 tokens (16 tokens: two passes).
// Plain types (F32/F16/BF16) dot against float activations directly.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops/cuda/act_quant.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/quant_units.cuh"

namespace cera::ops::cuda {
namespace {

constexpr int kWarps = 4;           // rows per block
constexpr int kMaxTokensPass = 8;   // tokens per pass over the weight

// One weight of a launch: Q, K and V (gate and up) share the input and go in one launch of up
// to kMaxGemvParts parts, block ranges [first_block, next part's first_block). With the tail loads
// below: 1B Q4_0 decode 939 -> 1,102 t/s, 8B Q4_0 307 -> 352 (H200): the K/V GEMVs alone filled
// under one block per SM.
struct GemvPart {
  QWeight w;
  float* out;            // token t, row r at out[t * out_stride + r]
  int64_t out_stride;    // floats
  const float* bias;     // [n_out] or null
  int64_t n_out;
  int64_t first_block;
};

struct GemvParams {
  GemvPart part[kMaxGemvParts];
  int32_t n_parts;
  const int8_t* xq;      // quantized activations: token t at xq + t * n_in
  const float2* xds;     // token t at xds + t * n_in / 32
  const float* xf;       // float activations (plain weights): token t at xf + t * xf_stride
  int64_t xf_stride;     // floats
  int64_t n_in;
  int64_t units_per_row;
};

__device__ __forceinline__ const GemvPart& part_of(const GemvParams& p) {
  int i = 0;
  if (p.n_parts > 1 && blockIdx.x >= p.part[1].first_block) i = 1;
  if (p.n_parts > 2 && blockIdx.x >= p.part[2].first_block) i = 2;
  return p.part[i];
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <int B>
__device__ __forceinline__ void store_rows(const GemvPart& p, int64_t row, float (&acc)[B]) {
  const int lane = threadIdx.x & 31;
  for (int t = 0; t < B; ++t) {
    const float v = warp_sum(acc[t]);
    if (lane == 0) p.out[t * p.out_stride + row] = v + (p.bias != nullptr ? p.bias[row] : 0.0f);
  }
}

template <DType T, int B>
__global__ void __launch_bounds__(kWarps * 32) gemv_q_kernel(const __grid_constant__ GemvParams p) {
  using U = Unit<T>;
  constexpr int kUnroll = U::kElems == 32 ? 4 : 2;  // units in flight per lane
  const int lane = threadIdx.x & 31;
  const GemvPart& P = part_of(p);
  const int64_t row = (int64_t(blockIdx.x) - P.first_block) * kWarps + threadIdx.x / 32;
  if (row >= P.n_out) return;
  const int64_t nu = p.units_per_row, base = row * nu;
  ActRow x[B];
  for (int t = 0; t < B; ++t) x[t] = {p.xq + t * p.n_in, p.xds + t * (p.n_in / 32)};
  float acc[B] = {};
  int64_t u = lane;
  for (; u + 32 * (kUnroll - 1) < nu; u += 32 * kUnroll) {
    typename U::Raw r[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) r[k] = U::load(P.w, base + u + 32 * k);
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
#pragma unroll
      for (int t = 0; t < B; ++t) acc[t] += U::dot(r[k], x[t], u + 32 * k);
    }
  }
  // Tail: all of this lane's remaining units loaded before the first dot (short rows, e.g.
  // n_in = 2048, are all tail: 2 loads in flight per lane instead of 1).
  if (u < nu) {
    typename U::Raw r[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      if (u + 32 * k < nu) r[k] = U::load(P.w, base + u + 32 * k);
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      if (u + 32 * k < nu) {
#pragma unroll
        for (int t = 0; t < B; ++t) acc[t] += U::dot(r[k], x[t], u + 32 * k);
      }
    }
  }
  store_rows<B>(P, row, acc);
}

// kVec weights per lane step: 16 bytes' worth when rows are 16-byte aligned, else 1.
template <DType T, int kVec>
__device__ __forceinline__ void load_plain(const uint8_t* row, int64_t i, float (&w)[kVec]) {
  if constexpr (T == DType::kF32) {
    if constexpr (kVec == 4) {
      const float4 v = __ldg(reinterpret_cast<const float4*>(row) + i);
      w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
    } else {
      w[0] = __ldg(reinterpret_cast<const float*>(row) + i);
    }
  } else if constexpr (kVec == 8) {
    const uint4 v = ld16(row + i * 16);
    for (int k = 0; k < 4; ++k) {
      const uint32_t x = word(v, k);
      if constexpr (T == DType::kF16) {
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&x));
        w[2 * k] = f.x; w[2 * k + 1] = f.y;
      } else {
        w[2 * k] = __uint_as_float(x << 16); w[2 * k + 1] = __uint_as_float(x & 0xFFFF0000u);
      }
    }
  } else {
    const uint16_t h = __ldg(reinterpret_cast<const unsigned short*>(row) + i);
    w[0] = T == DType::kF16 ? __half2float(__ushort_as_half(h)) : __uint_as_float(uint32_t(h) << 16);
  }
}

template <DType T, int B, int kVec>
__global__ void __launch_bounds__(kWarps * 32) gemv_f_kernel(const __grid_constant__ GemvParams p) {
  const int lane = threadIdx.x & 31;
  const GemvPart& P = part_of(p);
  const int64_t row = (int64_t(blockIdx.x) - P.first_block) * kWarps + threadIdx.x / 32;
  if (row >= P.n_out) return;
  const uint8_t* wrow = P.w.r0 + row * P.w.row_stride;
  const int64_t nu = p.n_in / kVec;
  float acc[B] = {};
#pragma unroll 4  // 4 independent 16-byte weight loads in flight per lane
  for (int64_t u = lane; u < nu; u += 32) {
    float w[kVec];
    load_plain<T, kVec>(wrow, u, w);
#pragma unroll
    for (int t = 0; t < B; ++t) {
      const float* x = p.xf + t * p.xf_stride + u * kVec;
      if constexpr (kVec == 1) {
        acc[t] += w[0] * __ldg(x);
      } else {
#pragma unroll
        for (int k = 0; k < kVec; k += 4) {
          const float4 v = __ldg(reinterpret_cast<const float4*>(x + k));
          acc[t] += w[k] * v.x + w[k + 1] * v.y + w[k + 2] * v.z + w[k + 3] * v.w;
        }
      }
    }
  }
  store_rows<B>(P, row, acc);
}

struct QuantizeActParams {
  const float* x;
  int64_t x_stride;  // floats
  int8_t* q;
  float2* ds;
  int64_t n_in;
};

// Q8_0 like quant::quantize_activation_row: one warp per 32-element block, d = max|x| / 127,
// codes round-half-away(clamp(x * (1 / d))), d stored as fp16.
__global__ void quantize_q8_0_kernel(const __grid_constant__ QuantizeActParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t blk = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int64_t t = blockIdx.y;
  if (blk * 32 >= p.n_in) return;
  const float v = p.x[t * p.x_stride + blk * 32 + lane];
  quantize_q8_0_lane(v, p.q + t * p.n_in + blk * 32, p.ds + t * (p.n_in / 32) + blk);
}

// Q8_K like the CPU reference: one warp per 256 elements (8 per lane); the signed value of
// largest magnitude (the first on ties) maps to -127, codes round half to even, d = 1 / iscale.
__global__ void quantize_q8_k_kernel(const __grid_constant__ QuantizeActParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t blk = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int64_t t = blockIdx.y;
  if (blk * 256 >= p.n_in) return;
  const float* x = p.x + t * p.x_stride + blk * 256 + lane * 8;
  float v[8], amax = 0.0f, max = 0.0f;
  int idx = 1 << 30;
  for (int i = 0; i < 8; ++i) {
    v[i] = x[i];
    if (amax < fabsf(v[i])) {
      amax = fabsf(v[i]);
      max = v[i];
      idx = lane * 8 + i;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float oa = __shfl_xor_sync(0xffffffffu, amax, o), om = __shfl_xor_sync(0xffffffffu, max, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (oa > amax || (oa == amax && oi < idx)) {
      amax = oa;
      max = om;
      idx = oi;
    }
  }
  const float iscale = max != 0.0f ? -127.0f / max : 0.0f;
  int sum = 0;
  uint32_t packed[2] = {0, 0};
  for (int i = 0; i < 8; ++i) {
    const float c = __fmul_rn(iscale, v[i]);
    const int qi = c == c ? int(rintf(fmaxf(-127.0f, fminf(127.0f, c)))) : 0;
    packed[i / 4] |= (uint32_t(qi) & 0xFFu) << (8 * (i % 4));
    sum += qi;
  }
  *reinterpret_cast<uint2*>(p.q + t * p.n_in + blk * 256 + lane * 8) = make_uint2(packed[0], packed[1]);
  // Lanes 4k..4k+3 hold the 32 codes of sub-block k.
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  if ((lane & 3) == 0) {
    p.ds[t * (p.n_in / 32) + blk * 8 + lane / 4] = make_float2(iscale != 0.0f ? 1.0f / iscale : 0.0f, float(sum));
  }
}

using GemvKernel = void (*)(GemvParams);

template <DType T, int B>
GemvKernel pick_b(int64_t vec) {
  if constexpr (T == DType::kF32 || T == DType::kF16 || T == DType::kBF16) {
    constexpr int kWide = T == DType::kF32 ? 4 : 8;
    return vec == 1 ? gemv_f_kernel<T, B, 1> : gemv_f_kernel<T, B, kWide>;
  } else {
    return gemv_q_kernel<T, B>;
  }
}

// Kernel for 1..8 tokens; instantiated configurations: every supported type x B in 1..8.
template <DType T>
GemvKernel pick(int b, int64_t vec) {
  switch (b) {
#define CERA_GEMV_CASE(N) \
    case N: return pick_b<T, N>(vec);
    CERA_GEMV_CASE(1) CERA_GEMV_CASE(2) CERA_GEMV_CASE(3) CERA_GEMV_CASE(4)
    CERA_GEMV_CASE(5) CERA_GEMV_CASE(6) CERA_GEMV_CASE(7) CERA_GEMV_CASE(8)
#undef CERA_GEMV_CASE
    default: return nullptr;
  }
}

GemvKernel pick_kernel(DType t, int b, int64_t vec) {
  switch (t) {
    case DType::kF32: return pick<DType::kF32>(b, vec);
    case DType::kF16: return pick<DType::kF16>(b, vec);
    case DType::kBF16: return pick<DType::kBF16>(b, vec);
    case DType::kQ4_0: return pick<DType::kQ4_0>(b, vec);
    case DType::kQ4_1: return pick<DType::kQ4_1>(b, vec);
    case DType::kQ5_0: return pick<DType::kQ5_0>(b, vec);
    case DType::kQ5_1: return pick<DType::kQ5_1>(b, vec);
    case DType::kQ8_0: return pick<DType::kQ8_0>(b, vec);
    case DType::kQ4_K: return pick<DType::kQ4_K>(b, vec);
    case DType::kQ5_K: return pick<DType::kQ5_K>(b, vec);
    case DType::kQ6_K: return pick<DType::kQ6_K>(b, vec);
    default: return nullptr;
  }
}

}  // namespace

ActQ8 act_q8_scratch(CudaContext& ctx, int64_t n_tokens, int64_t n_in) {
  auto* q = static_cast<int8_t*>(ctx.scratch(ScratchKind::kActQ8, uint64_t(n_tokens) * n_in * 5 / 4 + 256));
  return {q, reinterpret_cast<float2*>(q + ((n_tokens * n_in + 255) & ~int64_t{255}))};
}

bool gemv_takes_q8_0(const TensorView& weight, int64_t n_tokens) {
  return n_tokens <= kGemvMaxTokens && dtype_block_size(weight.dtype) == 32;
}

void gemv(CudaContext& ctx, const TensorView& out, const TensorView& weight, const TensorView& x,
          const TensorView* bias) {
  const GemvTarget one{out, weight, bias};
  gemv_parts(ctx, x, std::span(&one, 1));
}

void gemv_parts(CudaContext& ctx, const TensorView& x, std::span<const GemvTarget> parts) {
  CERA_CHECK(!parts.empty() && parts.size() <= size_t(kMaxGemvParts));
  const TensorView& weight = parts[0].weight;
  const int64_t n_in = weight.cols(), n_tokens = x.rows();
  const DType t = weight.dtype;
  const bool plain = dtype_block_size(t) == 1;
  GemvParams p{};
  p.n_parts = int32_t(parts.size());
  int64_t blocks = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const GemvTarget& g = parts[i];
    CERA_CHECK(g.weight.dtype == t && g.weight.cols() == n_in);
    GemvPart& q = p.part[i];
    q.w = qweight_of(t, g.weight.data, n_in, g.weight.rows(), g.weight.stride());
    q.n_out = g.weight.rows();
    q.out_stride = g.out.stride() / 4;
    q.bias = g.bias != nullptr ? reinterpret_cast<const float*>(g.bias->data) : nullptr;
    q.first_block = blocks;
    blocks += ceil_div(q.n_out, kWarps);
  }
  p.n_in = n_in;
  int64_t vec = 1;
  if (plain) {
    const int64_t wide = t == DType::kF32 ? 4 : 8;
    bool aligned = n_in % wide == 0 && x.stride() % 16 == 0 && reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
    for (const GemvTarget& g : parts) {
      aligned = aligned && g.weight.stride() % 16 == 0 && reinterpret_cast<uintptr_t>(g.weight.data) % 16 == 0;
    }
    vec = aligned ? wide : 1;
    p.xf_stride = x.stride() / 4;
  } else {
    p.units_per_row = n_in / (dtype_block_size(t) == 32 ? 32 : 64);
    const auto [q, ds] = act_q8_scratch(ctx, n_tokens, n_in);
    if (!ctx.launching()) return;
    const int64_t act_block = dtype_block_size(t) == 32 ? 32 : 256;
    QuantActCache& cache = ctx.act_cache();
    // Q/K/V (and gate/up) quantize their shared input once: 2 of 3 (1 of 2) launches saved.
    if (!cache.matches(x.data, x.stride(), n_in, n_tokens, act_block)) {
      QuantizeActParams qp{reinterpret_cast<const float*>(x.data), x.stride() / 4, q, ds, n_in};
      const dim3 grid(ceil_div(n_in / act_block, 8), unsigned(n_tokens));
      if (act_block == 32) {
        quantize_q8_0_kernel<<<grid, 256, 0, ctx.stream()>>>(qp);
      } else {
        quantize_q8_k_kernel<<<grid, 256, 0, ctx.stream()>>>(qp);
      }
      CERA_CUDA_LAUNCHED();
      cache = {x.data, x.stride(), n_in, n_tokens, act_block};
    }
    p.xq = q;
    p.xds = ds;
  }
  if (!ctx.launching()) return;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kMaxTokensPass) {
    const int b = int(std::min<int64_t>(kMaxTokensPass, n_tokens - t0));
    GemvParams pp = p;
    for (size_t i = 0; i < parts.size(); ++i) pp.part[i].out = reinterpret_cast<float*>(parts[i].out.row(t0));
    if (plain) {
      pp.xf = reinterpret_cast<const float*>(x.row(t0));
    } else {
      pp.xq = p.xq + t0 * n_in;
      pp.xds = p.xds + t0 * (n_in / 32);
    }
    const GemvKernel k = pick_kernel(t, b, vec);
    CERA_CHECK_MSG(k != nullptr, "gemv: no kernel for " + std::string(dtype_name(t)));
    k<<<unsigned(blocks), kWarps * 32, 0, ctx.stream()>>>(pp);
    CERA_CUDA_LAUNCHED();
  }
}

}  // namespace cera::ops::cuda
