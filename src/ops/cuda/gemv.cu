// GEMV for 1..16 tokens (kernels in gemv_kernels.cuh): dequantization fused into a dp4a dot with
// 8-bit activations, one pass over the weight for up to 8 tokens (16 tokens: two passes); plain
// types (F32/F16/BF16) dot against float activations directly; one warp per row. Large decode
// launches of 1-2 tokens take the streaming kernel instead (gemv_stream.cuh; stream_pays says where).
#include <cstdlib>
#include <string>

#include "ops/cuda/act_quant.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gemm_rows.h"
#include "ops/cuda/gemv_kernels.cuh"
#include "ops/cuda/gemv_stream.cuh"
#include "ops/cuda/launch.cuh"

namespace cera::ops::cuda {
namespace {

using namespace gemv_detail;

struct QuantizeActParams {
  const float* x;
  int64_t x_stride;  // floats
  int8_t* q;
  float2* ds;
  int64_t n_in;
};

// Q8_0 like quant::quantize_activation_row: one warp per 32-element block, d = max|x| / 127,
// codes round-half-away(clamp(x * (1 / d))), d stored as fp16.
__global__ void quantize_q8_0_kernel(const __grid_constant__ QuantizeActParams p) {
  pdl_entry();
  const int lane = threadIdx.x & 31;
  const int64_t blk = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int64_t t = blockIdx.y;
  if (blk * 32 >= p.n_in) return;
  const float v = p.x[t * p.x_stride + blk * 32 + lane];
  quantize_q8_0_lane(v, p.q + t * p.n_in + blk * 32, p.ds + t * (p.n_in / 32) + blk);
}

// Q8_K like the CPU reference: one warp per 256 elements (8 per lane); the signed value of
// largest magnitude (the first on ties) maps to -127, codes round half to even, d = 1 / iscale.
__global__ void quantize_q8_k_kernel(const __grid_constant__ QuantizeActParams p) {
  pdl_entry();
  const int lane = threadIdx.x & 31;
  const int64_t blk = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int64_t t = blockIdx.y;
  if (blk * 256 >= p.n_in) return;
  const float* x = p.x + t * p.x_stride + blk * 256 + lane * 8;
  float v[8], amax = 0.0f, max = 0.0f;
  int idx = 1 << 30;
  for (int i = 0; i < 8; ++i) {
    v[i] = x[i];
    if (amax < fabsf(v[i])) {
      amax = fabsf(v[i]);
      max = v[i];
      idx = lane * 8 + i;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float oa = __shfl_xor_sync(0xffffffffu, amax, o), om = __shfl_xor_sync(0xffffffffu, max, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (oa > amax || (oa == amax && oi < idx)) {
      amax = oa;
      max = om;
      idx = oi;
    }
  }
  const float iscale = max != 0.0f ? -127.0f / max : 0.0f;
  int sum = 0;
  uint32_t packed[2] = {0, 0};
  for (int i = 0; i < 8; ++i) {
    const float c = __fmul_rn(iscale, v[i]);
    const int qi = c == c ? int(rintf(fmaxf(-127.0f, fminf(127.0f, c)))) : 0;
    packed[i / 4] |= (uint32_t(qi) & 0xFFu) << (8 * (i % 4));
    sum += qi;
  }
  *reinterpret_cast<uint2*>(p.q + t * p.n_in + blk * 256 + lane * 8) = make_uint2(packed[0], packed[1]);
  // Lanes 4k..4k+3 hold the 32 codes of sub-block k.
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  if ((lane & 3) == 0) {
    p.ds[t * (p.n_in / 32) + blk * 8 + lane / 4] = make_float2(iscale != 0.0f ? 1.0f / iscale : 0.0f, float(sum));
  }
}

using GemvKernel = void (*)(GemvParams);

// A kernel and the rows one block computes (the grid is sized from it).
struct GemvPick {
  GemvKernel kernel = nullptr;
  int rows_per_block = kWarps;
};

// Warps a row is split over, for 1 and 2 tokens: long rows (8 or more 16-byte steps per lane)
// take 2 or 4 warps; for the quantized types only when the launch has few rows for the GPU.
// Measured on the H200 (132 SMs, docs/benchmarks/cuda.md v5), split against unsplit: 1B F16
// decode 881 -> 968 t/s (every F16 GEMV split, gate/up's 16,384 rows included; 924 with launches
// over 24 rows an SM left whole), 1B Q4_0 1,610 -> 1,655 (down, 2,048 rows), but 8B Q4_0 466 ->
// 460 and Q8_0 338 -> 329 with the 4,096-row down projection split: hence the 24 rows an SM
// limit for quantized rows. CERA_CUDA_GEMV_SPLIT=0: off (A/B).
int split_for(int64_t steps_per_lane, bool plain, int64_t rows, int sm_count) {
  static const bool off = [] {
    const char* e = std::getenv("CERA_CUDA_GEMV_SPLIT");
    return e != nullptr && std::string(e) == "0";
  }();
  if (off || (!plain && rows > 24 * int64_t(sm_count))) return 1;
  return steps_per_lane >= 16 ? 4 : steps_per_lane >= 8 ? 2 : 1;
}

template <DType T>
constexpr bool is_plain() {
  return T == DType::kF32 || T == DType::kF16 || T == DType::kBF16;
}
template <DType T>
constexpr bool splittable() {  // plain rows, or 32-element units (their activations offset simply)
  if constexpr (is_plain<T>()) {
    return true;
  } else {
    return Unit<T>::kElems == 32;
  }
}

template <DType T, int B, int kSplit>
GemvPick pick_split(int64_t vec) {
  if constexpr (is_plain<T>()) {
    constexpr int kWide = T == DType::kF32 ? 4 : 8;
    return {vec == 1 ? gemv_f_kernel<T, B, 1, kSplit> : gemv_f_kernel<T, B, kWide, kSplit>, kWarps / kSplit};
  } else {
    return {gemv_q_kernel<T, B, Unit<T>::kElems == 32 ? 4 : 2, kSplit>, kWarps / kSplit};
  }
}

// Where a row split may apply: the launch's rows and the GPU's SM count.
struct SplitContext {
  int64_t rows;
  int sm_count;
};

template <DType T, int B>
GemvPick pick_b(int64_t vec, int64_t n_in, SplitContext sc) {
  constexpr bool kPlain = is_plain<T>();
  if constexpr (B <= 2 && splittable<T>()) {
    const int64_t units = kPlain ? n_in / vec : n_in / 32;
    switch (split_for(units / 32, kPlain, sc.rows, sc.sm_count)) {
      case 4: return pick_split<T, B, 4>(vec);
      case 2: return pick_split<T, B, 2>(vec);
      default: break;
    }
  }
  return pick_split<T, B, 1>(vec);
}

// Kernels for 1..8 tokens; instantiated configurations: every supported type x B in 1..8, and row
// splits of 2 and 4 warps for B <= 2 (32-element block types and plain types).
template <DType T>
GemvPick pick(int b, int64_t vec, int64_t n_in, SplitContext sc) {
  switch (b) {
#define CERA_GEMV_CASE(N) \
    case N: return pick_b<T, N>(vec, n_in, sc);
    CERA_GEMV_CASE(1) CERA_GEMV_CASE(2) CERA_GEMV_CASE(3) CERA_GEMV_CASE(4)
    CERA_GEMV_CASE(5) CERA_GEMV_CASE(6) CERA_GEMV_CASE(7) CERA_GEMV_CASE(8)
#undef CERA_GEMV_CASE
    default: return {};
  }
}

GemvPick pick_kernel(DType t, int b, int64_t vec, int64_t n_in, SplitContext sc) {
  switch (t) {
    case DType::kF32: return pick<DType::kF32>(b, vec, n_in, sc);
    case DType::kF16: return pick<DType::kF16>(b, vec, n_in, sc);
    case DType::kBF16: return pick<DType::kBF16>(b, vec, n_in, sc);
    case DType::kQ4_0: return pick<DType::kQ4_0>(b, vec, n_in, sc);
    case DType::kQ4_1: return pick<DType::kQ4_1>(b, vec, n_in, sc);
    case DType::kQ5_0: return pick<DType::kQ5_0>(b, vec, n_in, sc);
    case DType::kQ5_1: return pick<DType::kQ5_1>(b, vec, n_in, sc);
    case DType::kQ8_0: return pick<DType::kQ8_0>(b, vec, n_in, sc);
    case DType::kQ4_K: return pick<DType::kQ4_K>(b, vec, n_in, sc);
    case DType::kQ5_K: return pick<DType::kQ5_K>(b, vec, n_in, sc);
    case DType::kQ6_K: return pick<DType::kQ6_K>(b, vec, n_in, sc);
    default: return {};
  }
}

// Where the streaming kernel (gemv_stream.cuh, 1-2 tokens) runs: where it was faster in decode
// (docs/benchmarks/cuda.md, v7). It wins on large launches and loses on small ones (launch and
// first-copy latency, and blocks of ~100 KB of shared memory that cannot start beside the
// kernel before them as early as the one-warp-a-row blocks can), so: F16/BF16 rows up to 8,192
// wide, and launches of 48 MB or more of the 16-byte-code types (Q4_0, Q4_1, Q5_0, Q5_1: the 8B
// gate/up); never Q8_0, whose large launches already stream at 84-86 % in the one-warp-a-row
// kernel. Decode with this rule against never / always: 8B Q4_0 478.6 / 501.8 / 497.6 t/s, 1B F16
// 1,020 / 1,042 / 1,037; 1B Q4_0 and 8B Q8_0 unchanged (always, in an earlier build: 1B Q4_0
// 1,766 -> 1,559).
// CERA_CUDA_GEMV_STREAM=0: never, =all: every launch it takes (A/B, and the tests' second pass).
enum class StreamMode : uint8_t { kNever, kWhereFaster, kAlways };
StreamMode stream_mode() {
  static const StreamMode m = [] {
    const char* e = std::getenv("CERA_CUDA_GEMV_STREAM");
    const std::string v = e != nullptr ? e : "";
    return v == "0" ? StreamMode::kNever : v == "all" ? StreamMode::kAlways : StreamMode::kWhereFaster;
  }();
  return m;
}

bool stream_pays(DType t, int64_t n_in, int64_t rows) {
  switch (stream_mode()) {
    case StreamMode::kNever: return false;
    case StreamMode::kAlways: return true;
    case StreamMode::kWhereFaster: break;
  }
  if (t == DType::kF16 || t == DType::kBF16) return n_in <= 8192;
  if (t == DType::kQ8_0) return false;
  const auto bytes = static_cast<int64_t>(*dtype_row_bytes(t, uint64_t(n_in))) * rows;
  return bytes >= (int64_t{48} << 20);
}

template <DType T, int B>
bool launch_stream_as(CudaContext& ctx, const GemvParams& g, const gemv_stream::GatedOut& out, int32_t* queues) {
  gemv_stream::StreamParams p{};
  p.g = g;
  p.gated = out;
  p.queue = queues + 2 * (ctx.next_launch_slot() % gemv_stream::kQueueSlots);
  for (int i = 0; i < g.n_parts; ++i) p.first_row[i + 1] = p.first_row[i] + g.part[i].n_out;
  gemv_stream::StreamPlan plan;
  if (!gemv_stream::plan_stream<T, B>(p, p.first_row[g.n_parts], ctx.sm_count(), plan)) return false;
  const bool gated = out.h != nullptr;
  const auto kernel =
      gated ? gemv_stream::gemv_stream_kernel<T, B, true> : gemv_stream::gemv_stream_kernel<T, B, false>;
  // Over 48 KB of dynamic shared memory: the limit raised once per kernel (one device per process)
  // to what the block may have beside the kernel's static shared memory.
  static bool raised[2] = {false, false};
  if (!raised[gated]) {
    cudaFuncAttributes attr{};
    CERA_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    CERA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         int(gemv_stream::kMaxSmem - attr.sharedSizeBytes)));
    raised[gated] = true;
  }
  launch(ctx.stream(), kernel, plan.grid, gemv_stream::kThreads, plan.smem, p);
  return true;
}

template <DType T>
bool launch_stream_b(CudaContext& ctx, const GemvParams& g, const gemv_stream::GatedOut& gated, int b,
                     int32_t* queues) {
  return b == 1 ? launch_stream_as<T, 1>(ctx, g, gated, queues)
                : b == 2 ? launch_stream_as<T, 2>(ctx, g, gated, queues) : false;
}

// The pass shape the streaming kernel is asked to take: token count, the launch's rows (all parts)
// and the plain-row vector width (8: 16-byte aligned rows and activations).
struct StreamPass {
  int b;
  int64_t rows;
  int64_t vec;
};

// True when the streaming kernel took the pass (gated: the gated epilogue's outputs, or none;
// queues: the zeroed queue slots).
bool launch_stream(CudaContext& ctx, const GemvParams& g, const gemv_stream::GatedOut& gated, DType t,
                   const StreamPass& pass, int32_t* queues) {
  const int b = pass.b;
  const int64_t rows = pass.rows, vec = pass.vec;
  bool aligned = true;  // bulk copies read 16-byte aligned sources (weights are cudaMalloc'd: always)
  for (int i = 0; i < g.n_parts; ++i) {
    const QWeight& w = g.part[i].w;
    for (const uint8_t* plane : {w.r0, w.r1, w.r2}) aligned = aligned && reinterpret_cast<uintptr_t>(plane) % 16 == 0;
  }
  if (b > gemv_stream::kMaxTokens || !aligned || !stream_pays(t, g.n_in, rows)) return false;
  switch (t) {
    case DType::kF16: return vec == 8 && launch_stream_b<DType::kF16>(ctx, g, gated, b, queues);
    case DType::kBF16: return vec == 8 && launch_stream_b<DType::kBF16>(ctx, g, gated, b, queues);
    case DType::kQ4_0: return launch_stream_b<DType::kQ4_0>(ctx, g, gated, b, queues);
    case DType::kQ4_1: return launch_stream_b<DType::kQ4_1>(ctx, g, gated, b, queues);
    case DType::kQ5_0: return launch_stream_b<DType::kQ5_0>(ctx, g, gated, b, queues);
    case DType::kQ5_1: return launch_stream_b<DType::kQ5_1>(ctx, g, gated, b, queues);
    case DType::kQ8_0: return launch_stream_b<DType::kQ8_0>(ctx, g, gated, b, queues);
    default: return false;
  }
}

}  // namespace

ActQ8 act_q8_scratch(CudaContext& ctx, int64_t n_tokens, int64_t n_in) {
  auto* q = static_cast<int8_t*>(ctx.scratch(ScratchKind::kActQ8, uint64_t(n_tokens) * n_in * 5 / 4 + 256));
  return {q, reinterpret_cast<float2*>(q + ((n_tokens * n_in + 255) & ~int64_t{255}))};
}

ActQ8 quantize_activations(CudaContext& ctx, const TensorView& x, int64_t act_block) {
  const int64_t n_in = x.cols(), n_rows = x.rows();
  const ActQ8 a = act_q8_scratch(ctx, n_rows, n_in);
  if (!ctx.launching()) return a;
  QuantActCache& cache = ctx.act_cache();
  // Q/K/V (and gate/up) quantize their shared input once: 2 of 3 (1 of 2) launches saved.
  if (cache.matches(x.data, x.stride(), n_in, n_rows, act_block)) {
    return cache.q != nullptr ? ActQ8{cache.q, cache.ds} : a;
  }
  constexpr int64_t kMaxGridRows = 32768;  // gridDim.y limit is 65535
  for (int64_t r0 = 0; r0 < n_rows; r0 += kMaxGridRows) {
    const int64_t rows = std::min(kMaxGridRows, n_rows - r0);
    QuantizeActParams qp{reinterpret_cast<const float*>(x.row(r0)), x.stride() / 4, a.q + r0 * n_in,
                         a.ds + r0 * (n_in / 32), n_in};
    const dim3 grid(ceil_div(n_in / act_block, 8), unsigned(rows));
    if (act_block == 32) {
      launch(ctx.stream(), quantize_q8_0_kernel, grid, 256, 0, qp);
    } else {
      launch(ctx.stream(), quantize_q8_k_kernel, grid, 256, 0, qp);
    }
    CERA_CUDA_LAUNCHED();
  }
  cache = {x.data, x.stride(), n_in, n_rows, act_block};
  return a;
}

bool gemv_takes_q8_0(const TensorView& weight, int64_t n_tokens) {
  return matmul_path(weight, n_tokens) == MatmulPath::kGemv && dtype_block_size(weight.dtype) == 32;
}

void gemv(CudaContext& ctx, const TensorView& out, const TensorView& weight, const TensorView& x,
          const TensorView* bias) {
  const GemvTarget one{out, weight, bias};
  gemv_parts(ctx, x, std::span(&one, 1));
}

namespace {

// The streaming GEMV's scratch (zeroed once, sized in every mode: a graph's recording pass
// allocates what its capture will use): the launches' queues, the gated epilogue's arrival
// counters, and the codes it writes (apart from kActQ8, which the launch is reading).
struct StreamScratch {
  int32_t* queues;    // [2 * kQueueSlots]
  int32_t* arrivals;  // [kMaxArrivalBlocks]
  int8_t* q;          // [kMaxTokens, kMaxArrivalBlocks * 32] codes, then (d, sum) per 32
  float2* ds;
};
StreamScratch stream_scratch(CudaContext& ctx) {
  using namespace gemv_stream;
  constexpr uint64_t kInts = 2 * kQueueSlots + kMaxArrivalBlocks;
  constexpr uint64_t kCodes = uint64_t(kMaxTokens) * kMaxArrivalBlocks * 32;
  auto* base = static_cast<uint8_t*>(ctx.zeroed_scratch(ScratchKind::kGemvQueues, kInts * 4 + kCodes + kCodes / 4));
  auto* ints = reinterpret_cast<int32_t*>(base);
  int8_t* q = reinterpret_cast<int8_t*>(base + kInts * 4);
  return {ints, ints + 2 * kQueueSlots, q, reinterpret_cast<float2*>(q + kCodes)};
}

// A launch's parameters before its passes: parts, activations (quantized for block types), the
// plain-row vector width (8: 16-byte aligned rows and activations) and the streaming scratch.
struct GemvLaunch {
  GemvParams p;
  int64_t vec;
  StreamScratch scratch;
};
GemvLaunch prepare_gemv(CudaContext& ctx, const TensorView& x, std::span<const GemvTarget> parts) {
  CERA_CHECK(!parts.empty() && parts.size() <= size_t(kMaxGemvParts));
  const TensorView& weight = parts[0].weight;
  const int64_t n_in = weight.cols(), n_tokens = x.rows();
  const DType t = weight.dtype;
  const bool plain = dtype_block_size(t) == 1;
  GemvParams p{};
  p.n_parts = int32_t(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    const GemvTarget& g = parts[i];
    CERA_CHECK(g.weight.dtype == t && g.weight.cols() == n_in);
    GemvPart& q = p.part[i];
    q.w = qweight_of(t, g.weight.data, n_in, g.weight.rows(), g.weight.stride());
    q.n_out = g.weight.rows();
    q.out_stride = g.out.stride() / 4;
    q.bias = g.bias != nullptr ? reinterpret_cast<const float*>(g.bias->data) : nullptr;
    if (g.residual != nullptr) {
      CERA_CHECK(g.residual->x.dtype == DType::kF32 && g.residual->x.cols() == q.n_out &&
                 g.residual->x.rows() == n_tokens);
      q.res_stride = g.residual->x.stride() / 4;
      q.res_scale = g.residual->scale;
    }
  }
  p.n_in = n_in;
  int64_t vec = 1;
  if (plain) {
    const int64_t wide = t == DType::kF32 ? 4 : 8;
    bool aligned = n_in % wide == 0 && x.stride() % 16 == 0 && reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
    for (const GemvTarget& g : parts) {
      aligned = aligned && g.weight.stride() % 16 == 0 && reinterpret_cast<uintptr_t>(g.weight.data) % 16 == 0;
    }
    vec = aligned ? wide : 1;
    p.xf_stride = x.stride() / 4;
  }
  if (!plain) {
    p.units_per_row = n_in / (dtype_block_size(t) == 32 ? 32 : 64);
    const ActQ8 a = quantize_activations(ctx, x, dtype_block_size(t) == 32 ? 32 : 256);
    p.xq = a.q;
    p.xds = a.ds;
  }
  return {p, vec, stream_scratch(ctx)};
}

}  // namespace

void gemv_parts(CudaContext& ctx, const TensorView& x, std::span<const GemvTarget> parts) {
  const GemvLaunch l = prepare_gemv(ctx, x, parts);
  const GemvParams& p = l.p;
  const int64_t n_in = p.n_in, n_tokens = x.rows();
  const DType t = parts[0].weight.dtype;
  const bool plain = dtype_block_size(t) == 1;
  if (!ctx.launching()) return;
  int64_t rows = 0;  // of the launch: the row-split rule reads it
  for (size_t i = 0; i < parts.size(); ++i) rows += p.part[i].n_out;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kMaxTokensPass) {
    const int b = int(std::min<int64_t>(kMaxTokensPass, n_tokens - t0));
    GemvParams pp = p;
    for (size_t i = 0; i < parts.size(); ++i) {
      pp.part[i].out = reinterpret_cast<float*>(parts[i].out.row(t0));
      if (parts[i].residual != nullptr) pp.part[i].res = reinterpret_cast<float*>(parts[i].residual->x.row(t0));
    }
    if (plain) {
      pp.xf = reinterpret_cast<const float*>(x.row(t0));
    } else {
      pp.xq = p.xq + t0 * n_in;
      pp.xds = p.xds + t0 * (n_in / 32);
    }
    if (launch_stream(ctx, pp, {}, t, {b, rows, l.vec}, l.scratch.queues)) {
      CERA_CUDA_LAUNCHED();
      continue;
    }
    // The rows a block computes depend on the pass's token count (row splits for 1 and 2 only).
    const GemvPick k = pick_kernel(t, b, l.vec, n_in, {rows, ctx.sm_count()});
    CERA_CHECK_MSG(k.kernel != nullptr, "gemv: no kernel for " + std::string(dtype_name(t)));
    int64_t blocks = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      pp.part[i].first_block = blocks;
      blocks += ceil_div(pp.part[i].n_out, k.rows_per_block);
    }
    launch(ctx.stream(), k.kernel, unsigned(blocks), kWarps * 32, 0, pp);
    CERA_CUDA_LAUNCHED();
  }
}

bool gemv_gated(CudaContext& ctx, const TensorView& x, const GemvTarget& gate, const GemvTarget& up,
                const GatedTarget& out) {
  static const bool on = [] {  // off: no gain measured (docs/benchmarks/cuda.md, v8)
    const char* e = std::getenv("CERA_CUDA_FUSE_GATED");
    return e != nullptr && std::string(e) == "1";
  }();
  const int64_t n_tokens = x.rows(), n_ff = gate.weight.rows(), n_in = gate.weight.cols();
  const DType t = gate.weight.dtype;
  if (!on || n_tokens == 0 || n_tokens > gemv_stream::kMaxTokens || gate.residual != nullptr ||
      out.act == Activation::kGeluErf || up.residual != nullptr || up.weight.dtype != t || up.weight.rows() != n_ff || up.weight.cols() != n_in ||
      n_ff > int64_t{gemv_stream::kMaxArrivalBlocks} * 32 || (out.quantize && n_ff % 32 != 0) ||
      !stream_pays(t, n_in, 2 * n_ff)) {
    return false;
  }
  const GemvTarget parts[2] = {gate, up};
  const GemvLaunch l = prepare_gemv(ctx, x, parts);
  GemvParams p = l.p;
  p.part[0].out = reinterpret_cast<float*>(gate.out.data);
  p.part[1].out = reinterpret_cast<float*>(up.out.data);
  if (dtype_block_size(t) == 1) p.xf = reinterpret_cast<const float*>(x.data);
  const gemv_stream::GatedOut g{reinterpret_cast<float*>(out.h.data), out.h.stride() / 4,
                                out.quantize ? l.scratch.q : nullptr, out.quantize ? l.scratch.ds : nullptr,
                                l.scratch.arrivals, int32_t(n_ff), out.act == Activation::kGeluTanh};
  if (!ctx.launching() || !launch_stream(ctx, p, g, t, {int(n_tokens), 2 * n_ff, l.vec}, l.scratch.queues)) {
    return false;
  }
  CERA_CUDA_LAUNCHED();
  // The down projection finds h's codes where the epilogue wrote them.
  ctx.act_cache() = {};
  if (out.quantize) ctx.act_cache() = {out.h.data, out.h.stride(), n_ff, n_tokens, 32, l.scratch.q, l.scratch.ds};
  return true;
}

}  // namespace cera::ops::cuda
