// Persistent GEMV chain microbenchmark (docs/benchmarks/cuda.md v8): how fast can the decode GEMVs
// of a step move their weights when one persistent launch runs them all, against the product's
// chain of launches? The 8B Q4_0 layer's four GEMVs (Q/K/V 4096 -> 6144, O 4096 -> 4096, gate/up
// 4096 -> 28672, down 14336 -> 4096) over 32 layers of distinct weights (3.9 GB, so every byte
// comes from HBM), batch 1:
//   product  each GEMV through gemv_parts (its activation quantization and the GEMV kernel it
//            picks, streaming or v2), the whole chain captured as one CUDA graph with PDL edges;
//   chain    one cooperative launch, one block an SM (--blocks-per-sm: more, each with its own
//            producer and a share of the ring): the producer warp streams every GEMV's row
//            groups (static: group g to block g mod grid) into a shared-memory ring and runs
//            ahead into the next GEMVs' weights; 8 consumer warps (or 16 in two groups taking
//            alternate row groups, or 8 dotting two rows each) dot the tiles and, before
//            each GEMV, wait at a grid barrier until every block has finished the previous one
//            (the data dependency of a real step: each GEMV's input is the previous one's output);
//   stream   the same without the barriers: the ceiling of the persistent streaming itself;
//   registers the same chain and stream with the weights read straight into registers, one warp a
//            row as the product's v2 GEMV (16 warps a block, 2 x blocks-per-sm blocks an SM).
// Inputs are fixed random activations per shape (the barrier, not the data, carries the
// dependency). --check compares each persistent variant's last-layer outputs with the product's.
// Measured (docs/benchmarks/cuda.md v8 and v9): every variant, at one and two blocks an SM. Best
// with barriers: 8 consumer warps, two blocks an SM, 73 % of 4.3 TB/s (the product's graph: 62 %);
// best without: 2 rows a warp at two blocks an SM, 88 %. Activations in registers gained nothing.
// The readiness-flag form (chunks) was measured in the eighth session and lost against the grid
// barrier at every column width (2 blocks an SM, default columns: chain 71 % vs chunks 50 % of
// 4.3 TB/s; 2 rows a warp: 69 % vs 62 %), and was removed (commit 6d63d10 has it).
// Built with -DCERA_CUDA_BENCH=ON (target gemv_chain_bench); run on the GPU machine:
//   gemv_chain_bench [--layers 32] [--reps 5] [--blocks-per-sm 1] [--check]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "bench_fill.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gemv_stream.cuh"
#include "ops/cuda/weight_layout.h"

using namespace cera;
using namespace cera::ops::cuda;
namespace gs = cera::ops::cuda::gemv_stream;
using cera::tools::fill;

namespace {

constexpr double kRoofline = 4.3e12;  // bytes/s (PERFORMANCE.md)
constexpr int kKinds = 4;             // Q/K/V, O, gate/up, down: one weight each
constexpr int kUnitBytes = 18;        // Q4_0: 16 code bytes + a 2-byte scale a 32-weight unit
constexpr int kMaxStages = 16;
constexpr int kWarpsC = gs::kConsumerWarps;  // consumer warps a group; a tile has kRpw rows a warp

// What a GEMV's consumers wait for before reading its input (the previous GEMV's output).
enum class Dependency : int32_t {
  kNone,     // nothing: the streaming ceiling
  kBarrier,  // every block done with the previous GEMV (a grid barrier)
};

struct ChainShape {
  int64_t n_in, n_out;
  int32_t units, ku, n_col_tiles;
  uint32_t act_bytes;
  const int8_t* xq;    // [n_in] Q8_0 codes
  const float2* xds;   // [n_in / 32]
  float* out;          // [n_out]
};

struct ChainParams {
  ChainShape shape[kKinds];
  const QWeight* w;    // [layers][kKinds]
  int32_t n_layers;
  int32_t n_stages;
  uint32_t stage_pitch;  // bytes a ring stage
  int32_t* barrier;      // blocks done, summed over the GEMVs; zero at launch
  Dependency dep;
};

__device__ __forceinline__ int ld_acquire(const int32_t* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Before GEMV i (i > 0): thread 0 waits until every block has finished GEMV i - 1; the caller then
// synchronises its threads.
__device__ __forceinline__ void wait_for_previous(const ChainParams& p, int i) {
  if (threadIdx.x == 0) {
    while (ld_acquire(p.barrier) < i * int(gridDim.x)) __nanosleep(20);
  }
}
// After the block's threads are synchronised at the end of a GEMV: count the block as done.
__device__ __forceinline__ void gemv_done(const ChainParams& p) {
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(p.barrier, 1);
  }
}

// Shape s's activations into shared memory, as the streaming GEMV lays them out (low and high
// 16-byte halves of each unit's codes, then the (d, sum) pairs); threads tid of n_threads.
__device__ __forceinline__ void stage_activations(const ChainShape& s, uint8_t* act, int tid, int n_threads) {
  for (int u = tid; u < s.units; u += n_threads) {
    const uint4* x = reinterpret_cast<const uint4*>(s.xq + int64_t(u) * 32);
    reinterpret_cast<uint4*>(act)[u] = x[0];
    reinterpret_cast<uint4*>(act)[s.units + u] = x[1];
    reinterpret_cast<float2*>(act + size_t(s.units) * 32)[u] = s.xds[u];
  }
}

// Tile (group g, column c) of GEMV shape s, kRows rows a group: its rows and units.
struct TileDims {
  int rows, ku_this;
};
template <int kRows>
__device__ __forceinline__ TileDims dims(const ChainShape& s, int64_t g, int c) {
  const int64_t left = s.n_out - g * kRows;
  return {int(left < kRows ? left : kRows), min(s.ku, s.units - c * s.ku)};
}

template <int kRows>
__device__ void produce(const ChainParams& p, uint8_t* ring, uint64_t* full, uint64_t* empty) {
  const int lane = threadIdx.x & 31;
  const uint64_t policy = gs::evict_first_policy();
  int64_t it = 0;
  for (int l = 0; l < p.n_layers; ++l) {
    for (int k = 0; k < kKinds; ++k) {
      const ChainShape& s = p.shape[k];
      const QWeight w = p.w[l * kKinds + k];
      const int64_t n_groups = (s.n_out + kRows - 1) / kRows;
      for (int64_t g = blockIdx.x; g < n_groups; g += gridDim.x) {
        for (int c = 0; c < s.n_col_tiles; ++c, ++it) {
          const int st = int(it % p.n_stages);
          if (it >= p.n_stages) gs::mbar_wait(&empty[st], uint32_t((it / p.n_stages) & 1) ^ 1u);
          const TileDims d = dims<kRows>(s, g, c);
          if (lane == 0) gs::mbar_arrive_expect_tx(&full[st], uint32_t(d.rows) * d.ku_this * kUnitBytes);
          __syncwarp();
          // One copy a plane when the tile's rows are one contiguous run, else one a row and plane.
          const bool whole = s.n_col_tiles == 1;
          if (lane < (whole ? 1 : d.rows)) {
            const int64_t row = g * kRows + lane;
            const uint32_t n = whole ? uint32_t(d.rows) : 1u;
            uint8_t* dst = ring + size_t(st) * p.stage_pitch;
            const int64_t unit = row * s.units + int64_t(c) * s.ku;
            gs::bulk_copy(dst + lane * s.ku * 16, w.r0 + unit * 16, n * uint32_t(d.ku_this * 16), &full[st], policy);
            gs::bulk_copy(dst + kRows * s.ku * 16 + lane * s.ku * 2, w.r1 + unit * 2, n * uint32_t(d.ku_this * 2),
                          &full[st], policy);
          }
        }
      }
    }
  }
}

// kGroups consumer groups of 8 warps: group q takes the block's row groups q, q + kGroups, ...
// (each group all of its row group's tiles, so sums stay in registers); the ring's tile order is
// the producer's, so a group skips the tiles of the others.
template <int kGroups>
__device__ __forceinline__ void consumers_sync_all() {
  if constexpr (kGroups == 1) {
    gs::consumers_sync();
  } else {
    asm volatile("bar.sync 1, %0;" ::"n"(kGroups * gs::kConsumerWarps * 32) : "memory");
  }
}

// kRpw rows a warp: warp w dots rows w and w + 8 of a 16-row tile with one read of the activations.
// (v9 also measured each lane keeping its activation units in registers: no gain; commit f85b96b.)
template <int kGroups, int kRpw>
__device__ void consume(const ChainParams& p, const uint8_t* ring, uint8_t* act, uint64_t* full, uint64_t* empty) {
  constexpr int kRows = kWarpsC * kRpw;
  const int warp = (threadIdx.x / 32) % gs::kConsumerWarps, q = threadIdx.x / 32 / gs::kConsumerWarps;
  const int lane = threadIdx.x & 31;
  constexpr int kThreadsC = kGroups * gs::kConsumerWarps * 32;
  int64_t base = 0;  // the ring position of the GEMV's first tile
  for (int l = 0; l < p.n_layers; ++l) {
    for (int k = 0; k < kKinds; ++k) {
      const ChainShape& s = p.shape[k];
      const int i = l * kKinds + k;
      if (p.dep == Dependency::kBarrier && i > 0) {
        wait_for_previous(p, i);
        consumers_sync_all<kGroups>();
      }
      stage_activations(s, act, threadIdx.x, kThreadsC);
      consumers_sync_all<kGroups>();
      const int64_t n_groups = (s.n_out + kRows - 1) / kRows;
      const int64_t mine = n_groups > blockIdx.x ? (n_groups - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
      for (int64_t j = q; j < mine; j += kGroups) {
        const int64_t g = blockIdx.x + j * gridDim.x;
        float acc[kRpw] = {};
        for (int c = 0; c < s.n_col_tiles; ++c) {
          const int64_t it = base + j * s.n_col_tiles + c;
          const int st = int(it % p.n_stages);
          gs::mbar_wait(&full[st], uint32_t((it / p.n_stages) & 1));
          const TileDims d = dims<kRows>(s, g, c);
          if (warp < d.rows) {
            const uint8_t* stage = ring + size_t(st) * p.stage_pitch;
            gs::Planes pl[kRpw];
#pragma unroll
            for (int h = 0; h < kRpw; ++h) {
              const int r = warp + kWarpsC * h;
              pl[h].p[0] = stage + r * s.ku * 16;
              pl[h].p[1] = stage + kRows * s.ku * 16 + r * s.ku * 2;
              pl[h].p[2] = nullptr;
            }
            const bool second = kRpw == 2 && warp + kWarpsC < d.rows;
            const int u0 = c * s.ku;
#pragma unroll 4
            for (int u = lane; u < d.ku_this; u += 32) {
              const XUnit x{reinterpret_cast<const uint4*>(act)[u0 + u],
                            reinterpret_cast<const uint4*>(act)[s.units + u0 + u],
                            reinterpret_cast<const float2*>(act + size_t(s.units) * 32)[u0 + u]};
              acc[0] += Unit<DType::kQ4_0>::dotx(gs::Stream<DType::kQ4_0>::load(pl[0], u), x);
              if (kRpw == 2 && second) acc[kRpw - 1] += Unit<DType::kQ4_0>::dotx(gs::Stream<DType::kQ4_0>::load(pl[kRpw - 1], u), x);
            }
          }
          __syncwarp();
          if (lane == 0) gs::mbar_arrive(&empty[st]);
        }
#pragma unroll
        for (int h = 0; h < kRpw; ++h) {
          const int64_t row = g * kRows + warp + kWarpsC * h;
          if (row < s.n_out) {
            const float v = gemv_detail::warp_sum(acc[h]);
            if (lane == 0) s.out[row] = v;
          }
        }
      }
      base += mine * s.n_col_tiles;
      consumers_sync_all<kGroups>();  // the activations may be replaced; every output of the block written
      gemv_done(p);
    }
  }
}

// kRegCap: at most 96 registers a thread, so that two blocks of 9 warps fit an SM (each of its
// four schedulers' 16K registers holds up to 5 of the 18 warps: 5 x 32 x 96 <= 16,384).
template <int kGroups, int kRpw, bool kRegCap = false>
__global__ void __launch_bounds__((kGroups * gs::kConsumerWarps + 1) * 32, 1) __maxnreg__(kRegCap ? 96 : 255)
    chain_kernel(const __grid_constant__ ChainParams p) {
  extern __shared__ __align__(128) uint8_t smem[];
  auto* full = reinterpret_cast<uint64_t*>(smem);
  uint64_t* empty = full + kMaxStages;
  uint8_t* act = smem + 2 * kMaxStages * 8;
  uint32_t act_max = 0;
  for (int k = 0; k < kKinds; ++k) act_max = max(act_max, p.shape[k].act_bytes);
  uint8_t* ring = act + ((act_max + 127) / 128) * 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < p.n_stages; ++s) {
      gs::mbar_init(&full[s], 1);
      gs::mbar_init(&empty[s], gs::kConsumerWarps);
    }
    gs::mbar_fence_init();
  }
  __syncthreads();
  if (threadIdx.x / 32 == kGroups * gs::kConsumerWarps) {
    produce<kWarpsC * kRpw>(p, ring, full, empty);
  } else {
    consume<kGroups, kRpw>(p, ring, act, full, empty);
  }
}

// The register form of the persistent chain: one warp a row as the product's v2 GEMV
// (gemv_kernels.cuh), kWarps warps a block, rows dealt to the grid's warps in turn; each lane holds
// kChunk units of its row in registers and loads the next chunk (of this row or of its next row)
// before dotting this one. A GEMV's first chunk is loaded before its barrier (weights do not
// depend on it). Activations go to shared memory once a GEMV, in the ring kernel's layout.
constexpr int kChunk = 4;
using RawQ4 = Unit<DType::kQ4_0>::Raw;

struct DirectRow {
  int64_t row;  // >= n_out: none
  int c0;       // first unit of the chunk
};

__device__ __forceinline__ void load_chunk(const ChainShape& s, const QWeight& w, DirectRow at, RawQ4 (&r)[kChunk]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int j = 0; j < kChunk; ++j) {
    const int u = at.c0 + lane + 32 * j;
    if (at.row < s.n_out && u < s.units) r[j] = Unit<DType::kQ4_0>::load_stream(w, at.row * s.units + u);
  }
}

template <int kWarps>
__global__ void __launch_bounds__(kWarps * 32, 2) direct_kernel(const __grid_constant__ ChainParams p) {
  extern __shared__ __align__(16) uint8_t act[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int64_t gw = int64_t(blockIdx.x) * kWarps + warp, n_gw = int64_t(gridDim.x) * kWarps;
  for (int l = 0; l < p.n_layers; ++l) {
    for (int k = 0; k < kKinds; ++k) {
      const ChainShape& s = p.shape[k];
      const QWeight w = p.w[l * kKinds + k];
      const int i = l * kKinds + k;
      DirectRow at{gw, 0};
      RawQ4 cur[kChunk];
      load_chunk(s, w, at, cur);
      if (p.dep == Dependency::kBarrier && i > 0) {
        wait_for_previous(p, i);
        __syncthreads();
      }
      stage_activations(s, act, threadIdx.x, kWarps * 32);
      __syncthreads();
      float acc = 0.0f;
      while (at.row < s.n_out) {
        DirectRow next = at;
        next.c0 += 32 * kChunk;
        if (next.c0 >= s.units) next = {at.row + n_gw, 0};
        RawQ4 nxt[kChunk];
        load_chunk(s, w, next, nxt);
#pragma unroll
        for (int j = 0; j < kChunk; ++j) {
          const int u = at.c0 + lane + 32 * j;
          if (u < s.units) {
            const XUnit x{reinterpret_cast<const uint4*>(act)[u], reinterpret_cast<const uint4*>(act)[s.units + u],
                          reinterpret_cast<const float2*>(act + size_t(s.units) * 32)[u]};
            acc += Unit<DType::kQ4_0>::dotx(cur[j], x);
          }
        }
        if (next.row != at.row) {
          const float v = gemv_detail::warp_sum(acc);
          if (lane == 0) s.out[at.row] = v;
          acc = 0.0f;
        }
#pragma unroll
        for (int j = 0; j < kChunk; ++j) cur[j] = nxt[j];
        at = next;
      }
      __syncthreads();  // the activations may be replaced; every output of the block written
      gemv_done(p);
    }
  }
}


__global__ void random_floats(float* x, int64_t n, uint32_t seed) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint32_t h = uint32_t(i) * 2654435761u ^ seed;
  h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
  x[i] = float(h >> 8) / float(1 << 24) * 2.0f - 1.0f;
}
// One warp a 32-element block, as the product's activation quantization (act_quant.cuh).
__global__ void quantize(const float* x, int64_t n, int8_t* q, float2* ds) {
  const int64_t blk = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (blk * 32 >= n) return;
  quantize_q8_0_lane(x[blk * 32 + (threadIdx.x & 31)], q + blk * 32, ds + blk);
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int layers = 32, reps = 5, per_sm = 1;
  bool check = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--layers" && i + 1 < argc) layers = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--blocks-per-sm" && i + 1 < argc) per_sm = std::clamp(std::atoi(argv[++i]), 1, 3);
    else if (a == "--check") check = true;
    else {
      std::fprintf(stderr, "usage: gemv_chain_bench [--layers N] [--reps N] [--blocks-per-sm 1-3] [--check]\n");
      return 2;
    }
  }
  CudaContext ctx(0);
  const int64_t shapes[kKinds][2] = {{4096, 6144}, {4096, 4096}, {4096, 28672}, {14336, 4096}};
  ChainParams p{};
  std::vector<float*> xs(kKinds);
  std::vector<TensorView> x_views(kKinds), out_views(kKinds);
  std::vector<float*> ref_out(kKinds);
  for (int k = 0; k < kKinds; ++k) {
    ChainShape& s = p.shape[k];
    s.n_in = shapes[k][0];
    s.n_out = shapes[k][1];
    s.units = int32_t(s.n_in / 32);
    s.n_col_tiles = std::max(1, (s.units + 64) / 128);  // ~128 units (2 KB of codes) a row segment
    s.ku = (s.units + s.n_col_tiles - 1) / s.n_col_tiles;
    s.ku = (s.ku + 7) / 8 * 8;
    s.n_col_tiles = (s.units + s.ku - 1) / s.ku;
    s.act_bytes = uint32_t(s.units) * 40;
    CERA_CUDA_CHECK(cudaMalloc(&xs[k], s.n_in * 4));
    random_floats<<<unsigned((s.n_in + 255) / 256), 256>>>(xs[k], s.n_in, 7u + k);
    int8_t* q = nullptr;
    float2* ds = nullptr;
    CERA_CUDA_CHECK(cudaMalloc(&q, s.n_in));
    CERA_CUDA_CHECK(cudaMalloc(&ds, s.n_in / 32 * 8));
    quantize<<<unsigned((s.n_in + 255) / 256), 256>>>(xs[k], s.n_in, q, ds);
    s.xq = q;
    s.xds = ds;
    CERA_CUDA_CHECK(cudaMalloc(&s.out, s.n_out * 4));
    CERA_CUDA_CHECK(cudaMalloc(&ref_out[k], s.n_out * 4));
    x_views[k] = make_view(xs[k], DType::kF32, {s.n_in, 1, 1, 1});
    out_views[k] = make_view(ref_out[k], DType::kF32, {s.n_out, 1, 1, 1});
    x_views[k].device = out_views[k].device = Device::kCuda;
  }
  // Weights: every (layer, kind) its own allocation in the GPU layout (codes, then scales).
  std::vector<QWeight> w(size_t(layers) * kKinds);
  std::vector<TensorView> w_views(w.size());
  double bytes = 0;
  for (int l = 0; l < layers; ++l) {
    for (int k = 0; k < kKinds; ++k) {
      const int64_t n_in = shapes[k][0], n_out = shapes[k][1];
      const WeightLayout lay = weight_layout(DType::kQ4_0, n_in, n_out);
      uint8_t* d = nullptr;
      CERA_CUDA_CHECK(cudaMalloc(&d, lay.total_bytes));
      fill(d, int64_t(lay.region_offset[1]), 17u + uint32_t(l * kKinds + k), 0);
      fill(d + lay.region_offset[1], int64_t(lay.total_bytes - lay.region_offset[1]), 91u + uint32_t(l), 1);
      w[size_t(l * kKinds + k)] = qweight_of(DType::kQ4_0, d, n_in, n_out, 0);
      w_views[size_t(l * kKinds + k)] = make_view(d, DType::kQ4_0, {n_in, n_out, 1, 1});
      w_views[size_t(l * kKinds + k)].device = Device::kCuda;
      bytes += double(n_in / 32) * double(n_out) * kUnitBytes;
    }
  }
  QWeight* w_dev = nullptr;
  CERA_CUDA_CHECK(cudaMalloc(&w_dev, w.size() * sizeof(QWeight)));
  CERA_CUDA_CHECK(cudaMemcpy(w_dev, w.data(), w.size() * sizeof(QWeight), cudaMemcpyHostToDevice));
  p.w = w_dev;
  p.n_layers = layers;
  CERA_CUDA_CHECK(cudaMalloc(&p.barrier, 4));

  uint32_t act_max = 0, max_ku = 0;
  int max_cols = 1;
  for (const ChainShape& s : p.shape) {
    act_max = std::max(act_max, s.act_bytes);
    max_ku = std::max(max_ku, uint32_t(s.ku));
    max_cols = std::max(max_cols, int(s.n_col_tiles));
  }
  const size_t fixed = 2 * kMaxStages * 8 + (act_max + 127) / 128 * 128;
  // A block's share of the SM's 228 KB (1 KB of it reserved a block by the hardware).
  const size_t max_smem = std::min<size_t>(227 * 1024, 228 * 1024 / size_t(per_sm) - 1024);
  std::printf("device: %s, %d SMs; %d layers of the 8B Q4_0 shapes, %.2f GB of weights; %d block(s) an SM\n",
              ctx.device_name().c_str(), ctx.sm_count(), layers, bytes * 1e-9, per_sm);

  // The persistent variants: consumer groups of 8 warps, rows a consumer warp dots a tile.
  struct Variant {
    int groups, rpw;
    const void* kernel;
    const char* name;
  };
  const Variant variants[] = {
      {1, 1, reinterpret_cast<const void*>(chain_kernel<1, 1>), "8 consumer warps"},
      {2, 1, reinterpret_cast<const void*>(chain_kernel<2, 1>), "16 consumer warps (two groups of 8)"},
      {1, 2, reinterpret_cast<const void*>(chain_kernel<1, 2>), "8 consumer warps, 2 rows a warp"},
      {1, 2, reinterpret_cast<const void*>(chain_kernel<1, 2, true>), "8 consumer warps, 2 rows a warp, <= 96 registers"},
  };
  // Ring geometry and shared memory of a variant (tiles of 8 x rpw rows).
  auto configure = [&](const Variant& v) {
    p.stage_pitch = (uint32_t(kWarpsC * v.rpw) * max_ku * kUnitBytes + 127) / 128 * 128;
    p.n_stages = int(std::min<size_t>(kMaxStages, (max_smem - fixed) / p.stage_pitch));
    const size_t smem = fixed + size_t(p.n_stages) * p.stage_pitch;
    CERA_CUDA_CHECK(cudaFuncSetAttribute(v.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    return smem;
  };
  // A cooperative launch needs every block resident: a variant that does not fit per_sm blocks an
  // SM (registers, shared memory) is reported instead of launched. So is one whose ring is shorter
  // than the tiles between two of a group's (the other groups' row groups): a group waiting on a
  // stage must be at most one phase of its mbarrier ahead.
  auto fits = [&](const Variant& v) {
    const size_t smem = configure(v);
    int n = 0;
    CERA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, v.kernel, (v.groups * kWarpsC + 1) * 32, smem));
    return p.n_stages >= std::max(2, (v.groups - 1) * max_cols + 1) && n >= per_sm;
  };

  cudaEvent_t e0, e1;
  CERA_CUDA_CHECK(cudaEventCreate(&e0));
  CERA_CUDA_CHECK(cudaEventCreate(&e1));
  // One timed cooperative launch of a persistent kernel (its barrier counter zeroed first).
  auto launch_timed = [&](const void* kernel, unsigned grid, unsigned threads, size_t smem, Dependency dep) {
    p.dep = dep;
    CERA_CUDA_CHECK(cudaMemsetAsync(p.barrier, 0, 4, ctx.stream()));
    void* args[] = {&p};
    CERA_CUDA_CHECK(cudaEventRecord(e0, ctx.stream()));
    CERA_CUDA_CHECK(cudaLaunchCooperativeKernel(kernel, dim3(grid), dim3(threads), args, smem, ctx.stream()));
    CERA_CUDA_CHECK(cudaEventRecord(e1, ctx.stream()));
    CERA_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CERA_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    return ms;
  };
  auto run_chain = [&](const Variant& v, Dependency dep) {
    const size_t smem = configure(v);
    return launch_timed(v.kernel, unsigned(per_sm * ctx.sm_count()), unsigned((v.groups * kWarpsC + 1) * 32), smem,
                        dep);
  };
  // The product's chain, run once eagerly (its scratch allocated outside the capture), then
  // captured as one graph.
  auto product_pass = [&] {
    for (int l = 0; l < layers; ++l) {
      for (int k = 0; k < kKinds; ++k) {
        const GemvTarget t{out_views[k], w_views[size_t(l * kKinds + k)], nullptr};
        gemv_parts(ctx, x_views[k], std::span(&t, 1));
      }
    }
  };
  product_pass();
  CERA_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CERA_CUDA_CHECK(cudaStreamBeginCapture(ctx.stream(), cudaStreamCaptureModeThreadLocal));
  product_pass();
  CERA_CUDA_CHECK(cudaStreamEndCapture(ctx.stream(), &graph));
  CERA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  auto run_product = [&] {
    CERA_CUDA_CHECK(cudaEventRecord(e0, ctx.stream()));
    CERA_CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream()));
    CERA_CUDA_CHECK(cudaEventRecord(e1, ctx.stream()));
    CERA_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CERA_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    return ms;
  };

  std::printf("| run | ms a pass | per layer us | TB/s | share of 4.3 TB/s |\n| --- | --- | --- | --- | --- |\n");
  auto report = [&](const std::string& name, auto&& run) {
    run();
    std::vector<float> ms;
    for (int r = 0; r < reps; ++r) ms.push_back(run());
    const double m = median(ms);
    std::printf("| %s | %.3f | %.1f | %.2f | %.0f %% |\n", name.c_str(), m, m * 1e3 / layers,
                bytes / (m * 1e-3) * 1e-12, 100.0 * bytes / (m * 1e-3) / kRoofline);
    std::fflush(stdout);
  };
  report("product (graph of gemv_parts launches)", run_product);
  // After a product pass and a persistent pass: the last layer's outputs of each, compared.
  auto compare = [&](const char* name) {
    for (int k = 0; k < kKinds; ++k) {
      const int64_t n = p.shape[k].n_out;
      std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
      CERA_CUDA_CHECK(cudaMemcpy(a.data(), p.shape[k].out, n * 4, cudaMemcpyDeviceToHost));
      CERA_CUDA_CHECK(cudaMemcpy(b.data(), ref_out[k], n * 4, cudaMemcpyDeviceToHost));
      double dmax = 0, rmax = 0;
      for (size_t j = 0; j < a.size(); ++j) {
        dmax = std::max(dmax, std::isnan(a[j]) ? INFINITY : std::fabs(double(a[j]) - b[j]));
        rmax = std::max(rmax, std::fabs(double(b[j])));
      }
      std::printf("check %s, kind %d (%lld x %lld): max |persistent - product| / max |product| = %.2e\n", name, k,
                  (long long)shapes[k][0], (long long)n, dmax / std::max(rmax, 1e-30));
    }
  };
  // The register form: blocks of 16 warps, 2 x per_sm blocks an SM (32 warps an SM at 1).
  auto run_direct = [&](Dependency dep) {
    const size_t smem = (act_max + 127) / 128 * 128;
    CERA_CUDA_CHECK(cudaFuncSetAttribute(direct_kernel<16>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    return launch_timed(reinterpret_cast<const void*>(direct_kernel<16>), unsigned(2 * per_sm * ctx.sm_count()),
                        16 * 32, smem, dep);
  };
  {
    int n = 0;
    CERA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, reinterpret_cast<const void*>(direct_kernel<16>),
                                                                  16 * 32, (act_max + 127) / 128 * 128));
    if (n >= 2 * per_sm) {
      report("chain (persistent, registers: one warp a row, 16 warps a block, " + std::to_string(2 * per_sm) +
                 " blocks an SM), barriers", [&] { return run_direct(Dependency::kBarrier); });
      report("stream (persistent, registers, no barriers)", [&] { return run_direct(Dependency::kNone); });
      if (check) {
        run_product();
        run_direct(Dependency::kBarrier);
        compare("registers");
      }
    } else {
      std::printf("| persistent, registers: %d blocks of 16 warps an SM do not fit | | | | |\n", 2 * per_sm);
    }
  }
  for (const Variant& v : variants) {
    if (!fits(v)) {
      std::printf("| persistent, %s: %d block(s) an SM do not fit | | | | |\n", v.name, per_sm);
      continue;
    }
    const std::string ring = ", ring " + std::to_string(p.n_stages) + " x " + std::to_string(p.stage_pitch) + " B";
    report(std::string("chain (persistent, grid barrier between GEMVs), ") + v.name + ring,
           [&] { return run_chain(v, Dependency::kBarrier); });
    report(std::string("stream (persistent, no barriers), ") + v.name + ring,
           [&] { return run_chain(v, Dependency::kNone); });
    if (!check) continue;
    run_product();
    run_chain(v, Dependency::kBarrier);
    compare(v.name);
  }
  return 0;
}
