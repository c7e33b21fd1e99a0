// dequant32<T>: the 32 weights of chunk j (elements 32j .. 32j+31) of a row, as floats, in the
// GPU layout. Products of an fp16 scale and a small integer are exact in float, so these match
// the CPU reference dequantizers up to the order of the final subtraction. Included by
// quant_units.cuh only.
#pragma once

namespace cera::ops::cuda {

__device__ __forceinline__ void nibbles32(const uint8_t* qs, int (&c)[32]) {
  const uint4 v = ld16(qs);
  for (int i = 0; i < 16; ++i) {
    const uint32_t byte = (word(v, i / 4) >> (8 * (i % 4))) & 0xFF;
    c[i] = int(byte & 0xF);
    c[i + 16] = int(byte >> 4);
  }
}

template <>
__device__ inline void dequant32<DType::kQ4_0>(const QWeight& w, int64_t row, int64_t j, float (&out)[32]) {
  const int64_t b = row * w.blocks_per_row + j;
  int c[32];
  nibbles32(w.r0 + b * 16, c);
  const float d = f16(w.r1 + b * 2);
  for (int i = 0; i < 32; ++i) out[i] = float(c[i] - 8) * d;
}

template <>
__device__ inline void dequant32<DType::kQ4_1>(const QWeight& w, int64_t row, int64_t j, float (&out)[32]) {
  const int64_t b = row * w.blocks_per_row + j;
  int c[32];
  nibbles32(w.r0 + b * 16, c);
  const float d = f16(w.r1 + b * 4), m = f16(w.r1 + b * 4 + 2);
  for (int i = 0; i < 32; ++i) out[i] = float(c[i]) * d + m;
}

template <>
__device__ inline void dequant32<DType::kQ5_0>(const QWeight& w, int64_t row, int64_t j, float (&out)[32]) {
  const int64_t b = row * w.blocks_per_row + j;
  int c[32];
  nibbles32(w.r0 + b * 16, c);
  const uint32_t qh = __ldg(reinterpret_cast<const uint32_t*>(w.r1) + b);
  const float d = f16(w.r2 + b * 2);
  for (int i = 0; i < 32; ++i) out[i] = float((c[i] | int((qh >> i) & 1) << 4) - 16) * d;
}

template <>
__device__ inline void dequant32<DType::kQ5_1>(const QWeight& w, int64_t row, int64_t j, float (&out)[32]) {
  const int64_t b = row * w.blocks_per_row + j;
  int c[32];
  nibbles32(w.r0 + b * 16, c);
  const uint32_t qh = __ldg(reinterpret_cast<const uint32_t*>(w.r1) + b);
  const float d = f16(w.r2 + b * 4), m = f16(w.r2 + b * 4 + 2);
  for (int i = 0; i < 32; ++i) out[i] = float(c[i] | int((qh >> i) & 1) << 4) * d + m;
}

template <>
__device__ inline void dequant32<DType::kQ8_0>(const QWeight& w, int64_t row, int64_t j, float (&out)[32]) {
  const int64_t b = row * w.blocks_per_row + j;
  const uint4 v0 = ld16(w.r0 + b * 32), v1 = ld16(w.r0 + b * 32 + 16);
  const float d = f16(w.r1 + b * 2);
  for (int i = 0; i < 16; ++i) {
    out[i] = float(int8_t((word(v0, i / 4) >> (8 * (i % 4))) & 0xFF)) * d;
    out[i + 16] = float(int8_t((word(v1, i / 4) >> (8 * (i % 4))) & 0xFF)) * d;
  }
}

// Q4_K / Q5_K: chunk j is sub-block s = j % 8 of super-block j / 8; run s / 2, low nibbles for even s.
template <>
__device__ inline void dequant32<DType::kQ4_K>(const QWeight& w, int64_t row, int64_t j, float (&out)[32]) {
  const uint8_t* blk = w.r0 + (row * w.blocks_per_row + j / 8) * 144;
  const int s = int(j % 8);
  const uint4 hdr = ld16(blk);
  const __half2 dm = *reinterpret_cast<const __half2*>(&hdr.x);
  const int2 sm = scale_min_k4(hdr, s);
  const float d = __low2float(dm) * float(sm.x), m = __high2float(dm) * float(sm.y);
  const uint8_t* qs = blk + 16 + 32 * (s / 2);
  const int shift = 4 * (s % 2);
  for (int i = 0; i < 32; ++i) out[i] = d * float((__ldg(qs + i) >> shift) & 0xF) - m;
}

template <>
__device__ inline void dequant32<DType::kQ5_K>(const QWeight& w, int64_t row, int64_t j, float (&out)[32]) {
  const uint8_t* blk = w.r0 + (row * w.blocks_per_row + j / 8) * 176;
  const int s = int(j % 8);
  const uint4 hdr = ld16(blk);
  const __half2 dm = *reinterpret_cast<const __half2*>(&hdr.x);
  const int2 sm = scale_min_k4(hdr, s);
  const float d = __low2float(dm) * float(sm.x), m = __high2float(dm) * float(sm.y);
  const uint8_t* qh = blk + 16;
  const uint8_t* qs = blk + 48 + 32 * (s / 2);
  const int shift = 4 * (s % 2);
  for (int i = 0; i < 32; ++i) {
    const int code = ((__ldg(qs + i) >> shift) & 0xF) | (((__ldg(qh + i) >> s) & 1) << 4);
    out[i] = d * float(code) - m;
  }
}

template <>
__device__ inline void dequant32<DType::kQ6_K>(const QWeight& w, int64_t row, int64_t j, float (&out)[32]) {
  const int64_t b = row * w.blocks_per_row + j / 8;
  const uint8_t* blk = w.r0 + b * 208;
  const auto* sc = reinterpret_cast<const int8_t*>(blk + 192);
  const float d = f16(w.r1 + b * 2);
  const int e0 = 32 * int(j % 8), h = e0 / 128;
  for (int i = 0; i < 32; ++i) {
    const int r = e0 % 128 + i;
    const int low = (__ldg(blk + 64 * h + r % 64) >> (4 * (r / 64))) & 0xF;
    const int high = (__ldg(blk + 128 + 32 * h + r % 32) >> (2 * (r / 32))) & 0x3;
    out[i] = d * float(__ldg(sc + (e0 + i) / 16)) * float((low | high << 4) - 32);
  }
}

}  // namespace cera::ops::cuda
