// Device-side decoding of the weight formats in their GPU layout (weight_layout.h), in two
// shapes: a GEMV "unit" (the codes one lane reads per step, dotted with 8-bit activations by
// dp4a) and dequant32 (32 consecutive weights as floats, for embed and the cuBLAS path).
// Activations for the dp4a path: per token, int8 codes xq[n_in] and per 32 elements
// xds = (d, sum of the 32 codes), quantized exactly like the CPU reference (Q8_0 for the 32-element
// weight blocks, Q8_K with one d per 256 elements for the K-quants), so every block's integer dot
// equals the CPU's and the two backends differ only in the float summation order (greedy decoding
// then agrees token for token). The code sums serve the weights' offsets and minimums.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "core/dtype.h"
#include "ops/cuda/weight_layout.h"

namespace cera::ops::cuda {

constexpr uint32_t kLow4 = 0x0F0F0F0Fu;

__device__ __forceinline__ uint4 ld16(const void* p) { return __ldg(static_cast<const uint4*>(p)); }
// Weight codes are read once per GEMV: bypass L1 so the activations (re-read by every row) keep it.
__device__ __forceinline__ uint4 ld16_stream(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}
__device__ __forceinline__ float f16(const uint8_t* p) {
  return __half2float(__ldg(reinterpret_cast<const __half*>(p)));
}
// Bit k (k < 4) of x moved to bit 4 of byte k: the fifth bits of Q5_0/Q5_1 codes.
__device__ __forceinline__ uint32_t spread4(uint32_t x) { return ((x & 0xF) * 0x02040810u) & 0x10101010u; }

// sum over 16 int8 pairs: 4 dp4a.
__device__ __forceinline__ int dot16(const uint32_t (&w)[4], const uint4& x, int acc) {
  acc = __dp4a(int(w[0]), int(x.x), acc);
  acc = __dp4a(int(w[1]), int(x.y), acc);
  acc = __dp4a(int(w[2]), int(x.z), acc);
  return __dp4a(int(w[3]), int(x.w), acc);
}

struct ActRow {
  const int8_t* q;    // [n_in] codes, 16-byte aligned
  const float2* ds;   // [n_in / 32] (d, sum of the block's codes)
};

// One 32-element activation block, loaded once and dotted with several weight rows (the
// multi-row GEMV): codes and (d, code sum).
struct XUnit {
  uint4 lo, hi;
  float2 ds;
};
__device__ __forceinline__ XUnit load_x(const ActRow& x, int64_t u) {
  return {ld16(x.q + u * 32), ld16(x.q + u * 32 + 16), __ldg(x.ds + u)};
}

template <DType T>
struct Unit;

// ---- legacy 32-element blocks: one unit = one block ----------------------------------------
template <>
struct Unit<DType::kQ4_0> {
  static constexpr int kElems = 32;
  static constexpr int kCodeBytes = 16;  // bytes per unit in plane r0 (a row's units are contiguous)
  struct Raw { uint4 qs; float d; };
  __device__ static Raw load(const QWeight& w, int64_t b) { return {ld16(w.r0 + b * 16), f16(w.r1 + b * 2)}; }
  __device__ static Raw load_stream(const QWeight& w, int64_t b) {
    return {ld16_stream(w.r0 + b * 16), f16(w.r1 + b * 2)};
  }
  __device__ static float dotx(const Raw& r, const XUnit& x) {
    uint32_t lo[4], hi[4];
    for (int i = 0; i < 4; ++i) { lo[i] = word(r.qs, i) & kLow4; hi[i] = (word(r.qs, i) >> 4) & kLow4; }
    const int s = dot16(hi, x.hi, dot16(lo, x.lo, 0));
    return r.d * x.ds.x * float(s - 8 * int(x.ds.y));
  }
  __device__ static float dot(const Raw& r, const ActRow& x, int64_t u) { return dotx(r, load_x(x, u)); }
};

template <>
struct Unit<DType::kQ4_1> {
  static constexpr int kElems = 32;
  static constexpr int kCodeBytes = 16;  // bytes per unit in plane r0 (a row's units are contiguous)
  struct Raw { uint4 qs; float d, m; };
  __device__ static Raw load(const QWeight& w, int64_t b) {
    const __half2 dm = __ldg(reinterpret_cast<const __half2*>(w.r1) + b);
    return {ld16(w.r0 + b * 16), __low2float(dm), __high2float(dm)};
  }
  __device__ static Raw load_stream(const QWeight& w, int64_t b) {
    const __half2 dm = __ldg(reinterpret_cast<const __half2*>(w.r1) + b);
    return {ld16_stream(w.r0 + b * 16), __low2float(dm), __high2float(dm)};
  }
  __device__ static float dotx(const Raw& r, const XUnit& x) {
    uint32_t lo[4], hi[4];
    for (int i = 0; i < 4; ++i) { lo[i] = word(r.qs, i) & kLow4; hi[i] = (word(r.qs, i) >> 4) & kLow4; }
    const int s = dot16(hi, x.hi, dot16(lo, x.lo, 0));
    return r.d * x.ds.x * float(s) + r.m * x.ds.x * x.ds.y;
  }
  __device__ static float dot(const Raw& r, const ActRow& x, int64_t u) { return dotx(r, load_x(x, u)); }
};

// Q5_0 / Q5_1 share the code assembly; kOffset is 16 for Q5_0 (signed codes) and 0 for Q5_1.
__device__ __forceinline__ int dot_q5(const uint4& qs, uint32_t qh, const uint4& x0, const uint4& x1) {
  uint32_t lo[4], hi[4];
  for (int i = 0; i < 4; ++i) {
    lo[i] = (word(qs, i) & kLow4) | spread4(qh >> (4 * i));
    hi[i] = ((word(qs, i) >> 4) & kLow4) | spread4(qh >> (16 + 4 * i));
  }
  return dot16(hi, x1, dot16(lo, x0, 0));
}

template <>
struct Unit<DType::kQ5_0> {
  static constexpr int kElems = 32;
  static constexpr int kCodeBytes = 16;  // bytes per unit in plane r0 (a row's units are contiguous)
  struct Raw { uint4 qs; uint32_t qh; float d; };
  __device__ static Raw load(const QWeight& w, int64_t b) {
    return {ld16(w.r0 + b * 16), __ldg(reinterpret_cast<const uint32_t*>(w.r1) + b), f16(w.r2 + b * 2)};
  }
  __device__ static Raw load_stream(const QWeight& w, int64_t b) {
    return {ld16_stream(w.r0 + b * 16), __ldg(reinterpret_cast<const uint32_t*>(w.r1) + b), f16(w.r2 + b * 2)};
  }
  __device__ static float dotx(const Raw& r, const XUnit& x) {
    return r.d * x.ds.x * float(dot_q5(r.qs, r.qh, x.lo, x.hi) - 16 * int(x.ds.y));
  }
  __device__ static float dot(const Raw& r, const ActRow& x, int64_t u) { return dotx(r, load_x(x, u)); }
};

template <>
struct Unit<DType::kQ5_1> {
  static constexpr int kElems = 32;
  static constexpr int kCodeBytes = 16;  // bytes per unit in plane r0 (a row's units are contiguous)
  struct Raw { uint4 qs; uint32_t qh; float d, m; };
  __device__ static Raw load(const QWeight& w, int64_t b) {
    const __half2 dm = __ldg(reinterpret_cast<const __half2*>(w.r2) + b);
    return {ld16(w.r0 + b * 16), __ldg(reinterpret_cast<const uint32_t*>(w.r1) + b), __low2float(dm),
            __high2float(dm)};
  }
  __device__ static Raw load_stream(const QWeight& w, int64_t b) {
    const __half2 dm = __ldg(reinterpret_cast<const __half2*>(w.r2) + b);
    return {ld16_stream(w.r0 + b * 16), __ldg(reinterpret_cast<const uint32_t*>(w.r1) + b), __low2float(dm),
            __high2float(dm)};
  }
  __device__ static float dotx(const Raw& r, const XUnit& x) {
    return r.d * x.ds.x * float(dot_q5(r.qs, r.qh, x.lo, x.hi)) + r.m * x.ds.x * x.ds.y;
  }
  __device__ static float dot(const Raw& r, const ActRow& x, int64_t u) { return dotx(r, load_x(x, u)); }
};

template <>
struct Unit<DType::kQ8_0> {
  static constexpr int kElems = 32;
  static constexpr int kCodeBytes = 32;  // bytes per unit in plane r0 (a row's units are contiguous)
  struct Raw { uint4 q0, q1; float d; };
  __device__ static Raw load(const QWeight& w, int64_t b) {
    return {ld16(w.r0 + b * 32), ld16(w.r0 + b * 32 + 16), f16(w.r1 + b * 2)};
  }
  __device__ static Raw load_stream(const QWeight& w, int64_t b) {
    return {ld16_stream(w.r0 + b * 32), ld16_stream(w.r0 + b * 32 + 16), f16(w.r1 + b * 2)};
  }
  __device__ static float dotx(const Raw& r, const XUnit& x) {
    const uint32_t a[4] = {r.q0.x, r.q0.y, r.q0.z, r.q0.w}, b[4] = {r.q1.x, r.q1.y, r.q1.z, r.q1.w};
    const int s = dot16(b, x.hi, dot16(a, x.lo, 0));
    return r.d * x.ds.x * float(s);
  }
  __device__ static float dot(const Raw& r, const ActRow& x, int64_t u) { return dotx(r, load_x(x, u)); }
};

// ---- K-quants: one unit = 64 elements, four units per 256-element super-block ---------------
// Byte k (< 12) of the packed scales held in words y, z, w of a block header.
__device__ __forceinline__ int scale_byte(const uint4& hdr, int k) {
  const uint32_t v = k < 4 ? hdr.y : (k < 8 ? hdr.z : hdr.w);
  return int((v >> (8 * (k & 3))) & 0xFF);
}
// Scale and min s (0..7) of Q4_K / Q5_K (scale_pack.h).
__device__ __forceinline__ int2 scale_min_k4(const uint4& hdr, int s) {
  if (s < 4) return {scale_byte(hdr, s) & 63, scale_byte(hdr, s + 4) & 63};
  return {(scale_byte(hdr, s + 4) & 0xF) | ((scale_byte(hdr, s - 4) >> 6) << 4),
          (scale_byte(hdr, s + 4) >> 4) | ((scale_byte(hdr, s) >> 6) << 4)};
}

// Sub-blocks 2r (low nibbles) and 2r+1 (high nibbles), codes already assembled; x at 64-element run.
__device__ __forceinline__ float combine_k4(const uint4& hdr, int r, int dot_lo, int dot_hi, const ActRow& x,
                                            int64_t xb) {
  const __half2 dm = *reinterpret_cast<const __half2*>(&hdr.x);
  const int2 sm0 = scale_min_k4(hdr, 2 * r), sm1 = scale_min_k4(hdr, 2 * r + 1);
  // Both sub-blocks lie in one Q8_K block: one activation scale (a.x == c.x).
  const float2 a = __ldg(x.ds + xb), c = __ldg(x.ds + xb + 1);
  const int isum = sm0.x * dot_lo + sm1.x * dot_hi, imin = sm0.y * int(a.y) + sm1.y * int(c.y);
  return a.x * (__low2float(dm) * float(isum) - __high2float(dm) * float(imin));
}

template <>
struct Unit<DType::kQ4_K> {
  static constexpr int kElems = 64;
  static constexpr int kCodeBytes = 36;  // bytes per unit in plane r0 (a row's units are contiguous)
  struct Raw { uint4 hdr, qa, qb; int r; };
  __device__ static Raw load(const QWeight& w, int64_t u) {
    const uint8_t* blk = w.r0 + (u >> 2) * 144;
    const int r = int(u & 3);
    return {ld16(blk), ld16(blk + 16 + 32 * r), ld16(blk + 32 + 32 * r), r};
  }
  __device__ static float dot(const Raw& q, const ActRow& x, int64_t u) {
    const int8_t* xq = x.q + u * 64;
    const uint4 xa0 = ld16(xq), xa1 = ld16(xq + 16), xb0 = ld16(xq + 32), xb1 = ld16(xq + 48);
    uint32_t la[4], lb[4], ha[4], hb[4];
    for (int i = 0; i < 4; ++i) {
      la[i] = word(q.qa, i) & kLow4; ha[i] = (word(q.qa, i) >> 4) & kLow4;
      lb[i] = word(q.qb, i) & kLow4; hb[i] = (word(q.qb, i) >> 4) & kLow4;
    }
    const int dlo = dot16(lb, xa1, dot16(la, xa0, 0)), dhi = dot16(hb, xb1, dot16(ha, xb0, 0));
    return combine_k4(q.hdr, q.r, dlo, dhi, x, u * 2);
  }
};

template <>
struct Unit<DType::kQ5_K> {
  static constexpr int kElems = 64;
  static constexpr int kCodeBytes = 44;  // bytes per unit in plane r0 (a row's units are contiguous)
  struct Raw { uint4 hdr, qa, qb, qh0, qh1; int r; };
  __device__ static Raw load(const QWeight& w, int64_t u) {
    const uint8_t* blk = w.r0 + (u >> 2) * 176;
    const int r = int(u & 3);
    return {ld16(blk), ld16(blk + 48 + 32 * r), ld16(blk + 64 + 32 * r), ld16(blk + 16), ld16(blk + 32), r};
  }
  __device__ static float dot(const Raw& q, const ActRow& x, int64_t u) {
    const int8_t* xq = x.q + u * 64;
    const uint4 xa0 = ld16(xq), xa1 = ld16(xq + 16), xb0 = ld16(xq + 32), xb1 = ld16(xq + 48);
    const int s0 = 2 * q.r, s1 = 2 * q.r + 1;
    uint32_t la[4], lb[4], ha[4], hb[4];
    for (int i = 0; i < 4; ++i) {
      const uint32_t h0 = word(q.qh0, i), h1 = word(q.qh1, i);
      la[i] = (word(q.qa, i) & kLow4) | (((h0 >> s0) & 0x01010101u) << 4);
      ha[i] = ((word(q.qa, i) >> 4) & kLow4) | (((h0 >> s1) & 0x01010101u) << 4);
      lb[i] = (word(q.qb, i) & kLow4) | (((h1 >> s0) & 0x01010101u) << 4);
      hb[i] = ((word(q.qb, i) >> 4) & kLow4) | (((h1 >> s1) & 0x01010101u) << 4);
    }
    const int dlo = dot16(lb, xa1, dot16(la, xa0, 0)), dhi = dot16(hb, xb1, dot16(ha, xb0, 0));
    return combine_k4(q.hdr, q.r, dlo, dhi, x, u * 2);
  }
};

// Q6_K unit (h, half) of a super-block: elements [128h + 32half, +32) ("A", low nibbles) and
// [128h + 64 + 32half, +32) ("B", high nibbles); both read qh[32h .. 32h+31].
template <>
struct Unit<DType::kQ6_K> {
  static constexpr int kElems = 64;
  static constexpr int kCodeBytes = 52;  // bytes per unit in plane r0 (a row's units are contiguous)
  struct Raw { uint4 la, lb, h0, h1; int sc[4]; float d; int sel; };
  __device__ static Raw load(const QWeight& w, int64_t u) {
    const int64_t b = u >> 2;
    const uint8_t* blk = w.r0 + b * 208;
    const int h = int(u & 3) >> 1, half = int(u & 1);
    const auto* sc = reinterpret_cast<const int8_t*>(blk + 192);
    const int sa = 8 * h + 2 * half, sb = sa + 4;
    Raw r;
    r.la = ld16(blk + 64 * h + 32 * half);
    r.lb = ld16(blk + 64 * h + 32 * half + 16);
    r.h0 = ld16(blk + 128 + 32 * h);
    r.h1 = ld16(blk + 128 + 32 * h + 16);
    r.sc[0] = __ldg(sc + sa); r.sc[1] = __ldg(sc + sa + 1); r.sc[2] = __ldg(sc + sb); r.sc[3] = __ldg(sc + sb + 1);
    r.d = f16(w.r1 + b * 2);
    r.sel = int(u & 3);
    return r;
  }
  __device__ static float dot(const Raw& q, const ActRow& x, int64_t u) {
    const int h = q.sel >> 1, half = q.sel & 1;
    const int64_t ea = (u >> 2) * 256 + 128 * h + 32 * half, eb = ea + 64;
    const uint4 xa0 = ld16(x.q + ea), xa1 = ld16(x.q + ea + 16), xb0 = ld16(x.q + eb), xb1 = ld16(x.q + eb + 16);
    const int sha = 2 * half, shb = 2 * half + 4;
    uint32_t a0[4], a1[4], b0[4], b1[4];
    for (int i = 0; i < 4; ++i) {
      const uint32_t l0 = word(q.la, i), l1 = word(q.lb, i), g0 = word(q.h0, i), g1 = word(q.h1, i);
      a0[i] = __vsub4((l0 & kLow4) | (((g0 >> sha) & 0x03030303u) << 4), 0x20202020u);
      a1[i] = __vsub4((l1 & kLow4) | (((g1 >> sha) & 0x03030303u) << 4), 0x20202020u);
      b0[i] = __vsub4(((l0 >> 4) & kLow4) | (((g0 >> shb) & 0x03030303u) << 4), 0x20202020u);
      b1[i] = __vsub4(((l1 >> 4) & kLow4) | (((g1 >> shb) & 0x03030303u) << 4), 0x20202020u);
    }
    const float dx = __ldg(x.ds + ea / 32).x;  // one Q8_K scale for the super-block
    const int isum = q.sc[0] * dot16(a0, xa0, 0) + q.sc[1] * dot16(a1, xa1, 0) + q.sc[2] * dot16(b0, xb0, 0) +
                     q.sc[3] * dot16(b1, xb1, 0);
    return dx * q.d * float(isum);
  }
};

// ---- dequantization: 32 consecutive weights (chunk j of a row, j < n_in / 32) ---------------
template <DType T>
__device__ void dequant32(const QWeight& w, int64_t row, int64_t j, float (&out)[32]);

}  // namespace cera::ops::cuda

#include "ops/cuda/dequant32.cuh"
