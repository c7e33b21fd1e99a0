// matmul_experts: every (token, slot) row times the expert its id names, the ids read on the
// device (no host synchronisation). The dot products are the dense GEMV's own (q_row_dot and
// f_row_dot of gemv_kernels.cuh: one warp per weight row, activations quantized like the CPU's).
// Decision: rows are gathered per expert so that a weight row is read once for up to 8 rows of
// its expert. Decode batches (<= kGemvMaxTokens tokens) take one launch whose blocks find their
// expert's rows by scanning the ids (a block whose expert an earlier row already chose exits);
// prompt batches first group the rows by expert with a one-block stable counting sort, then
// take one launch over (expert, up to kTileRows rows) tiles, so each chosen expert is read once
// per tile and experts nobody chose are never read.
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gemv_kernels.cuh"
#include "ops/cuda/launch.cuh"

namespace cera::ops::cuda {
namespace {

using namespace gemv_detail;

constexpr int kChunk = kMaxTokensPass;  // rows dotted per pass over a weight row
constexpr int kTileRows = 32;           // rows of one expert per block in the grouped launch
constexpr int kSortThreads = 512;
constexpr int kSortWarps = kSortThreads / 32;
constexpr int64_t kMaxExperts = 512;  // the sort keeps (kSortWarps + 1) ints per expert in shared memory

constexpr bool is_plain(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

struct Tile {
  int32_t expert, first, count, pad;  // grouped positions [first, first + count) of expert
};

struct ExpertParams {
  QWeight w;               // the stack as one [n_in, n_out * n_expert] weight: expert e's row r is e * n_out + r
  int64_t n_in, n_out;
  int32_t n_expert;
  int64_t units_per_row;   // quantized weights: GEMV units per row
  const int8_t* xq;        // quantized activations: activation row a at xq + a * n_in
  const float2* xds;       //   and its (d, code sum) at xds + a * n_in / 32
  const float* xf;         // plain weights: activation row a at xf + a * xf_stride
  int64_t xf_stride;       // floats
  float* out;              // row r = j + k * t at out + r * out_stride
  int64_t out_stride;      // floats
  const int32_t* ids;      // [k, n_tokens] packed: row r's expert is ids[r]
  int32_t k;
  int32_t n_rows;          // k * n_tokens
  bool shared_x;           // activation row of row r: r / k (x is [n_in, n_tokens]) or r
  // The grouped launch (prompt batches) only; null perm selects the decode scan.
  const int32_t* perm;     // grouped position -> row
  const Tile* tiles;
  const int32_t* n_tiles;
};

__device__ __forceinline__ int64_t act_row(const ExpertParams& p, int32_t r) { return p.shared_x ? r / p.k : r; }

// B rows (rows[0..B)) of expert e, weight row `row`: one dot per row, written to out.
template <DType T, int kVec, int B>
__device__ __forceinline__ void expert_chunk(const ExpertParams& p, int64_t e, int64_t row,
                                             const int32_t (&rows)[kChunk]) {
  float acc[B] = {};
  const int64_t wrow = e * p.n_out + row;
  if constexpr (is_plain(T)) {
    const float* x[B];
#pragma unroll
    for (int t = 0; t < B; ++t) x[t] = p.xf + act_row(p, rows[t]) * p.xf_stride;
    f_row_dot<T, B, kVec>(p.w.r0 + wrow * p.w.row_stride, p.n_in, x, acc);
  } else {
    ActRow x[B];
#pragma unroll
    for (int t = 0; t < B; ++t) {
      const int64_t a = act_row(p, rows[t]);
      x[t] = {p.xq + a * p.n_in, p.xds + a * (p.n_in / 32)};
    }
    q_row_dot<T, B>(p.w, wrow * p.units_per_row, p.units_per_row, x, acc);
  }
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int t = 0; t < B; ++t) {
    const float v = warp_sum(acc[t]);
    if (lane == 0) p.out[int64_t(rows[t]) * p.out_stride + row] = v;
  }
}

// n (1..kChunk) rows: the instantiation for exactly n, so no dot is wasted on padding.
template <DType T, int kVec>
__device__ __forceinline__ void expert_rows(const ExpertParams& p, int64_t e, int64_t row,
                                            const int32_t (&rows)[kChunk], int n) {
  switch (n) {
    case 1: expert_chunk<T, kVec, 1>(p, e, row, rows); break;
    case 2: expert_chunk<T, kVec, 2>(p, e, row, rows); break;
    case 3: expert_chunk<T, kVec, 3>(p, e, row, rows); break;
    case 4: expert_chunk<T, kVec, 4>(p, e, row, rows); break;
    case 5: expert_chunk<T, kVec, 5>(p, e, row, rows); break;
    case 6: expert_chunk<T, kVec, 6>(p, e, row, rows); break;
    case 7: expert_chunk<T, kVec, 7>(p, e, row, rows); break;
    default: expert_chunk<T, kVec, 8>(p, e, row, rows); break;
  }
}

// Block (weight rows blockIdx.x * kWarps .., group blockIdx.y); one warp per weight row. Decode:
// group y is "the expert row y chose", led by its first row; grouped: tile y.
template <DType T, int kVec>
__global__ void __launch_bounds__(kWarps * 32) experts_kernel(const __grid_constant__ ExpertParams p) {
  pdl_entry();
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (row >= p.n_out) return;  // whole warps: no block-wide synchronisation below
  int32_t rows[kChunk];
  if (p.perm != nullptr) {
    if (int32_t(blockIdx.y) >= *p.n_tiles) return;
    const Tile tile = p.tiles[blockIdx.y];
    for (int32_t c0 = 0; c0 < tile.count; c0 += kChunk) {
      const int n = min(kChunk, tile.count - c0);
      for (int i = 0; i < n; ++i) rows[i] = p.perm[tile.first + c0 + i];
      expert_rows<T, kVec>(p, tile.expert, row, rows, n);
    }
    return;
  }
  const int32_t r = int32_t(blockIdx.y);
  const int32_t e = p.ids[r];
  if (e < 0 || e >= p.n_expert) return;  // out-of-range ids leave their rows unwritten
  for (int32_t b = 0; b < r; b += 32) {
    if (__any_sync(0xffffffffu, b + lane < r && p.ids[b + lane] == e)) return;  // not the leader
  }
  for (int32_t pos = r; pos < p.n_rows;) {
    int n = 0;
    while (pos < p.n_rows && n < kChunk) {  // the next (up to) kChunk rows of expert e from pos on
      unsigned m = __ballot_sync(0xffffffffu, pos + lane < p.n_rows && p.ids[pos + lane] == e);
      while (m != 0 && n < kChunk) {
        rows[n++] = pos + __ffs(m) - 1;
        m &= m - 1;
      }
      pos = m != 0 ? pos + __ffs(m) - 1 : pos + 32;
    }
    if (n > 0) expert_rows<T, kVec>(p, e, row, rows, n);
  }
}

struct GroupParams {
  const int32_t* ids;  // [n_rows]
  int32_t n_rows, n_expert;
  int32_t* perm;       // [n_rows] out: rows grouped by expert, each expert's rows in order
  Tile* tiles;         // out: every (expert, kTileRows rows) tile in order
  int32_t* n_tiles;    // out
};

// One block: count per expert, scan and cut tiles (thread 0, n_expert steps), then place the rows
// kSortThreads at a time, stably: a row's rank is its expert's cursor + rows of the same expert in
// lower lanes (__match_any_sync) + in lower warps (per-warp counts in shared memory).
__global__ void __launch_bounds__(kSortThreads) group_rows_kernel(const __grid_constant__ GroupParams p) {
  pdl_entry();
  extern __shared__ int32_t shared[];
  int32_t* cursor = shared;                   // [n_expert]: counts, then the next grouped position
  int32_t* warp_count = shared + p.n_expert;  // [kSortWarps][n_expert]
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid / 32;
  for (int e = tid; e < p.n_expert; e += kSortThreads) cursor[e] = 0;
  __syncthreads();
  for (int r = tid; r < p.n_rows; r += kSortThreads) {
    const int32_t e = p.ids[r];
    if (e >= 0 && e < p.n_expert) atomicAdd(&cursor[e], 1);
  }
  __syncthreads();
  if (tid == 0) {
    int32_t first = 0, n_tiles = 0;
    for (int32_t e = 0; e < p.n_expert; ++e) {
      const int32_t c = cursor[e];
      for (int32_t s = 0; s < c; s += kTileRows) p.tiles[n_tiles++] = {e, first + s, min(kTileRows, c - s), 0};
      cursor[e] = first;
      first += c;
    }
    *p.n_tiles = n_tiles;
  }
  __syncthreads();
  for (int base = 0; base < p.n_rows; base += kSortThreads) {
    for (int i = tid; i < kSortWarps * p.n_expert; i += kSortThreads) warp_count[i] = 0;
    __syncthreads();
    const int r = base + tid;
    int32_t e = r < p.n_rows ? p.ids[r] : -1;
    const bool valid = e >= 0 && e < p.n_expert;
    if (!valid) e = -1;
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    const unsigned below = peers & ((1u << lane) - 1u);
    if (valid && below == 0) warp_count[warp * p.n_expert + e] = __popc(peers);
    __syncthreads();
    if (valid) {
      int32_t rank = cursor[e] + __popc(below);
      for (int w = 0; w < warp; ++w) rank += warp_count[w * p.n_expert + e];
      p.perm[rank] = r;
    }
    __syncthreads();
    for (int x = tid; x < p.n_expert; x += kSortThreads) {
      int32_t total = 0;
      for (int w = 0; w < kSortWarps; ++w) total += warp_count[w * p.n_expert + x];
      cursor[x] += total;
    }
    __syncthreads();
  }
}

using ExpertKernel = void (*)(ExpertParams);

// Instantiated configurations: every supported type; plain types with 16-byte vectors or scalars.
template <DType T>
ExpertKernel pick_t(bool vec) {
  if constexpr (is_plain(T)) {
    return vec ? experts_kernel<T, T == DType::kF32 ? 4 : 8> : experts_kernel<T, 1>;
  } else {
    return experts_kernel<T, 1>;
  }
}

ExpertKernel pick_kernel(DType t, bool vec) {
  switch (t) {
    case DType::kF32: return pick_t<DType::kF32>(vec);
    case DType::kF16: return pick_t<DType::kF16>(vec);
    case DType::kBF16: return pick_t<DType::kBF16>(vec);
    case DType::kQ4_0: return pick_t<DType::kQ4_0>(vec);
    case DType::kQ4_1: return pick_t<DType::kQ4_1>(vec);
    case DType::kQ5_0: return pick_t<DType::kQ5_0>(vec);
    case DType::kQ5_1: return pick_t<DType::kQ5_1>(vec);
    case DType::kQ8_0: return pick_t<DType::kQ8_0>(vec);
    case DType::kQ4_K: return pick_t<DType::kQ4_K>(vec);
    case DType::kQ5_K: return pick_t<DType::kQ5_K>(vec);
    case DType::kQ6_K: return pick_t<DType::kQ6_K>(vec);
    default: return nullptr;
  }
}

uint64_t align16(uint64_t x) { return (x + 15) & ~uint64_t{15}; }

}  // namespace

void matmul_experts(CudaContext& ctx, const TensorView& out, const TensorView& experts, const TensorView& x,
                    const TensorView& ids) {
  check_f32_device(out, "matmul_experts out");
  check_f32_device(x, "matmul_experts x");
  CERA_CHECK_MSG(ids.device == Device::kCuda && ids.dtype == DType::kI32 && ids.packed(),
                 "matmul_experts ids: expected a packed CUDA I32 tensor");
  CERA_CHECK_MSG(experts.device == Device::kCuda, "matmul_experts: experts is not a CUDA tensor");
  const DType t = experts.dtype;
  CERA_CHECK_MSG(is_supported_weight(t), "matmul_experts: no CUDA kernel for weight type " + std::string(dtype_name(t)));
  const int64_t n_in = experts.ne[0], n_out = experts.ne[1], n_expert = experts.ne[2];
  const int64_t k = ids.cols(), n_tokens = ids.rows(), n_rows = k * n_tokens;
  CERA_CHECK_MSG(experts.ne[3] == 1 && x.cols() == n_in, "matmul_experts: x has " + std::to_string(x.cols()) +
                                                              " columns, experts " + std::to_string(n_in));
  const bool shared_x = x.rows() == n_tokens;
  CERA_CHECK_MSG(shared_x || (x.ne[1] == k && x.rows() == n_rows),
                 "matmul_experts: x must be [n_in, n_tokens] or [n_in, k, n_tokens]");
  CERA_CHECK_MSG(out.cols() == n_out && out.ne[1] == k && out.rows() == n_rows,
                 "matmul_experts: out must be [n_out, k, n_tokens]");
  CERA_CHECK_MSG(experts.packed(), "matmul_experts: experts must be a whole imported tensor (GPU layout)");
  CERA_CHECK(n_in % dtype_block_size(t) == 0);
  CERA_CHECK_MSG(n_rows < (int64_t{1} << 31) && n_expert < (int64_t{1} << 31), "matmul_experts: too many rows");
  if (n_rows == 0 || n_out == 0) return;
  const bool grouped = n_tokens > kGemvMaxTokens;
  CERA_CHECK_MSG(!grouped || n_expert <= kMaxExperts,
                 "matmul_experts: prompt batches support up to " + std::to_string(kMaxExperts) + " experts, not " +
                     std::to_string(n_expert));

  ExpertParams p{};
  p.w = qweight_of(t, experts.data, n_in, n_out * n_expert, experts.stride());
  p.n_in = n_in;
  p.n_out = n_out;
  p.n_expert = int32_t(n_expert);
  p.out = reinterpret_cast<float*>(out.data);
  p.out_stride = out.stride() / 4;
  p.ids = reinterpret_cast<const int32_t*>(ids.data);
  p.k = int32_t(k);
  p.n_rows = int32_t(n_rows);
  p.shared_x = shared_x;
  bool vec = false;
  if (is_plain(t)) {
    const int64_t wide = t == DType::kF32 ? 4 : 8;
    vec = n_in % wide == 0 && x.stride() % 16 == 0 && reinterpret_cast<uintptr_t>(x.data) % 16 == 0 &&
          experts.stride() % 16 == 0 && reinterpret_cast<uintptr_t>(experts.data) % 16 == 0;
    p.xf = reinterpret_cast<const float*>(x.data);
    p.xf_stride = x.stride() / 4;
  } else {
    p.units_per_row = n_in / (dtype_block_size(t) == 32 ? 32 : 64);
    const ActQ8 a = quantize_activations(ctx, x, dtype_block_size(t) == 32 ? 32 : 256);
    p.xq = a.q;
    p.xds = a.ds;
  }
  int64_t groups = n_rows;
  GroupParams g{};
  if (grouped) {
    groups = ceil_div(n_rows, kTileRows) + std::min(n_expert, n_rows);  // each expert adds at most one partial tile
    const uint64_t perm_bytes = align16(uint64_t(n_rows) * 4), tile_bytes = uint64_t(groups) * sizeof(Tile);
    auto* base = static_cast<std::byte*>(ctx.scratch(ScratchKind::kMoeGroups, perm_bytes + tile_bytes + 16));
    p.perm = reinterpret_cast<const int32_t*>(base);
    p.tiles = reinterpret_cast<const Tile*>(base + perm_bytes);
    p.n_tiles = reinterpret_cast<const int32_t*>(base + perm_bytes + tile_bytes);
    g = {p.ids, p.n_rows, p.n_expert, const_cast<int32_t*>(p.perm), const_cast<Tile*>(p.tiles),
         const_cast<int32_t*>(p.n_tiles)};
  }
  CERA_CHECK_MSG(groups <= 65535, "matmul_experts: " + std::to_string(groups) + " row groups exceed the grid");
  const ExpertKernel kernel = pick_kernel(t, vec);
  CERA_CHECK(kernel != nullptr);
  if (!ctx.launching()) return;
  if (grouped) {
    const size_t shared = size_t(kSortWarps + 1) * size_t(n_expert) * sizeof(int32_t);
    launch(ctx.stream(), group_rows_kernel, 1, kSortThreads, shared, g);
    CERA_CUDA_LAUNCHED();
  }
  launch(ctx.stream(), kernel, dim3(ceil_div(n_out, kWarps), unsigned(groups)), kWarps * 32, 0, p);
  CERA_CUDA_LAUNCHED();
  forget_overwritten_activations(ctx, out);
}

}  // namespace cera::ops::cuda
