// moe_route and moe_combine on the device: the router's choice never leaves the GPU (ids and
// weights are device tensors matmul_experts and moe_combine read), so a MoE layer costs no host
// synchronisation. moe_route is one warp per token (scores in shared memory, k rounds of a warp
// arg-max with the CPU's tie rule: equal scores pick the lower id); moe_combine one thread per
// output element, summing the slots in the CPU's order without contraction.
#include <climits>

#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/launch.cuh"

namespace cera::ops::cuda {
namespace {

constexpr int kRouteWarps = 4;           // tokens per block
constexpr int64_t kMaxRouteExperts = 1024;  // shared memory: 2 floats per expert and warp (32 KB)

struct RouteParams {
  const float* logits;  // token t's n_expert logits at logits + t * logits_stride
  int64_t logits_stride;
  const float* bias;    // [n_expert] selection bias or null
  int32_t* ids;         // token t's k ids at ids + t * ids_stride
  int64_t ids_stride;
  float* weights;       // token t's k weights at weights + t * weights_stride
  int64_t weights_stride;
  int64_t n_tokens;
  int32_t n_expert, k;
  bool sigmoid, normalize;
  float scale;
};

__device__ __forceinline__ bool better(float v, int i, float bv, int bi) { return v > bv || (v == bv && i < bi); }

__global__ void __launch_bounds__(kRouteWarps * 32) moe_route_kernel(const __grid_constant__ RouteParams p) {
  pdl_entry();
  extern __shared__ float shared[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const int64_t t = int64_t(blockIdx.x) * kRouteWarps + warp;
  if (t >= p.n_tokens) return;  // whole warps; only __syncwarp below
  const int n = p.n_expert;
  float* score = shared + int64_t(warp) * 2 * n;
  float* choice = score + n;
  const float* l = p.logits + t * p.logits_stride;
  if (p.sigmoid) {
    for (int e = lane; e < n; e += 32) {
      const float s = 1.0f / (1.0f + expf(-l[e]));
      score[e] = s;
      choice[e] = p.bias != nullptr ? s + p.bias[e] : s;
    }
  } else {
    float mx = -INFINITY;
    for (int e = lane; e < n; e += 32) mx = fmaxf(mx, l[e]);
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float total = 0.0f;
    for (int e = lane; e < n; e += 32) {
      const float v = expf(l[e] - mx);
      score[e] = v;
      total += v;
    }
    for (int o = 16; o > 0; o >>= 1) total += __shfl_xor_sync(0xffffffffu, total, o);
    for (int e = lane; e < n; e += 32) {
      score[e] = score[e] / total;
      choice[e] = score[e];
    }
  }
  __syncwarp();
  int32_t* ids = p.ids + t * p.ids_stride;
  float* w = p.weights + t * p.weights_stride;
  float sum = 0.0f;  // lane 0's
  for (int j = 0; j < p.k; ++j) {
    // Chosen experts are marked NaN, which never compares better; -inf scores still rank.
    float bv = -INFINITY;
    int bi = INT_MAX;
    for (int e = lane; e < n; e += 32) {
      if (better(choice[e], e, bv, bi)) {
        bv = choice[e];
        bi = e;
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (better(ov, oi, bv, bi)) {
        bv = ov;
        bi = oi;
      }
    }
    if (lane == 0) {
      if (bi == INT_MAX) {  // only NaN scores left: no expert, NaN weight (visible downstream)
        ids[j] = -1;
        w[j] = NAN;
      } else {
        ids[j] = bi;
        w[j] = score[bi];
        sum += score[bi];
        choice[bi] = NAN;
      }
    }
    __syncwarp();
  }
  if (lane == 0) {
    const float mul = p.normalize ? p.scale / sum : p.scale;
    for (int j = 0; j < p.k; ++j) w[j] *= mul;
  }
}

struct CombineParams {
  float* out;  // token t at out + t * out_stride
  int64_t out_stride;
  const float* expert_out;  // slot j of token t at expert_out + (k * t + j) * expert_stride
  int64_t expert_stride;
  const float* weights;  // token t's k weights at weights + t * weights_stride
  int64_t weights_stride;
  int64_t n, n_tokens;
  int32_t k;
};

__global__ void moe_combine_kernel(const __grid_constant__ CombineParams p) {
  pdl_entry();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  for (int64_t t = blockIdx.y; t < p.n_tokens; t += gridDim.y) {
    const float* w = p.weights + t * p.weights_stride;
    const float* e = p.expert_out + t * p.k * p.expert_stride + i;
    float o = __fmul_rn(w[0], e[0]);
    for (int j = 1; j < p.k; ++j) o = __fadd_rn(o, __fmul_rn(w[j], e[j * p.expert_stride]));
    p.out[t * p.out_stride + i] = o;
  }
}

void check_i32_device(const TensorView& v, const char* what) {
  CERA_CHECK_MSG(v.device == Device::kCuda && v.dtype == DType::kI32, std::string(what) + ": expected CUDA I32");
  CERA_CHECK_MSG(v.stride() % 4 == 0, std::string(what) + ": row stride is not a multiple of 4 bytes");
}

}  // namespace

void moe_route(CudaContext& ctx, const TensorView& ids, const TensorView& weights, const TensorView& logits,
               const RouterParams& params) {
  check_i32_device(ids, "moe_route ids");
  check_f32_device(weights, "moe_route weights");
  check_f32_device(logits, "moe_route logits");
  const int64_t n_expert = logits.cols(), n_tokens = logits.rows(), k = params.n_expert_used;
  CERA_CHECK_MSG(k >= 1 && k <= n_expert, "moe_route: n_expert_used " + std::to_string(k) + " of " +
                                              std::to_string(n_expert) + " experts");
  CERA_CHECK_MSG(n_expert <= kMaxRouteExperts, "moe_route: at most " + std::to_string(kMaxRouteExperts) + " experts");
  CERA_CHECK_MSG(ids.cols() == k && ids.rows() == n_tokens && weights.cols() == k && weights.rows() == n_tokens,
                 "moe_route: ids and weights must be [k, n_tokens]");
  const float* bias = nullptr;
  if (params.selection_bias != nullptr) {
    check_f32_device(*params.selection_bias, "moe_route selection_bias");
    CERA_CHECK(params.selection_bias->n_elements() == n_expert && params.selection_bias->packed());
    CERA_CHECK_MSG(params.gating == RouterGating::kSigmoid, "moe_route: a selection bias needs sigmoid gating");
    bias = reinterpret_cast<const float*>(params.selection_bias->data);
  }
  if (n_tokens == 0) return;
  const RouteParams p{reinterpret_cast<const float*>(logits.data),
                      logits.stride() / 4,
                      bias,
                      reinterpret_cast<int32_t*>(ids.data),
                      ids.stride() / 4,
                      reinterpret_cast<float*>(weights.data),
                      weights.stride() / 4,
                      n_tokens,
                      int32_t(n_expert),
                      int32_t(k),
                      params.gating == RouterGating::kSigmoid,
                      params.normalize,
                      params.scale};
  if (!ctx.launching()) return;
  const size_t shared = size_t(kRouteWarps) * 2 * size_t(n_expert) * sizeof(float);
  launch(ctx.stream(), moe_route_kernel, ceil_div(n_tokens, kRouteWarps), kRouteWarps * 32, shared, p);
  CERA_CUDA_LAUNCHED();
}

void moe_combine(CudaContext& ctx, const TensorView& out, const TensorView& expert_out, const TensorView& weights) {
  check_f32_device(out, "moe_combine out");
  check_f32_device(expert_out, "moe_combine expert_out");
  check_f32_device(weights, "moe_combine weights");
  const int64_t n = out.cols(), n_tokens = out.rows(), k = weights.cols();
  CERA_CHECK_MSG(weights.rows() == n_tokens && expert_out.cols() == n && expert_out.ne[1] == k &&
                     expert_out.rows() == k * n_tokens,
                 "moe_combine: expert_out must be [n, k, n_tokens] and weights [k, n_tokens]");
  CERA_CHECK_MSG(k >= 1, "moe_combine: no slots");
  if (n == 0 || n_tokens == 0) return;
  const CombineParams p{reinterpret_cast<float*>(out.data),
                        out.stride() / 4,
                        reinterpret_cast<const float*>(expert_out.data),
                        expert_out.stride() / 4,
                        reinterpret_cast<const float*>(weights.data),
                        weights.stride() / 4,
                        n,
                        n_tokens,
                        int32_t(k)};
  if (!ctx.launching()) return;
  const dim3 grid(ceil_div(n, 256), unsigned(std::min<int64_t>(n_tokens, 65535)));
  launch(ctx.stream(), moe_combine_kernel, grid, 256, 0, p);
  CERA_CUDA_LAUNCHED();
}

}  // namespace cera::ops::cuda
