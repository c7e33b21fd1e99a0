// Backend::top_k on the device: the k best (value, id) of each logits row and its log-sum-exp, so
// that sampling reads back k * 8 + 4 bytes instead of n_vocab * 4.
// Rounds: each block keeps the k best of a 2048-entry chunk of its input (the row's logits first,
// then the previous round's survivors), until one chunk's k remain; a last kernel turns them into
// (id, value) and combines the log-sum-exp partials of the first round. k = 1 reduces with an
// argmax instead of a sort. Candidates travel as 64-bit keys: high word the value's bits mapped
// to an unsigned order, low word ~id, so one descending sort orders by value and then lower id
// (the host reference's tie rule) without relying on sort stability.
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>

#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/launch.cuh"

namespace cera::ops::cuda {
namespace {

constexpr int kThreads = 512, kItems = 4, kChunk = kThreads * kItems;

__device__ __forceinline__ uint64_t make_key(float v, int32_t id) {
  uint32_t b = __float_as_uint(v + 0.0f);  // -0 + 0 = +0: equal values get equal keys
  b = (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);
  return (uint64_t(b) << 32) | uint64_t(~uint32_t(id));
}
__device__ __forceinline__ float key_value(uint64_t key) {
  const uint32_t b = uint32_t(key >> 32);
  return __uint_as_float((b & 0x80000000u) != 0 ? (b & 0x7FFFFFFFu) : ~b);
}
__device__ __forceinline__ int32_t key_id(uint64_t key) { return int32_t(~uint32_t(key)); }

struct RoundParams {
  const float* logits;  // first round: row r at logits + r * logits_stride; else null
  int64_t logits_stride;
  const uint64_t* in;   // later rounds: row r's n keys at in + r * in_stride
  int64_t in_stride;
  int64_t n;            // entries per row of the input
  uint64_t* out;        // row r's chunk c keeps k keys at out + r * out_stride + c * k
  int64_t out_stride;
  float2* partial;      // first round: (max, sum exp(v - max)) per chunk, [n_rows][n_chunks]
  int32_t k;
  float softcap;
};

// A masked logit (mask_logits: -inf) stays -inf under the softcap.
__device__ __forceinline__ float transform(float x, float cap) {
  return cap > 0.0f && x != -INFINITY ? cap * tanhf(x / cap) : x;
}

template <bool kFirst, bool kArgmax>
__global__ void __launch_bounds__(kThreads) top_k_round(const __grid_constant__ RoundParams p) {
  pdl_entry();
  using Sort = cub::BlockRadixSort<uint64_t, kThreads, kItems>;
  using Max = cub::BlockReduce<uint64_t, kThreads>;
  using Sum = cub::BlockReduce<float, kThreads>;
  using MaxF = cub::BlockReduce<float, kThreads>;
  __shared__ union {
    typename Sort::TempStorage sort;
    typename Max::TempStorage max;
  } tmp;
  __shared__ typename Sum::TempStorage sum_tmp;
  __shared__ typename MaxF::TempStorage maxf_tmp;
  __shared__ float row_max;
  const int64_t r = blockIdx.y, c = blockIdx.x, base = c * kChunk;
  uint64_t keys[kItems];
  float vals[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int64_t e = base + int64_t(threadIdx.x) * kItems + i;  // blocked: ids ascend with rank
    keys[i] = 0;  // below every real key
    vals[i] = -INFINITY;
    if (e < p.n) {
      if constexpr (kFirst) {
        vals[i] = transform(p.logits[r * p.logits_stride + e], p.softcap);
        keys[i] = make_key(vals[i], int32_t(e));
      } else {
        keys[i] = p.in[r * p.in_stride + e];
      }
    }
  }
  if constexpr (kFirst) {
    float m = vals[0];
#pragma unroll
    for (int i = 1; i < kItems; ++i) m = fmaxf(m, vals[i]);
    m = MaxF(maxf_tmp).Reduce(m, ::cuda::maximum<>{});
    if (threadIdx.x == 0) row_max = m;
    __syncthreads();
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < kItems; ++i) s += vals[i] == -INFINITY ? 0.0f : __expf(vals[i] - row_max);
    s = Sum(sum_tmp).Sum(s);
    if (threadIdx.x == 0) p.partial[r * gridDim.x + c] = make_float2(row_max, s);
  }
  uint64_t* out = p.out + r * p.out_stride + c * p.k;
  if constexpr (kArgmax) {
    uint64_t best = keys[0];
#pragma unroll
    for (int i = 1; i < kItems; ++i) best = keys[i] > best ? keys[i] : best;
    best = Max(tmp.max).Reduce(best, ::cuda::maximum<>{});
    if (threadIdx.x == 0) out[0] = best;
  } else {
    Sort(tmp.sort).SortDescending(keys);
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int rank = threadIdx.x * kItems + i;
      if (rank < p.k) out[rank] = keys[i];
    }
  }
}

struct FinishParams {
  const uint64_t* keys;  // row r's k best at keys + r * keys_stride, descending
  int64_t keys_stride;
  const float2* partial;
  int64_t n_partial;
  int32_t* ids;          // [n_rows][k]
  float* values;
  float* lse;            // [n_rows]
  int32_t k;
};

__global__ void top_k_finish(const __grid_constant__ FinishParams p) {
  pdl_entry();
  const int64_t r = blockIdx.x;
  for (int j = threadIdx.x; j < p.k; j += blockDim.x) {
    const uint64_t key = p.keys[r * p.keys_stride + j];
    p.ids[r * p.k + j] = key_id(key);
    p.values[r * p.k + j] = key_value(key);
  }
  if (threadIdx.x == 0) {
    // The partials are few (n_vocab / 2048): one thread combines them in order.
    const float2* part = p.partial + r * p.n_partial;
    float m = -INFINITY;
    for (int64_t i = 0; i < p.n_partial; ++i) m = fmaxf(m, part[i].x);
    double s = 0;
    for (int64_t i = 0; i < p.n_partial; ++i) s += double(part[i].y) * exp(double(part[i].x) - m);
    p.lse[r] = m + float(log(s));
  }
}

template <bool kFirst>
void launch_round(CudaContext& ctx, const RoundParams& p, int64_t chunks, int64_t rows) {
  const dim3 grid{unsigned(chunks), unsigned(rows), 1u};
  if (p.k == 1) {
    launch(ctx.stream(), top_k_round<kFirst, true>, grid, kThreads, 0, p);
  } else {
    launch(ctx.stream(), top_k_round<kFirst, false>, grid, kThreads, 0, p);
  }
  CERA_CUDA_LAUNCHED();
}

}  // namespace

void top_k(CudaContext& ctx, const TensorView& ids, const TensorView& values, const TensorView& lse,
           const TensorView& logits, const TopKParams& params) {
  check_f32_device(logits, "top_k logits");
  check_f32_device(values, "top_k values");
  check_f32_device(lse, "top_k lse");
  CERA_CHECK_MSG(ids.dtype == DType::kI32 && ids.device == Device::kCuda, "top_k: ids must be I32 on the device");
  const int64_t n = logits.cols(), rows = logits.rows(), k = params.k;
  CERA_CHECK_MSG(k >= 1 && k <= n && k <= TopKParams::kMaxTopK, "top_k: k out of range");
  CERA_CHECK_MSG(ids.cols() == k && ids.rows() == rows && ids.packed() && values.cols() == k &&
                     values.rows() == rows && values.packed() && lse.n_elements() == rows && lse.packed(),
                 "top_k: output shapes must be [k, n_rows] (ids, values) and [n_rows] (lse), packed");
  const int64_t chunks0 = ceil_div(n, kChunk);
  const int64_t per_row = chunks0 * k;  // the largest round output
  const uint64_t key_bytes = uint64_t(rows) * uint64_t(per_row) * 8;
  auto* scratch = static_cast<std::byte*>(
      ctx.scratch(ScratchKind::kTopK, 2 * key_bytes + uint64_t(rows * chunks0) * sizeof(float2)));
  if (!ctx.launching()) return;
  uint64_t* buf[2] = {reinterpret_cast<uint64_t*>(scratch), reinterpret_cast<uint64_t*>(scratch + key_bytes)};
  auto* partial = reinterpret_cast<float2*>(scratch + 2 * key_bytes);
  RoundParams p{};
  p.k = int32_t(k);
  p.softcap = params.softcap;
  p.logits = reinterpret_cast<const float*>(logits.data);
  p.logits_stride = logits.stride() / 4;
  p.n = n;
  p.out = buf[0];
  p.out_stride = per_row;
  p.partial = partial;
  launch_round<true>(ctx, p, chunks0, rows);
  int64_t m = chunks0 * k;
  int cur = 0;
  while (m > k) {
    const int64_t chunks = ceil_div(m, kChunk);
    RoundParams q{};
    q.k = int32_t(k);
    q.in = buf[cur];
    q.in_stride = per_row;
    q.n = m;
    q.out = buf[1 - cur];
    q.out_stride = per_row;
    launch_round<false>(ctx, q, chunks, rows);
    cur = 1 - cur;
    m = chunks * k;
  }
  const FinishParams f{buf[cur], per_row, partial, chunks0, reinterpret_cast<int32_t*>(ids.data),
                       reinterpret_cast<float*>(values.data), reinterpret_cast<float*>(lse.data), int32_t(k)};
  launch(ctx.stream(), top_k_finish, unsigned(rows), 256, 0, f);
  CERA_CUDA_LAUNCHED();
}

}  // namespace cera::ops::cuda
