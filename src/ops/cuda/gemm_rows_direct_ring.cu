// gemm_rows_direct's ring variant (CERA_CUDA_ROWS_DIRECT_RING=3, 4 (the default) or 8; 0: the
// register kernel): the same product, fragments and k order as the register kernel
// (gemm_rows_direct.cu), but the weights reach the registers through a warp-private ring of
// shared memory filled by cp.async, so that the bytes in flight no longer cost registers.
//
// The one decision: each warp streams its own 32 weight rows through its own kRing stages (one
// superstep of 128 k a stage: 32 rows x 4 blocks x 16 code bytes = 2 KB, then 32 rows x 12
// scale bytes), paced by cp.async.wait_group and __syncwarp only; no block barrier waits for
// weights. A lane copies exactly the code bytes it later reads (block 4s + c of its rows g,
// g + 8 of both m16 tiles, one 16-byte cp.async.cg each, stored [mt][h][lane] so that the
// 16-byte ld.shared of a warp touches 512 contiguous bytes), so the codes need no barrier at all;
// the scales are copied row by row (3 aligned 4-byte words cover a row's 4 scales at any
// n_blocks) and read across lanes, hence the __syncwarp. The register kernel measured 167
// registers (3 blocks, 12 warps an SM) and 2 supersteps a warp in flight: ~48 KB an SM, latency-
// bound at ~1.4 TB/s (docs/benchmarks/serving_batch_h200.md). Here a stage is refilled as soon as
// the warp has read it, so R - 1 stages of every warp are in flight while it computes one:
//   RING=3: 4 blocks an SM (<= 128 registers), 2 x 8 KB activation chunks:
//           45,568 B a block (182 KB an SM), 16 warps x 2 x 2,432 B = 78 KB in flight an SM;
//           up to 16 tokens (an 8 KB chunk holds one superstep of 32 tokens: above, RING=4);
//   RING=4: 3 blocks an SM, 2 x 16 KB chunks: 71,680 B a block (213 KB an SM),
//           12 warps x 3 x 2,432 B = 88 KB in flight an SM;
//   RING=8: 2 blocks an SM, 2 x 16 KB chunks: 110,592 B a block (218 KB an SM),
//           8 warps x 7 x 2,432 B = 136 KB in flight an SM
// (228 KB of shared memory an SM, 1 KB of it reserved a block). ptxas -v (CUDA 13.0, sm_90a), at
// 8 / 16 / 32 tokens: RING=4 112 / 121 / 146 registers, RING=8 112 / 128 / 148, RING=3 96 / 114;
// no spills (the register kernel: 167 / 168 / 168, 0 / 4 / 32 bytes spilled). Not yet measured.
// The cp.async groups complete in order, and the activation chunk ci + 1 (issued after the
// barrier that frees its buffer, kSC supersteps before it is needed) sits between weight
// stages: at a chunk's first superstep the wait is min(R - 2, kSC - 1) groups, which drains the
// ring to kSC stages where a chunk is shorter than the ring (32 tokens: kSC = 2 at 16 KB).
// The split plan uses this kernel's own occupancy as its wave, so at RING=3 and RING=8 the k
// splits (hence the last bits of the sums) may differ from the register kernel's; RING=4 has
// its 3 blocks an SM and sums bit for bit as it does.
#include <algorithm>
#include <cstdlib>

#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gemm_rows.h"
#include "ops/cuda/gemm_rows_direct.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/mma.cuh"

namespace cera::ops::cuda::direct {
namespace {

using namespace mma;

constexpr int kCodeBytes = 4 * 32 * 16;                // a stage's codes: [mt][h][lane] x 16 bytes
constexpr int kStageBytes = kCodeBytes + 32 * 3 * 4;  // + [row][3 words] of scales: 2,432

// As cp_async16_zfill, 4 bytes (src_bytes 0 or 4); .ca is the only form of this size.
__device__ __forceinline__ void cp_async4_zfill(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

template <int kNN, int kRing, int kBlocksSM, int kChunkBytes>
__global__ void __launch_bounds__(kThreads, kBlocksSM) gemm_rows_ring_kernel(const __grid_constant__ DirectParams p) {
  constexpr int kTT = 8 * kNN;                  // tokens of a tile
  constexpr int kKC = kChunkBytes / (2 * kTT);  // k of a chunk
  constexpr int kSC = kKC / kSuperK;            // supersteps a chunk
  constexpr int kPieces = kTT * kKC / 8;        // 16-byte pieces of a chunk
  constexpr int kWait = kRing - 2;              // groups left in flight when stage i must have landed
  constexpr int kWaitChunk = kWait < kSC - 1 ? kWait : kSC - 1;  // ... and chunk ci too
  static_assert(kRing >= 2 && kSC >= 1 && kPieces % kThreads == 0, "whole pieces a thread");
  extern __shared__ __align__(128) uint8_t smem[];
  uint4* xs = reinterpret_cast<uint4*>(smem);  // [2][kPieces] x_piece order
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  uint8_t* ring = smem + 2 * kChunkBytes + warp * kRing * kStageBytes;  // [kRing] stages of this warp
  const BlockWork wk = block_work(p, kTT);
  const DirectPart& P = p.part[wk.pi];
  const int nb = p.n_blocks;

  // Codes: this lane's rows, tile mt's rows g and g + 8 (rows past n_out re-read the last row;
  // their products are never stored), block 4 s + c of each superstep s. Scales: copy i of this
  // lane is word (id % 3) of row id / 3 of the warp's 32 (id = lane + 32 i), the words that
  // cover scales 4 s .. 4 s + 3 of the row from the even scale at or before 4 s; a word that
  // starts past the row is zeros (so no copy reads past the region, which ends 4-byte aligned).
  int qrow[2][2];  // uint4s from P.qs (the launcher checks n_out x n_blocks < 2^31)
  int soff[2][2];  // byte of this lane's scale of (mt, h) in a stage
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int rw = 16 * mt + g + 8 * h;
      const int row = min(wk.n0 + kRowsWarp * warp + rw, P.n_out - 1);
      qrow[mt][h] = row * nb + c;
      soff[mt][h] = kCodeBytes + 12 * rw + 2 * ((row * nb & 1) + c);
    }
  }
  int dword[3];  // 4-byte words from P.d
  int dlim[3];  // word i is in the row while 4 s < dlim[i]
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    const int id = lane + 32 * i, k = id % 3;
    const int row = min(wk.n0 + kRowsWarp * warp + id / 3, P.n_out - 1);
    const int o = row * nb & 1;
    dword[i] = (row * nb >> 1) + k;
    dlim[i] = nb - 2 * k + o;
  }
  // Superstep s of this split into stage s % kRing (commits nothing).
  auto issue = [&](int s) {
    if (s >= wk.n_s) return;
    uint8_t* st = ring + (s % kRing) * kStageBytes;
    const int s4 = 4 * (wk.s0 + s);
    const bool in = s4 + c < nb;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint4* src = P.qs + (in ? qrow[mt][h] + s4 : 0);
        cp_async16_zfill(smem_addr(st + 16 * (32 * (2 * mt + h) + lane)), src, in ? 16 : 0);
      }
    }
#pragma unroll
    for (int i = 0; i < 3; ++i) {
      const bool win = s4 < dlim[i];
      const uint32_t* src = reinterpret_cast<const uint32_t*>(P.d) + (win ? dword[i] + s4 / 2 : 0);
      cp_async4_zfill(smem_addr(st + kCodeBytes + 4 * (lane + 32 * i)), src, win ? 4 : 0);
    }
  };
  // Chunk ci of this split into buffer ci & 1: tokens past n_tokens and k past n_in as zeros
  // (commits nothing).
  auto load_chunk = [&](int ci) {
    uint4* dst = xs + (ci & 1) * kPieces;
    const int64_t k0 = int64_t(wk.s0 + ci * kSC) * kSuperK;
#pragma unroll
    for (int i = 0; i < kPieces / kThreads; ++i) {
      const int id = tid + kThreads * i, t = id / (kKC / 8), r = id % (kKC / 8);
      const int64_t k = k0 + 8 * r;
      const bool in = wk.m0 + t < p.n_tokens && k < p.n_in;
      const __half* src = in ? p.x + int64_t(wk.m0 + t) * p.n_in + k : p.x;
      cp_async16_zfill(smem_addr(dst + x_piece<kKC>(t, r / 4, r % 4)), src, in ? 16 : 0);
    }
  };

  float acc[2][kNN][4];
  zero_acc<kNN>(acc);
  // Superstep ls of the chunk in buffer buf, from stage st: the register kernel's product
  // (direct::superstep_mma) on the codes and scales read from the stage.
  auto compute = [&](const uint8_t* st, bool in, const uint4* buf, int ls) {
    uint4 q[2][2];
    __half2 d[2][2];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        q[mt][h] = *reinterpret_cast<const uint4*>(st + 16 * (32 * (2 * mt + h) + lane));
        const __half s = *reinterpret_cast<const __half*>(st + soff[mt][h]);
        d[mt][h] = __half2half2(in ? s : __ushort_as_half(0));  // a block past the row: zero
      }
    }
    direct::superstep_mma<kNN, kKC>(q, d, buf, 4 * ls + c, g, acc);
  };

  // Groups, in commit order: stages 0 .. R-2, chunk 0, then one a superstep i (chunk ci + 1 at
  // a chunk's first superstep, then stage i + R - 1), empty ones too, so the counts hold.
  for (int s = 0; s + 1 < kRing; ++s) {
    issue(s);
    cp_async_commit();
  }
  pdl_entry();  // the weights are never written by kernels: their copies went out before
  load_chunk(0);
  cp_async_commit();
  for (int i = 0; i < wk.n_s; ++i) {
    const int ls = i % kSC, ci = i / kSC;
    if (ls == 0) {
      if (ci == 0) {
        cp_async_wait<0>();
      } else {
        cp_async_wait<kWaitChunk>();  // stage i and chunk ci have landed
      }
      __syncthreads();  // ... for every thread, and every warp is done with chunk ci - 1
      if ((ci + 1) * kSC < wk.n_s) load_chunk(ci + 1);  // into chunk ci - 1's buffer
    } else {
      cp_async_wait<kWait>();  // stage i has landed for this lane
      __syncwarp();            // ... for every lane (the scales), and all are done with stage i - 1
    }
    issue(i + kRing - 1);  // into stage i - 1's slot: this lane's codes of it were consumed
    cp_async_commit();
    compute(ring + (i % kRing) * kStageBytes, 4 * (wk.s0 + i) + c < nb, xs + (ci & 1) * kPieces, ls);
  }
  cp_async_wait<0>();  // no copy outlives the block (empty groups at the end)
  direct_epilogue<kNN>(p, wk, acc);
}

template <int kNN, int kRing, int kBlocksSM, int kChunkBytes>
DirectKernel ring_kernel() {
  static const DirectKernel k = [] {
    DirectKernel r{gemm_rows_ring_kernel<kNN, kRing, kBlocksSM, kChunkBytes>, 8 * kNN,
                   size_t(2 * kChunkBytes + kWarps * kRing * kStageBytes), 0};
    CERA_CUDA_CHECK(cudaFuncSetAttribute(r.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(r.smem)));
    CERA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&r.blocks_sm, r.kernel, kThreads, r.smem));
    r.blocks_sm = std::clamp(r.blocks_sm, 1, kBlocksSM);
    return r;
  }();
  return k;
}

}  // namespace

// The instantiated configurations: <n8 tiles (8, 16, 32 tokens), stages a warp, blocks an SM,
// activation chunk bytes>.
DirectKernel direct_ring_kernel_for(int64_t n_tokens, int ring) {
  if (ring == 3 && n_tokens <= 8) return ring_kernel<1, 3, 4, 8192>();
  if (ring == 3 && n_tokens <= 16) return ring_kernel<2, 3, 4, 8192>();
  if (ring == 8) {
    if (n_tokens <= 8) return ring_kernel<1, 8, 2, 16384>();
    if (n_tokens <= 16) return ring_kernel<2, 8, 2, 16384>();
    return ring_kernel<4, 8, 2, 16384>();
  }
  // RING=4, and RING=3 above 16 tokens (an 8 KB chunk holds one superstep of 32 tokens, which
  // would drain the ring at every superstep).
  if (n_tokens <= 8) return ring_kernel<1, 4, 3, 16384>();
  if (n_tokens <= 16) return ring_kernel<2, 4, 3, 16384>();
  return ring_kernel<4, 4, 3, 16384>();
}

}  // namespace cera::ops::cuda::direct
