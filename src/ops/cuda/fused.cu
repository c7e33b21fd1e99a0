// Fused kernels for the call patterns of fused.h, and the matcher graph replay calls. Each kernel
// repeats the float operations of the verbs it replaces (same expressions, same reduction order
// as rms_norm_kernel), so a replayed forward matches the eager one.
#include <cstdlib>
#include <string>

#include "ops/cuda/act_quant.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gemm_rows.h"
#include "ops/cuda/fused.h"
#include "ops/cuda/launch.cuh"

namespace cera::ops::cuda {
namespace {

struct NormParams {
  const float* a;  // add: sum = a + s * b, written to sum; else a is the norm input
  const float* b;
  float* sum;
  int64_t a_stride, b_stride, sum_stride;  // floats
  float s;
  bool add;
  const float* weight;
  float* out;
  int64_t out_stride;
  int64_t n;
  float eps;
  int8_t* q;  // null: no quantization; else codes [rows, n] and ds [rows, n / 32]
  float2* ds;
  uint16_t* h;  // null, or out rounded to f16, [rows, n] packed: gemm_rows' input (q null then)
};

// One block per row, like rms_norm_kernel: [add,] sum of squares, then out = x * inv * w
// [and its Q8_0 codes]. Saves 1-2 launches per use. Thread t takes elements t + k * blockDim.x,
// the order of rms_norm_kernel's loop, so both sum the squares alike; with a lane's 32-element
// chunk k * blockDim.x + 32 * warp .. + 31, every warp holds whole Q8_0 blocks.
// kPer > 0: the row lives in registers (kPer elements a thread, n <= kPer * blockDim.x): one round
// of loads, then the reduction and the quantization without touching memory again. The loop form
// (kPer = 0, any n) re-read the row from memory per 32-element block: ~9 us a call on an 8B
// decode step, a dependent chain of loads on one SM (docs/benchmarks/cuda.md, v5).
// kSplit (kPer > 0, no add, out not aliasing the input): kPer blocks a row, each summing the whole
// row's squares (the same order, hence the same sum) and writing the outputs of its k = blockIdx.x
// only: the row's output and quantization work on kPer SMs instead of one.
template <int kPer, bool kSplit = false>
__global__ void add_norm_quant_kernel(const __grid_constant__ NormParams p) {
  static_assert(!kSplit || kPer > 0);
  constexpr int kRegs = kPer > 0 ? kPer : 1;
  float v[kRegs], w[kRegs];
  if constexpr (kPer > 0) {
    // The norm weight is a model weight (no kernel writes it): loaded while the previous kernel
    // finishes (launch.cuh).
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
      w[k] = i < p.n && (!kSplit || k == int(blockIdx.x)) ? __ldg(p.weight + i) : 0.0f;
    }
  }
  pdl_entry();
  __shared__ float partial[32];
  const int64_t r = kSplit ? blockIdx.y : blockIdx.x;
  const float* x = p.add ? p.sum + r * p.sum_stride : p.a + r * p.a_stride;
  float sum = 0.0f;
  if constexpr (kPer > 0) {
    const float* a = p.a + r * p.a_stride;
    const float* b = p.b + r * p.b_stride;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
      v[k] = 0.0f;
      if (i < p.n) v[k] = p.add ? __fmaf_rn(p.s, b[i], a[i]) : a[i];  // as elementwise_kernel's kAddScaled
    }
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
      if (i < p.n) {
        if (p.add) p.sum[r * p.sum_stride + i] = v[k];
        sum += v[k] * v[k];
      }
    }
  } else if (p.add) {
    const float* a = p.a + r * p.a_stride;
    const float* b = p.b + r * p.b_stride;
    float* s = p.sum + r * p.sum_stride;
    for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) {
      const float v = __fmaf_rn(p.s, b[i], a[i]);  // as elementwise_kernel's kAddScaled
      s[i] = v;
      sum += v * v;
    }
  } else {
    for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) sum += x[i] * x[i];
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();  // also makes the sums written above visible to the whole block
  if (threadIdx.x < 32) {
    sum = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (threadIdx.x == 0) partial[0] = sum;
  }
  __syncthreads();
  const float inv = 1.0f / sqrtf(partial[0] / float(p.n) + p.eps);
  float* out = p.out + r * p.out_stride;
  if constexpr (kPer > 0) {
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      if (kSplit && k != int(blockIdx.x)) continue;
      const int64_t chunk = int64_t(k) * blockDim.x + (threadIdx.x & ~31u);  // warp-uniform
      if (chunk >= p.n) break;
      const int64_t i = chunk + (threadIdx.x & 31);
      const float y = v[k] * inv * w[k];
      if (i < p.n) {
        out[i] = y;
        if (p.h != nullptr) p.h[r * p.n + i] = __half_as_ushort(__float2half_rn(y));  // as convert_x_kernel
      }
      if (p.q != nullptr) quantize_q8_0_lane(y, p.q + r * p.n + chunk, p.ds + r * (p.n / 32) + chunk / 32);
    }
    return;
  }
  if (p.q == nullptr) {
    for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) {
      const float y = x[i] * inv * p.weight[i];
      out[i] = y;
      if (p.h != nullptr) p.h[r * p.n + i] = __half_as_ushort(__float2half_rn(y));
    }
    return;
  }
  const int lane = threadIdx.x & 31, warps = blockDim.x / 32;
  for (int64_t blk = threadIdx.x / 32; blk < p.n / 32; blk += warps) {
    const int64_t i = blk * 32 + lane;
    const float v = x[i] * inv * p.weight[i];
    out[i] = v;
    quantize_q8_0_lane(v, p.q + r * p.n + blk * 32, p.ds + r * (p.n / 32) + blk);
  }
}

struct ActQuantParams {
  const float* gate;
  const float* up;
  float* out;
  int64_t gate_stride, up_stride, out_stride;  // floats
  int64_t n;
  bool gelu;
  int8_t* q;
  float2* ds;
};

// One warp per 32 elements: out = act(gate) * up (as elementwise_kernel) and its Q8_0 codes.
__global__ void act_quant_kernel(const __grid_constant__ ActQuantParams p) {
  pdl_entry();
  const int lane = threadIdx.x & 31;
  const int64_t blk = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int64_t t = blockIdx.y;
  if (blk * 32 >= p.n) return;
  const int64_t i = blk * 32 + lane;
  const float a = p.gate[t * p.gate_stride + i], b = p.up[t * p.up_stride + i];
  const float v = p.gelu ? gelu_tanh(a) * b : silu_gated(a, b);
  p.out[t * p.out_stride + i] = v;
  quantize_q8_0_lane(v, p.q + t * p.n + blk * 32, p.ds + t * (p.n / 32) + blk);
}

struct RopeStoreParams {
  float* q;
  float* k;
  const float* v;
  int64_t q_token_stride, k_token_stride, v_token_stride;  // floats; heads are head_dim apart
  void* cache_k;  // F32 or F16 rows (rope_store_kernel's C)
  void* cache_v;
  int64_t cache_k_stride, cache_v_stride;  // elements
  const int32_t* positions;
  const int32_t* slots;
  int32_t n_head, head_dim;
  RopeMath rope;
  bool trigger_first;  // let the attention launch after it be scheduled now (attention_early_mode 2)
};

// Block (unit, token): units < n_head rotate a Q head; the others rotate a K head and copy it
// and the matching V head into the cache row slots[t], converted to the cache type C (float or
// __half, rounded like kv_store). Saves 2 launches per layer.
// trigger_first: the attention launch that follows may be scheduled as this kernel starts, before
// its wait. Its blocks then copy the cache rows of earlier steps (attention_common.cuh,
// fresh_row) while the Q/K/V GEMV before this kernel still runs; they wait for this kernel before
// reading q and this step's rows. Only attention follows with it set (fuse_rope_store).
template <class C>
__global__ void rope_store_kernel(const __grid_constant__ RopeStoreParams p) {
  if (p.trigger_first) asm volatile("griddepcontrol.launch_dependents;" :::);
  const int unit = blockIdx.x;
  const int64_t t = blockIdx.y;
  // Positions, slots and freq_factors are host data (uploaded before the step), so the angles are
  // computed before the wait (rope_angles); q, k, v and the cache rows are touched after it.
  const int32_t pos = p.positions[t];
  const RopeAngles angles = rope_angles(p.rope, pos);
  const int64_t slot = unit < p.n_head ? 0 : p.slots[t];
  pdl_entry();
  if (unit < p.n_head) {
    rope_head(p.rope, p.q + t * p.q_token_stride + int64_t(unit) * p.head_dim, pos, angles);
    return;
  }
  const int64_t off = int64_t(unit - p.n_head) * p.head_dim;
  float* k = p.k + t * p.k_token_stride + off;
  rope_head(p.rope, k, pos, angles);
  __syncthreads();
  const float* v = p.v + t * p.v_token_stride + off;
  C* cache_k = static_cast<C*>(p.cache_k);
  C* cache_v = static_cast<C*>(p.cache_v);
  for (int i = threadIdx.x; i < p.head_dim; i += blockDim.x) {
    cache_k[slot * p.cache_k_stride + off + i] = from_float<C>(k[i]);
    cache_v[slot * p.cache_v_stride + off + i] = from_float<C>(v[i]);
  }
}

// Byte range of a view's rows.
struct Range {
  const std::byte* lo;
  const std::byte* hi;
};
Range range_of(const TensorView& v) { return {v.data, v.data + v.extent_bytes()}; }
bool same_view(const TensorView& a, const TensorView& b) {
  return a.data == b.data && a.dtype == b.dtype && a.cols() == b.cols() && a.rows() == b.rows() &&
         a.stride() == b.stride();
}
bool disjoint(const TensorView& a, const TensorView& b) {
  const Range x = range_of(a), y = range_of(b);
  return x.hi <= y.lo || y.hi <= x.lo;
}
// Elementwise-safe: identical views or no shared bytes.
bool same_or_disjoint(const TensorView& a, const TensorView& b) { return same_view(a, b) || disjoint(a, b); }

// Does `m` read `v` as the Q8_0-quantized input of a GEMV?
bool q8_consumer(const Call* m, const TensorView& v) {
  return m != nullptr && m->verb == Verb::kMatmul && same_view(m->b, v) && gemv_takes_q8_0(m->a, v.rows()) &&
         v.cols() % 32 == 0;
}

// The next call is a gemm_rows or recorded prompt-path matmul of v that reads it as f16
// (gemm_activations): the norm writes that copy too, which saves the conversion's launch and pass.
bool f16_consumer(const Call* m, const TensorView& v) {
  if (m == nullptr || m->verb != Verb::kMatmul || !same_view(m->b, v) || m->a.dtype == DType::kBF16 ||
      m->a.dtype == DType::kF32 || v.cols() % 8 != 0) {
    return false;
  }
  const MatmulPath path = matmul_path(m->a, v.rows());
  return path == MatmulPath::kRows || (path == MatmulPath::kPrefill && gemm_recordable(m->a, v.rows()));
}

unsigned norm_threads(int64_t n) { return n >= 1024 ? 512 : (n >= 256 ? 256 : 32 * ceil_div(n, 32)); }  // as rms_norm

size_t fuse_add_norm(CudaContext& ctx, const Call& add, const Call* norm, const Call* next) {
  const bool has_add = add.verb == Verb::kAddScaled;
  const Call& n = has_add ? *norm : add;
  const TensorView& x = has_add ? add.out : n.a;
  if (has_add && !(same_view(n.a, add.out) && same_or_disjoint(n.out, add.out) && same_or_disjoint(n.out, add.a) &&
                   same_or_disjoint(n.out, add.b))) {
    return 0;
  }
  if (!same_or_disjoint(n.out, n.a) || n.a.rows() >= (int64_t{1} << 31) || n.a.rows() == 0) return 0;
  const bool quant = q8_consumer(next, n.out);
  const bool f16 = !quant && f16_consumer(next, n.out);
  static const bool loop_env = std::getenv("CERA_CUDA_NORM_LOOP") != nullptr;  // A/B of the v5 change
  // Several blocks a row when nothing it reads is written (no add; out, codes apart from x).
  static const bool split_env = [] {  // A/B (v5)
    const char* e = std::getenv("CERA_CUDA_NORM_SPLIT");
    return e == nullptr || std::string(e) != "0";
  }();
  const unsigned threads = norm_threads(x.cols());
  // Without quantization a chunk may be partial (n % 32 != 0): the register form covers it too,
  // since its quantization is skipped and its stores are per element.
  const int64_t per = (x.cols() + threads - 1) / threads;
  const bool split = split_env && !loop_env && !has_add && per >= 2 && per <= 16 && disjoint(n.out, n.a) &&
                     x.rows() < 65536;
  if (!has_add && !quant && !f16 && !split) return 0;  // a lone one-block rms_norm gains nothing
  NormParams p{};
  p.a = reinterpret_cast<const float*>(has_add ? add.a.data : n.a.data);
  p.a_stride = (has_add ? add.a.stride() : n.a.stride()) / 4;
  if (has_add) {
    p.b = reinterpret_cast<const float*>(add.b.data);
    p.b_stride = add.b.stride() / 4;
    p.sum = reinterpret_cast<float*>(add.out.data);
    p.sum_stride = add.out.stride() / 4;
    p.s = add.f;
    p.add = true;
  }
  p.weight = reinterpret_cast<const float*>(n.b.data);
  p.out = reinterpret_cast<float*>(n.out.data);
  p.out_stride = n.out.stride() / 4;
  p.n = x.cols();
  p.eps = n.f;
  if (quant) {
    const ActQ8 a = act_q8_scratch(ctx, n.out.rows(), n.out.cols());
    p.q = a.q;
    p.ds = a.ds;
  }
  // (kGemmX was sized for this input when the matmul after it was recorded: no growth here.)
  if (f16) p.h = static_cast<uint16_t*>(ctx.scratch(ScratchKind::kGemmX, uint64_t(n.out.n_elements()) * 2));
  ctx.act_cache() = {};
  auto kernel = per <= 1 ? add_norm_quant_kernel<1>
              : per <= 2 ? add_norm_quant_kernel<2>
              : per <= 4 ? add_norm_quant_kernel<4>
              : per <= 8 ? add_norm_quant_kernel<8>
              : per <= 16 ? add_norm_quant_kernel<16>
                          : add_norm_quant_kernel<0>;
  if (loop_env) kernel = add_norm_quant_kernel<0>;
  if (split) {
    const int k = per <= 2 ? 2 : per <= 4 ? 4 : per <= 8 ? 8 : 16;
    auto split_kernel = k == 2   ? add_norm_quant_kernel<2, true>
                        : k == 4 ? add_norm_quant_kernel<4, true>
                        : k == 8 ? add_norm_quant_kernel<8, true>
                                 : add_norm_quant_kernel<16, true>;
    launch(ctx.stream(), split_kernel, dim3(unsigned(k), unsigned(x.rows())), threads, 0, p);
  } else {
    launch(ctx.stream(), kernel, unsigned(x.rows()), threads, 0, p);
  }
  CERA_CUDA_LAUNCHED();
  if (quant) ctx.act_cache() = {n.out.data, n.out.stride(), n.out.cols(), n.out.rows(), 32};
  if (f16) ctx.act_cache() = {n.out.data, n.out.stride(), n.out.cols(), n.out.rows(), kActF16};
  return has_add ? 2 : 1;
}

size_t fuse_act_quant(CudaContext& ctx, const Call& c, const Call* next) {
  if (c.act == Activation::kGeluErf) return 0;  // act_quant_kernel knows SiLU and tanh-GELU only
  if (!q8_consumer(next, c.out) || !same_or_disjoint(c.out, c.a) || !same_or_disjoint(c.out, c.b)) return 0;
  const ActQ8 a = act_q8_scratch(ctx, c.out.rows(), c.out.cols());
  ActQuantParams p{reinterpret_cast<const float*>(c.a.data), reinterpret_cast<const float*>(c.b.data),
                   reinterpret_cast<float*>(c.out.data), c.a.stride() / 4, c.b.stride() / 4, c.out.stride() / 4,
                   c.out.cols(), c.act == Activation::kGeluTanh, a.q, a.ds};
  ctx.act_cache() = {};
  launch(ctx.stream(), act_quant_kernel, dim3(ceil_div(p.n / 32, 8), unsigned(c.out.rows())), 256, 0, p);
  CERA_CUDA_LAUNCHED();
  ctx.act_cache() = {c.out.data, c.out.stride(), c.out.cols(), c.out.rows(), 32};
  return 1;
}

bool same_rope(const RopeParams& a, const RopeParams& b) {
  return a.kind == b.kind && a.n_rot == b.n_rot && a.freq_base == b.freq_base && a.freq_scale == b.freq_scale &&
         a.freq_factors == b.freq_factors;
}

size_t fuse_rope_store(CudaContext& ctx, const Call& rq, const Call* rk, const Call* st, const Call* next) {
  if (rk == nullptr || st == nullptr || rk->verb != Verb::kRope || st->verb != Verb::kKvStore) return 0;
  const TensorView &q = rq.out, &k = rk->out, &v = st->b;
  const auto n_tokens = static_cast<int64_t>(rq.i[0].size());
  if (rk->i[0].data() != rq.i[0].data() || rk->i[0].size() != rq.i[0].size() || !same_rope(rq.rope, rk->rope)) return 0;
  if (st->i[0].size() != rq.i[0].size() || n_tokens == 0) return 0;
  // Q and K heads packed ([head_dim, heads, tokens]); the stored K is the roped K buffer.
  const int64_t hd = q.cols();
  if (k.cols() != hd || !q.packed() || !k.packed() || !st->a.packed() || st->a.data != k.data) return 0;
  if (st->a.n_elements() != k.n_elements() || !disjoint(q, k) || !disjoint(k, v) || !disjoint(q, v)) return 0;
  if (st->layer.k.cols() % hd != 0 || q.rows() % n_tokens != 0 || k.rows() % n_tokens != 0) return 0;
  RopeStoreParams p{};
  p.q = reinterpret_cast<float*>(q.data);
  p.k = reinterpret_cast<float*>(k.data);
  p.v = reinterpret_cast<const float*>(v.data);
  p.n_head = int32_t(q.rows() / n_tokens);
  p.head_dim = int32_t(hd);
  p.q_token_stride = p.n_head * hd;
  p.k_token_stride = k.rows() / n_tokens * hd;
  p.v_token_stride = v.stride() / 4;
  // The cache type was validated when the kv_store call was recorded (rope_kv.cu's check_layer).
  const bool f16 = st->layer.k.dtype == DType::kF16;
  const int64_t elem = f16 ? 2 : 4;
  p.cache_k = st->layer.k.data;
  p.cache_v = st->layer.v.data;
  p.cache_k_stride = st->layer.k.stride() / elem;
  p.cache_v_stride = st->layer.v.stride() / elem;
  p.positions = ctx.device_array(rq.i[0]);
  p.slots = ctx.device_array(st->i[0]);
  p.rope = {rq.rope.freq_factors != nullptr
                ? ctx.device_array(std::span(rq.rope.freq_factors, size_t(rq.rope.n_rot / 2)))
                : nullptr,
            rq.rope.n_rot, rq.rope.freq_base, rq.rope.freq_scale, rq.rope.kind == RopeKind::kNeox};
  const int64_t n_kv_heads = k.rows() / n_tokens;
  p.trigger_first = attention_early_mode() >= 2 && n_tokens <= kGemvMaxTokens && next != nullptr &&
                    next->verb == Verb::kAttention;
  ctx.act_cache() = {};
  const unsigned threads = rq.rope.n_rot / 2 >= 64 ? 64 : 32;  // as launch_rope
  const dim3 grid(unsigned(p.n_head + n_kv_heads), unsigned(n_tokens));
  if (f16) {
    launch(ctx.stream(), rope_store_kernel<__half>, grid, threads, 0, p);
  } else {
    launch(ctx.stream(), rope_store_kernel<float>, grid, threads, 0, p);
  }
  CERA_CUDA_LAUNCHED();
  return 3;
}

// matmul ; matmul [; matmul] on the same x, weights of one type and width: one GEMV launch, or
// one gemm_rows launch for serving batches.
size_t fuse_matmuls(CudaContext& ctx, std::span<const Call> calls, size_t i) {
  const Call& m0 = calls[i];
  if (m0.b.rows() == 0) return 0;
  const MatmulPath path = matmul_path(m0.a, m0.b.rows());
  if (path == MatmulPath::kPrefill) return 0;
  size_t n = 1;
  while (n < size_t(kMaxGemvParts) && i + n < calls.size()) {
    const Call& m = calls[i + n];
    if (m.verb != Verb::kMatmul || !same_view(m.b, m0.b) || m.a.dtype != m0.a.dtype || m.a.cols() != m0.a.cols() ||
        matmul_path(m.a, m.b.rows()) != path) {
      break;
    }
    ++n;
  }
  if (n < 2) return 0;
  GemvTarget parts[kMaxGemvParts];
  RowsTarget rows[kMaxGemvParts];
  for (size_t k = 0; k < n; ++k) {
    const Call& m = calls[i + k];
    if (m.out.rows() == 0 || m.a.rows() == 0 || !disjoint(m.out, m0.b)) return 0;
    for (size_t j = 0; j < k; ++j) {
      if (!disjoint(m.out, calls[i + j].out)) return 0;
    }
    parts[k] = {m.out, m.a, m.c.data != nullptr ? &m.c : nullptr};
    rows[k] = {m.out, m.a, m.c.data != nullptr ? &m.c : nullptr};
  }
  if (path == MatmulPath::kRows) {
    gemm_rows_parts(ctx, m0.b, std::span(rows, n));
  } else {
    gemv_parts(ctx, m0.b, std::span(parts, n));
  }
  return n;
}

// matmul(G, Wg, X) ; matmul(U, Wu, X) ; gated_activation(H, G, U) [; matmul(., Q8_0-type, H)]:
// one streaming GEMV launch that also writes H (and its codes for the matmul after it), when
// gemv_gated takes it (CERA_CUDA_FUSE_GATED=1).
size_t fuse_gated(CudaContext& ctx, std::span<const Call> calls, size_t i) {
  if (i + 2 >= calls.size()) return 0;
  const Call& g = calls[i];
  const Call& u = calls[i + 1];
  const Call& a = calls[i + 2];
  if (u.verb != Verb::kMatmul || a.verb != Verb::kGatedActivation || g.b.rows() == 0) return 0;
  if (a.act == Activation::kGeluErf) return 0;  // the fused kernels know SiLU and tanh-GELU only
  if (matmul_path(g.a, g.b.rows()) != MatmulPath::kGemv) return 0;
  if (!same_view(u.b, g.b) || u.a.dtype != g.a.dtype || u.a.cols() != g.a.cols() || u.a.rows() != g.a.rows()) return 0;
  if (!same_view(a.a, g.out) || !same_view(a.b, u.out) || a.out.dtype != DType::kF32) return 0;
  const TensorView* views[] = {&g.out, &u.out, &a.out, &g.b};
  for (int x = 0; x < 4; ++x) {
    for (int y = x + 1; y < 4; ++y) {
      if (!disjoint(*views[x], *views[y])) return 0;
    }
  }
  const Call* next = i + 3 < calls.size() ? &calls[i + 3] : nullptr;
  const GemvTarget gt{g.out, g.a, g.c.data != nullptr ? &g.c : nullptr};
  const GemvTarget ut{u.out, u.a, u.c.data != nullptr ? &u.c : nullptr};
  return gemv_gated(ctx, g.b, gt, ut, {a.out, a.act, q8_consumer(next, a.out)}) ? 3 : 0;
}

// matmul(H, W, X) ; add_scaled(R, R, H, s): the residual add in the GEMV's epilogue (GemvTarget::
// residual); R must be apart from H, X and the weight. The norm that follows then reads R only.
size_t fuse_matmul_add(CudaContext& ctx, const Call& m, const Call* add) {
  if (add == nullptr || add->verb != Verb::kAddScaled || m.b.rows() == 0 ||
      matmul_path(m.a, m.b.rows()) != MatmulPath::kGemv) {
    return 0;
  }
  const TensorView& r = add->out;
  if (!same_view(add->a, r) || !same_view(add->b, m.out) || r.dtype != DType::kF32) return 0;
  if (r.cols() != m.out.cols() || r.rows() != m.out.rows() || !disjoint(r, m.out) || !disjoint(r, m.b)) return 0;
  if (m.c.data != nullptr && !disjoint(r, m.c)) return 0;
  const ResidualAdd res{r, add->f};
  const GemvTarget part{m.out, m.a, m.c.data != nullptr ? &m.c : nullptr, &res};
  gemv_parts(ctx, m.b, std::span(&part, 1));
  return 2;
}

}  // namespace

size_t run_fused(CudaContext& ctx, std::span<const Call> calls, size_t i) {
  auto at = [&](size_t k) -> const Call* { return i + k < calls.size() ? &calls[i + k] : nullptr; };
  const Call& c = calls[i];
  switch (c.verb) {
    case Verb::kAddScaled: {
      const Call* n = at(1);
      if (n == nullptr || n->verb != Verb::kRmsNorm) return 0;
      return fuse_add_norm(ctx, c, n, at(2));
    }
    case Verb::kRmsNorm: return fuse_add_norm(ctx, c, nullptr, at(1));
    case Verb::kGatedActivation: return fuse_act_quant(ctx, c, at(1));
    case Verb::kRope: return fuse_rope_store(ctx, c, at(1), at(2), at(3));
    case Verb::kMatmul: {
      static const bool add_env = [] {  // A/B (v5)
        const char* e = std::getenv("CERA_CUDA_GEMV_ADD");
        return e == nullptr || std::string(e) != "0";
      }();
      if (const size_t n = fuse_gated(ctx, calls, i); n > 0) return n;
      if (const size_t n = fuse_matmuls(ctx, calls, i); n > 0) return n;
      return add_env ? fuse_matmul_add(ctx, c, at(1)) : 0;
    }
    default: return 0;
  }
}

}  // namespace cera::ops::cuda
