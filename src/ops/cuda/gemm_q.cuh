// GemmChunk<T>: one 32-weight chunk (elements 32j .. 32j+31 of a row) of a weight in its GPU
// layout (weight_layout.h), loaded as raw words (load) and decoded into 16 packed f16 pairs
// (decode; bf16 pairs for BF16), the shape the tensor-core GEMM (gemm_q.cu) stages in shared
// memory. Decision: codes become halves by the exponent trick (0x6400 | c is the half 1024 + c),
// then one exact subtraction and one rounded multiply (or fma), so the 4- and 8-bit formats cost
// about three integer/half2 operations per pair and no int-to-float conversion. Both halves are
// __host__ __device__ so the decoders are checked against the CPU dequantizers on any machine.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "ops/cuda/weight_layout.h"

namespace cera::ops::cuda::qgemm {

struct U4 {
  uint32_t w[4];
};

__host__ __device__ __forceinline__ U4 ldg16(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
  return {{v.x, v.y, v.z, v.w}};
#else
  U4 v;
  std::memcpy(v.w, p, 16);
  return v;
#endif
}
__host__ __device__ __forceinline__ uint32_t ldg4(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const uint32_t*>(p));
#else
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}
__host__ __device__ __forceinline__ uint32_t ldg2(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const unsigned short*>(p));
#else
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
#endif
}

// Byte permute (PRMT): byte k of the result is byte s_k of the pair {x (0-3), y (4-7)}.
__host__ __device__ __forceinline__ uint32_t perm(uint32_t x, uint32_t y, uint32_t s) {
#ifdef __CUDA_ARCH__
  return __byte_perm(x, y, s);
#else
  const uint64_t v = uint64_t(x) | uint64_t(y) << 32;
  uint32_t r = 0;
  for (int k = 0; k < 4; ++k) r |= uint32_t((v >> (8 * ((s >> (4 * k)) & 7))) & 0xFF) << (8 * k);
  return r;
#endif
}
// Bytes 2p and 2p+1 of word w (p = 0, 1) moved to bits 0-7 and 16-23, the rest zero.
__host__ __device__ __forceinline__ uint32_t pair_bytes(uint32_t w, int p) {
  return perm(w, 0, p == 0 ? 0x4140u : 0x4342u);
}

__host__ __device__ __forceinline__ __half2 h2(uint32_t u) {
  __half2 h;
  std::memcpy(&h, &u, 4);
  return h;
}
__host__ __device__ __forceinline__ uint32_t u32(__half2 h) {
  uint32_t u;
  std::memcpy(&u, &h, 4);
  return u;
}
// The f16 held in the low 16 bits, in both halves.
__host__ __device__ __forceinline__ __half2 splat_bits(uint32_t bits) { return h2((bits & 0xFFFF) * 0x10001u); }
__host__ __device__ __forceinline__ __half2 splat(float f) {
  const __half h = __float2half_rn(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return splat_bits(b);
}
__host__ __device__ __forceinline__ float f16_bits(uint32_t bits) {
  __half_raw r;
  r.x = uint16_t(bits & 0xFFFF);
  return __half2float(__half(r));
}
__host__ __device__ __forceinline__ __half2 fma2(__half2 a, __half2 b, __half2 c) {
#ifdef __CUDA_ARCH__
  return __hfma2(a, b, c);
#else
  return __hadd2(__hmul2(a, b), c);
#endif
}
// 0x6400 | c as a half is 1024 + c (c < 1024).
constexpr uint32_t kMagic = 0x64006400u;
__host__ __device__ __forceinline__ uint32_t scaled(uint32_t codes, uint32_t bias_bits, __half2 d) {
  return u32(__hmul2(__hsub2(h2(codes | kMagic), splat_bits(bias_bits)), d));
}

template <DType T>
struct GemmChunk;

// Plain f16 / bf16: the 64 bytes themselves; chunks past n_in (n_in % 8 == 0) read as zeros.
template <DType T>
struct PlainChunk {
  struct Raw { uint32_t q[16]; };
  __host__ __device__ static Raw load(const QWeight& w, int64_t row, int64_t j, int64_t n_in) {
    Raw r;
    const uint8_t* p = w.r0 + row * w.row_stride + j * 64;
    for (int g = 0; g < 4; ++g) {
      const U4 v = 32 * j + 8 * g < n_in ? ldg16(p + 16 * g) : U4{{0, 0, 0, 0}};
      for (int i = 0; i < 4; ++i) r.q[4 * g + i] = v.w[i];
    }
    return r;
  }
  __host__ __device__ static void decode(const Raw& r, uint32_t (&out)[16]) {
    for (int i = 0; i < 16; ++i) out[i] = r.q[i];
  }
};
template <> struct GemmChunk<DType::kF16> : PlainChunk<DType::kF16> {};
template <> struct GemmChunk<DType::kBF16> : PlainChunk<DType::kBF16> {};

// Legacy blocks: qs byte i holds element i (low nibble) and i + 16 (high nibble), so pair p < 8
// is the low nibbles of bytes 2p, 2p+1 and pair p + 8 their high nibbles.
template <>
struct GemmChunk<DType::kQ4_0> {
  struct Raw { U4 qs; uint32_t d; };
  __host__ __device__ static Raw load(const QWeight& w, int64_t row, int64_t j, int64_t) {
    const int64_t b = row * w.blocks_per_row + j;
    return {ldg16(w.r0 + b * 16), ldg2(w.r1 + b * 2)};
  }
  __host__ __device__ static void decode(const Raw& r, uint32_t (&out)[16]) {
    const __half2 d = splat_bits(r.d);
    for (int k = 0; k < 4; ++k) {
      for (int p = 0; p < 2; ++p) {
        const uint32_t v = pair_bytes(r.qs.w[k], p);
        out[2 * k + p] = scaled(v & 0x000F000Fu, 0x6408, d);          // (1024 + c) - 1032
        out[8 + 2 * k + p] = scaled((v >> 4) & 0x000F000Fu, 0x6408, d);
      }
    }
  }
};

template <>
struct GemmChunk<DType::kQ4_1> {
  struct Raw { U4 qs; uint32_t dm; };
  __host__ __device__ static Raw load(const QWeight& w, int64_t row, int64_t j, int64_t) {
    const int64_t b = row * w.blocks_per_row + j;
    return {ldg16(w.r0 + b * 16), ldg4(w.r1 + b * 4)};
  }
  __host__ __device__ static void decode(const Raw& r, uint32_t (&out)[16]) {
    const __half2 d = splat_bits(r.dm), m = splat_bits(r.dm >> 16), base = splat_bits(0x6400);
    for (int k = 0; k < 4; ++k) {
      for (int p = 0; p < 2; ++p) {
        const uint32_t v = pair_bytes(r.qs.w[k], p);
        out[2 * k + p] = u32(fma2(__hsub2(h2((v & 0x000F000Fu) | kMagic), base), d, m));
        out[8 + 2 * k + p] = u32(fma2(__hsub2(h2(((v >> 4) & 0x000F000Fu) | kMagic), base), d, m));
      }
    }
  }
};

// Fifth bits of elements e and e+1 (bits e, e+1 of qh) at bits 4 and 20.
__host__ __device__ __forceinline__ uint32_t high_pair(uint32_t qh, int e) {
  const uint32_t t = qh >> e;
  return ((t & 1u) << 4) | ((t & 2u) << 19);
}

template <>
struct GemmChunk<DType::kQ5_0> {
  struct Raw { U4 qs; uint32_t qh, d; };
  __host__ __device__ static Raw load(const QWeight& w, int64_t row, int64_t j, int64_t) {
    const int64_t b = row * w.blocks_per_row + j;
    return {ldg16(w.r0 + b * 16), ldg4(w.r1 + b * 4), ldg2(w.r2 + b * 2)};
  }
  __host__ __device__ static void decode(const Raw& r, uint32_t (&out)[16]) {
    const __half2 d = splat_bits(r.d);
    for (int k = 0; k < 4; ++k) {
      for (int p = 0; p < 2; ++p) {
        const uint32_t v = pair_bytes(r.qs.w[k], p);
        const int e = 4 * k + 2 * p;
        out[2 * k + p] = scaled((v & 0x000F000Fu) | high_pair(r.qh, e), 0x6410, d);  // - 1040
        out[8 + 2 * k + p] = scaled(((v >> 4) & 0x000F000Fu) | high_pair(r.qh, e + 16), 0x6410, d);
      }
    }
  }
};

template <>
struct GemmChunk<DType::kQ5_1> {
  struct Raw { U4 qs; uint32_t qh, dm; };
  __host__ __device__ static Raw load(const QWeight& w, int64_t row, int64_t j, int64_t) {
    const int64_t b = row * w.blocks_per_row + j;
    return {ldg16(w.r0 + b * 16), ldg4(w.r1 + b * 4), ldg4(w.r2 + b * 4)};
  }
  __host__ __device__ static void decode(const Raw& r, uint32_t (&out)[16]) {
    const __half2 d = splat_bits(r.dm), m = splat_bits(r.dm >> 16), base = splat_bits(0x6400);
    for (int k = 0; k < 4; ++k) {
      for (int p = 0; p < 2; ++p) {
        const uint32_t v = pair_bytes(r.qs.w[k], p);
        const int e = 4 * k + 2 * p;
        const uint32_t lo = (v & 0x000F000Fu) | high_pair(r.qh, e);
        const uint32_t hi = ((v >> 4) & 0x000F000Fu) | high_pair(r.qh, e + 16);
        out[2 * k + p] = u32(fma2(__hsub2(h2(lo | kMagic), base), d, m));
        out[8 + 2 * k + p] = u32(fma2(__hsub2(h2(hi | kMagic), base), d, m));
      }
    }
  }
};

// Q8_0: signed bytes; x ^ 0x80 is c + 128, so the half 1024 + (c + 128) less 1152 is c.
template <>
struct GemmChunk<DType::kQ8_0> {
  struct Raw { U4 q0, q1; uint32_t d; };
  __host__ __device__ static Raw load(const QWeight& w, int64_t row, int64_t j, int64_t) {
    const int64_t b = row * w.blocks_per_row + j;
    return {ldg16(w.r0 + b * 32), ldg16(w.r0 + b * 32 + 16), ldg2(w.r1 + b * 2)};
  }
  __host__ __device__ static void decode(const Raw& r, uint32_t (&out)[16]) {
    const __half2 d = splat_bits(r.d);
    for (int k = 0; k < 8; ++k) {
      const uint32_t x = (k < 4 ? r.q0.w[k] : r.q1.w[k - 4]) ^ 0x80808080u;
      // Bytes (0, 1) and (2, 3) with 0x64 above each: selector 5 picks 0x64 from y.
      out[2 * k] = u32(__hmul2(__hsub2(h2(perm(x, kMagic, 0x5150u)), splat_bits(0x6480)), d));
      out[2 * k + 1] = u32(__hmul2(__hsub2(h2(perm(x, kMagic, 0x5352u)), splat_bits(0x6480)), d));
    }
  }
};

// K-quants: chunk j is sub-block s = j % 8 of super-block j / 8.
// Scale and min s (0..7) of Q4_K / Q5_K from the 12 packed bytes (words 1-3 of the header).
// (Selects, not a run-time index: an indexed register array would live in local memory.)
__host__ __device__ __forceinline__ int k4_byte(const U4& hdr, int k) {
  const uint32_t v = k < 4 ? hdr.w[1] : (k < 8 ? hdr.w[2] : hdr.w[3]);
  return int((v >> (8 * (k % 4))) & 0xFF);
}
__host__ __device__ __forceinline__ void k4_scale_min(const U4& hdr, int s, int& sc, int& m) {
  if (s < 4) {
    sc = k4_byte(hdr, s) & 63;
    m = k4_byte(hdr, s + 4) & 63;
  } else {
    sc = (k4_byte(hdr, s + 4) & 0xF) | ((k4_byte(hdr, s - 4) >> 6) << 4);
    m = (k4_byte(hdr, s + 4) >> 4) | ((k4_byte(hdr, s) >> 6) << 4);
  }
}

template <>
struct GemmChunk<DType::kQ4_K> {
  struct Raw { U4 hdr, qa, qb; int s; };
  __host__ __device__ static Raw load(const QWeight& w, int64_t row, int64_t j, int64_t) {
    const uint8_t* blk = w.r0 + (row * w.blocks_per_row + j / 8) * 144;
    const int s = int(j % 8);
    const uint8_t* qs = blk + 16 + 32 * (s / 2);
    return {ldg16(blk), ldg16(qs), ldg16(qs + 16), s};
  }
  __host__ __device__ static void decode(const Raw& r, uint32_t (&out)[16]) {
    int sc, mn;
    k4_scale_min(r.hdr, r.s, sc, mn);
    const __half2 d = splat(f16_bits(r.hdr.w[0]) * float(sc)), m = splat(-f16_bits(r.hdr.w[0] >> 16) * float(mn));
    const __half2 base = splat_bits(0x6400);
    const int shift = 4 * (r.s % 2);
    for (int k = 0; k < 8; ++k) {
      const uint32_t x = (k < 4 ? r.qa.w[k] : r.qb.w[k - 4]) >> shift;
      for (int p = 0; p < 2; ++p) {
        const uint32_t c = pair_bytes(x, p) & 0x000F000Fu;
        out[2 * k + p] = u32(fma2(__hsub2(h2(c | kMagic), base), d, m));
      }
    }
  }
};

template <>
struct GemmChunk<DType::kQ5_K> {
  struct Raw { U4 hdr, qa, qb, ha, hb; int s; };
  __host__ __device__ static Raw load(const QWeight& w, int64_t row, int64_t j, int64_t) {
    const uint8_t* blk = w.r0 + (row * w.blocks_per_row + j / 8) * 176;
    const int s = int(j % 8);
    const uint8_t* qs = blk + 48 + 32 * (s / 2);
    return {ldg16(blk), ldg16(qs), ldg16(qs + 16), ldg16(blk + 16), ldg16(blk + 32), s};
  }
  __host__ __device__ static void decode(const Raw& r, uint32_t (&out)[16]) {
    int sc, mn;
    k4_scale_min(r.hdr, r.s, sc, mn);
    const __half2 d = splat(f16_bits(r.hdr.w[0]) * float(sc)), m = splat(-f16_bits(r.hdr.w[0] >> 16) * float(mn));
    const __half2 base = splat_bits(0x6400);
    const int shift = 4 * (r.s % 2);
    for (int k = 0; k < 8; ++k) {
      const uint32_t x = (k < 4 ? r.qa.w[k] : r.qb.w[k - 4]) >> shift;
      const uint32_t h = (k < 4 ? r.ha.w[k] : r.hb.w[k - 4]) >> r.s;
      for (int p = 0; p < 2; ++p) {
        const uint32_t c = (pair_bytes(x, p) & 0x000F000Fu) | ((pair_bytes(h, p) & 0x00010001u) << 4);
        out[2 * k + p] = u32(fma2(__hsub2(h2(c | kMagic), base), d, m));
      }
    }
  }
};

// Q6_K chunk q = j % 8 (elements 32q .. 32q+31 of the super-block, h = q / 4): low nibbles are
// the 32 bytes at 64h + 32(q & 1) of ql shifted by 4((q >> 1) & 1); the two high bits the 32
// bytes at 128 + 32h shifted by 2(q & 3); scales 2q (elements 0-15) and 2q+1 (16-31).
template <>
struct GemmChunk<DType::kQ6_K> {
  struct Raw { U4 la, lb, ha, hb; uint32_t sc, d; int q; };
  __host__ __device__ static Raw load(const QWeight& w, int64_t row, int64_t j, int64_t) {
    const int64_t b = row * w.blocks_per_row + j / 8;
    const uint8_t* blk = w.r0 + b * 208;
    const int q = int(j % 8), h = q / 4;
    const uint8_t* ql = blk + 64 * h + 32 * (q & 1);
    return {ldg16(ql), ldg16(ql + 16), ldg16(blk + 128 + 32 * h), ldg16(blk + 144 + 32 * h),
            ldg2(blk + 192 + 2 * q), ldg2(w.r1 + b * 2), q};
  }
  __host__ __device__ static void decode(const Raw& r, uint32_t (&out)[16]) {
    const float d = f16_bits(r.d);
    const __half2 d0 = splat(d * float(int8_t(r.sc & 0xFF))), d1 = splat(d * float(int8_t(r.sc >> 8)));
    const int sl = 4 * ((r.q >> 1) & 1), sh = 2 * (r.q & 3);
    for (int k = 0; k < 8; ++k) {
      const uint32_t x = (k < 4 ? r.la.w[k] : r.lb.w[k - 4]) >> sl;
      const uint32_t h = (k < 4 ? r.ha.w[k] : r.hb.w[k - 4]) >> sh;
      for (int p = 0; p < 2; ++p) {
        const uint32_t c = (pair_bytes(x, p) & 0x000F000Fu) | ((pair_bytes(h, p) & 0x00030003u) << 4);
        out[2 * k + p] = scaled(c, 0x6420, k < 4 ? d0 : d1);  // (1024 + c) - 1056 = c - 32
      }
    }
  }
};

}  // namespace cera::ops::cuda::qgemm
