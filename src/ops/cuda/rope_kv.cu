// RoPE on activations and on cache rows (kv_rerotate), and the cache row movers kv_store and
// kv_copy. RoPE angles are computed in double like the CPU reference: theta grows with the
// position, and a float angle at position 10^4 would be off by ~1e-3 rad. Cache rows are F32 or
// F16 (K and V of one type): F16 rows are written rounded to nearest even and rotated in float.
#include <cuda_fp16.h>

#include <cstdint>
#include <vector>

#include "ops/cuda/act_quant.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/launch.cuh"

namespace cera::ops::cuda {
namespace {

struct RopeKernelParams {
  void* base;               // float, or __half cache rows (launch_rope's `f16`)
  int64_t token_stride;     // elements between tokens (or cache slots)
  int64_t head_stride;      // elements between heads of one token
  const int32_t* slots;     // cache rows of the tokens, or null (token t at row t)
  const int32_t* positions; // [n_tokens], or null: every token at `delta`
  int32_t delta;
  const float* freq_factors;  // [n_rot / 2] or null
  int64_t n_heads;
  int64_t n_units;          // n_tokens * n_heads
  int32_t n_rot;
  float freq_base;
  float freq_scale;
  RopeKind kind;
};

// One block per token: each thread computes the angles of its pairs once (double pow, cos, sin)
// and rotates them in every head of the token. Decision: one block per (token, head) recomputed
// the angles per head: the 8B prompt's Q rope (512 tokens x 32 heads) took 22.7 us (ncu).
// Slots, positions and freq_factors are host data, so the first angles are computed before the
// PDL wait (rope_angles, act_quant.cuh).
template <class T>  // float or __half
__global__ void rope_kernel(const __grid_constant__ RopeKernelParams p) {
  const int64_t t = blockIdx.x;
  const int64_t row = p.slots != nullptr ? p.slots[t] : t;
  const int32_t pos = p.positions != nullptr ? p.positions[t] : p.delta;
  const RopeMath r{p.freq_factors, p.n_rot, p.freq_base, p.freq_scale, p.kind == RopeKind::kNeox};
  const RopeAngles angles = rope_angles(r, pos);
  pdl_entry();
  T* x = static_cast<T*>(p.base) + row * p.token_stride;
#pragma unroll
  for (int k = 0; k < kRopeAhead; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i >= p.n_rot / 2) break;
    for (int64_t h = 0; h < p.n_heads; ++h) rope_pair(r, x + h * p.head_stride, i, angles.cs[k]);
  }
  for (int i = threadIdx.x + kRopeAhead * blockDim.x; i < p.n_rot / 2; i += blockDim.x) {
    const float2 cs = rope_angle(r, i, pos);
    for (int64_t h = 0; h < p.n_heads; ++h) rope_pair(r, x + h * p.head_stride, i, cs);
  }
}

void launch_rope(CudaContext& ctx, RopeKernelParams p, const RopeParams& rp, bool f16 = false) {
  CERA_CHECK_MSG(rp.n_rot > 0 && rp.n_rot % 2 == 0, "rope: n_rot must be even and positive");
  p.n_rot = rp.n_rot;
  p.freq_base = rp.freq_base;
  p.freq_scale = rp.freq_scale;
  p.kind = rp.kind;
  p.freq_factors = rp.freq_factors != nullptr ? ctx.device_array(std::span(rp.freq_factors, size_t(rp.n_rot / 2)))
                                              : nullptr;
  if (p.n_units == 0 || !ctx.launching()) return;
  const int64_t n_tokens = p.n_units / p.n_heads;
  CERA_CHECK(n_tokens < (int64_t{1} << 31));
  const unsigned threads = rp.n_rot / 2 >= 64 ? 64 : 32;
  if (f16) {
    launch(ctx.stream(), rope_kernel<__half>, unsigned(n_tokens), threads, 0, p);
  } else {
    launch(ctx.stream(), rope_kernel<float>, unsigned(n_tokens), threads, 0, p);
  }
  CERA_CUDA_LAUNCHED();
}

struct CopyRowsParams {
  const void* src_k;  // Src rows
  const void* src_v;
  int64_t src_k_stride, src_v_stride;  // elements
  void* dst_k;        // Dst rows
  void* dst_v;
  int64_t dst_k_stride, dst_v_stride;
  const int32_t* src_rows;  // null: row t
  const int32_t* dst_rows;
  int64_t n;  // elements per row
};

// One block per row pair: K row and V row copied together, converted from Src to Dst.
// Instantiated: <float, float> and <float, __half> (kv_store), <__half, __half> (kv_copy).
template <class Src, class Dst>
__global__ void copy_rows_kernel(const __grid_constant__ CopyRowsParams p) {
  pdl_entry();
  const int64_t t = blockIdx.x;
  const int64_t s = p.src_rows != nullptr ? p.src_rows[t] : t, d = p.dst_rows[t];
  const auto* src_k = static_cast<const Src*>(p.src_k);
  const auto* src_v = static_cast<const Src*>(p.src_v);
  auto* dst_k = static_cast<Dst*>(p.dst_k);
  auto* dst_v = static_cast<Dst*>(p.dst_v);
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) {
    dst_k[d * p.dst_k_stride + i] = from_float<Dst>(to_float(src_k[s * p.src_k_stride + i]));
    dst_v[d * p.dst_v_stride + i] = from_float<Dst>(to_float(src_v[s * p.src_v_stride + i]));
  }
}

// Bytes per cache element after checking the layer: K and V both F32 or both F16.
int64_t check_layer(const KvLayer& layer) {
  CERA_CHECK_MSG(layer.k.device == Device::kCuda && layer.v.device == Device::kCuda, "kv layer: not on CUDA");
  CERA_CHECK_MSG(layer.k.dtype == layer.v.dtype && (layer.k.dtype == DType::kF32 || layer.k.dtype == DType::kF16),
                 "kv layer: K and V must both be F32 or both F16, got " + std::string(dtype_name(layer.k.dtype)) +
                     " and " + std::string(dtype_name(layer.v.dtype)));
  CERA_CHECK_MSG((layer.k.data != nullptr && layer.v.data != nullptr) || layer.k.n_elements() == 0,
                 "kv layer: null data");
  CERA_CHECK(layer.k.cols() == layer.v.cols() && layer.k.rows() == layer.v.rows());
  CERA_CHECK(layer.block_size > 0);
  const int64_t elem = layer.k.dtype == DType::kF16 ? 2 : 4;
  CERA_CHECK(layer.k.stride() % elem == 0 && layer.v.stride() % elem == 0);
  return elem;
}

void check_slot(const KvLayer& layer, int32_t slot) {
  CERA_CHECK_MSG(slot >= 0 && slot < layer.k.rows(), "kv slot " + std::to_string(slot) + " out of range");
}

enum class RowCopy : uint8_t { kF32, kF32ToF16, kF16 };

void launch_copy_rows(CudaContext& ctx, const CopyRowsParams& p, int64_t n_rows, RowCopy kind) {
  if (n_rows == 0 || !ctx.launching()) return;
  switch (kind) {
    case RowCopy::kF32: launch(ctx.stream(), copy_rows_kernel<float, float>, unsigned(n_rows), 128, 0, p); break;
    case RowCopy::kF32ToF16: launch(ctx.stream(), copy_rows_kernel<float, __half>, unsigned(n_rows), 128, 0, p); break;
    case RowCopy::kF16: launch(ctx.stream(), copy_rows_kernel<__half, __half>, unsigned(n_rows), 128, 0, p); break;
  }
  CERA_CUDA_LAUNCHED();
}

}  // namespace

void rope(CudaContext& ctx, const TensorView& x, std::span<const int32_t> positions, const RopeParams& params) {
  check_f32_device(x, "rope x");
  const auto n_tokens = static_cast<int64_t>(positions.size());
  CERA_CHECK_MSG(n_tokens > 0 && x.rows() % n_tokens == 0, "rope: rows are not heads x tokens");
  CERA_CHECK_MSG(params.n_rot <= x.cols(), "rope: n_rot exceeds head_dim");
  const int64_t n_heads = x.rows() / n_tokens;
  RopeKernelParams p{};
  p.base = x.data;
  p.token_stride = n_heads * (x.stride() / 4);
  p.head_stride = x.stride() / 4;
  p.positions = ctx.device_array(positions);
  p.n_heads = n_heads;
  p.n_units = n_tokens * n_heads;
  launch_rope(ctx, p, params);
}

void kv_store(CudaContext& ctx, const KvLayer& layer, const TensorView& k, const TensorView& v,
              std::span<const int32_t> slots) {
  const int64_t elem = check_layer(layer);
  check_f32_device(k, "kv_store k");
  check_f32_device(v, "kv_store v");
  const auto n = static_cast<int64_t>(slots.size());
  CERA_CHECK(k.cols() == layer.k.cols() && k.rows() == n);
  CERA_CHECK(v.cols() == layer.v.cols() && v.rows() == n);
  for (int32_t s : slots) check_slot(layer, s);
  CopyRowsParams p{k.data, v.data, k.stride() / 4, v.stride() / 4, layer.k.data, layer.v.data,
                   layer.k.stride() / elem, layer.v.stride() / elem, nullptr, ctx.device_array(slots), k.cols()};
  launch_copy_rows(ctx, p, n, elem == 2 ? RowCopy::kF32ToF16 : RowCopy::kF32);
}

void kv_copy(CudaContext& ctx, const KvLayer& layer, std::span<const int32_t> src_slots,
             std::span<const int32_t> dst_slots) {
  const int64_t elem = check_layer(layer);
  CERA_CHECK(src_slots.size() == dst_slots.size());
  // The runtime never lets a call's destinations overlap its own sources (kv_cache.cpp), so the
  // rows can move in parallel; equal pairs are dropped like the CPU does.
  std::vector<int32_t> src, dst;
  for (size_t i = 0; i < src_slots.size(); ++i) {
    check_slot(layer, src_slots[i]);
    check_slot(layer, dst_slots[i]);
    if (src_slots[i] == dst_slots[i]) continue;
    src.push_back(src_slots[i]);
    dst.push_back(dst_slots[i]);
  }
  if (src.empty()) return;
  const int64_t stride_k = layer.k.stride() / elem, stride_v = layer.v.stride() / elem;
  const int32_t* d_src = ctx.device_array(std::span<const int32_t>(src));
  const int32_t* d_dst = ctx.device_array(std::span<const int32_t>(dst));
  CopyRowsParams p{layer.k.data, layer.v.data, stride_k, stride_v, layer.k.data, layer.v.data, stride_k, stride_v,
                   d_src, d_dst, layer.k.cols()};
  launch_copy_rows(ctx, p, int64_t(src.size()), elem == 2 ? RowCopy::kF16 : RowCopy::kF32);
}

void kv_rerotate(CudaContext& ctx, const KvLayer& layer, std::span<const int32_t> slots, int32_t delta,
                 int32_t head_dim, const RopeParams& params) {
  const int64_t elem = check_layer(layer);
  CERA_CHECK(head_dim > 0 && layer.k.cols() % head_dim == 0 && params.n_rot <= head_dim);
  for (int32_t s : slots) check_slot(layer, s);
  if (slots.empty()) return;
  RopeKernelParams p{};
  p.base = layer.k.data;
  p.token_stride = layer.k.stride() / elem;
  p.head_stride = head_dim;
  p.slots = ctx.device_array(slots);
  p.delta = delta;
  p.n_heads = layer.k.cols() / head_dim;
  p.n_units = int64_t(slots.size()) * p.n_heads;
  launch_rope(ctx, p, params, elem == 2);
}

}  // namespace cera::ops::cuda
