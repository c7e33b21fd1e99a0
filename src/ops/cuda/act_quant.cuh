// Device helpers shared by the activation quantizer (gemv.cu) and the kernels that fuse it into
// the verb producing the activation (fused.cu): one function, so both write identical codes.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace cera::ops::cuda {

// Q8_0 like quant::quantize_activation_row, one warp per 32-element block (lane = element):
// d = max|x| / 127, codes round-half-away(clamp(x * (1 / d))), d stored as fp16, plus the code sum.
__device__ __forceinline__ void quantize_q8_0_lane(float v, int8_t* q, float2* ds) {
  const int lane = threadIdx.x & 31;
  float amax = fabsf(v);
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float c = fmaxf(-127.0f, fminf(127.0f, __fmul_rn(v, id)));
  const int qi = c == c ? int(roundf(c)) : 0;
  int sum = qi;
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  q[lane] = int8_t(qi);
  if (lane == 0) *ds = make_float2(__half2float(__float2half_rn(d)), float(sum));
}

// The gated FFN's activation, act(gate) * up, as every kernel computing it writes it (the
// elementwise verb, the fused activation + quantization, the streaming GEMV's gated epilogue).
__device__ __forceinline__ float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x)));
}
__device__ __forceinline__ float silu_gated(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

// Element conversions of cache rows (F32 or F16; float -> half rounds to nearest even like the
// CPU's float_to_half).
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
template <class T>
__device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(x);
  } else {
    return x;
  }
}

// RoPE of one head in place: pair i (i < n_rot / 2) rotated by pos * scale * base^(-2i/n_rot)
// (divided by factors[i]); angles in double like the CPU reference. T: float, or __half (cache
// rows of kv_rerotate: the pair is rotated in float and rounded back).
struct RopeMath {
  const float* freq_factors;  // [n_rot / 2] or null
  int32_t n_rot;
  float freq_base, freq_scale;
  bool neox;
};
// The (cos, sin) of pair i at position pos.
__device__ __forceinline__ float2 rope_angle(const RopeMath& r, int i, int32_t pos) {
  double theta = double(pos) * r.freq_scale * pow(double(r.freq_base), -2.0 * double(i) / r.n_rot);
  if (r.freq_factors != nullptr) theta /= r.freq_factors[i];
  return make_float2(float(cos(theta)), float(sin(theta)));
}

// Rotates pair i of one head by the angle cs = rope_angle(r, i, pos).
template <class T>
__device__ __forceinline__ void rope_pair(const RopeMath& r, T* x, int i, float2 cs) {
  const int stride = r.neox ? 1 : 2, partner = r.neox ? r.n_rot / 2 : 1;
  T* a = x + i * stride;
  const float x0 = to_float(a[0]), x1 = to_float(a[partner]);
  a[0] = from_float<T>(x0 * cs.x - x1 * cs.y);
  a[partner] = from_float<T>(x0 * cs.y + x1 * cs.x);
}

// A thread's angles of its first kRopeAhead pairs of a head (i = threadIdx.x + k blockDim.x),
// computed ahead: they depend on the position alone, which the host uploads, so a kernel computes
// them before its PDL wait. The double-precision pow, cos and sin are the longest part of a decode
// step's RoPE kernel; computed after the wait they lay on the step's critical path once a layer.
constexpr int kRopeAhead = 4;
struct RopeAngles {
  float2 cs[kRopeAhead];
};
__device__ __forceinline__ RopeAngles rope_angles(const RopeMath& r, int32_t pos) {
  RopeAngles a;
#pragma unroll
  for (int k = 0; k < kRopeAhead; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    a.cs[k] = i < r.n_rot / 2 ? rope_angle(r, i, pos) : make_float2(1.0f, 0.0f);
  }
  return a;
}

// Rotates one head: the first kRopeAhead pairs of the thread by the angles computed ahead, any
// further ones (n_rot > 2 kRopeAhead blockDim.x) by angles computed here.
template <class T>
__device__ __forceinline__ void rope_head(const RopeMath& r, T* x, int32_t pos, const RopeAngles& a) {
#pragma unroll
  for (int k = 0; k < kRopeAhead; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < r.n_rot / 2) rope_pair(r, x, i, a.cs[k]);
  }
  for (int i = threadIdx.x + kRopeAhead * blockDim.x; i < r.n_rot / 2; i += blockDim.x) {
    rope_pair(r, x, i, rope_angle(r, i, pos));
  }
}

}  // namespace cera::ops::cuda
