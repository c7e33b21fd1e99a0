// The op entries of the CUDA backend, one group per file: matmul.cu + gemv.cu + gemm.cu (matmul),
// embed.cu, elementwise.cu, rope_kv.cu, attention.cu, and the optional verbs at the end. Each
// validates its views once, then calls its launcher. Internal to src/ops/cuda.
#pragma once

#include <span>

#include "ops/backend.h"
#include "ops/cuda/cuda_context.h"

namespace cera::ops::cuda {

// The most tokens a GEMV launch takes (weights read once, dp4a on 8-bit activations). Which
// kernel a batch gets is gemm_rows.h's matmul_path: the GEMV for single tokens, gemm_rows for
// serving batches, the prompt path above.
inline constexpr int64_t kGemvMaxTokens = 16;

// CERA_CUDA_BATCH_INVARIANT=1: every row is computed by the same kernels whatever else shares its
// forward, so a request's tokens do not depend on its batch (the engine loop's batched equals
// alone on quantized models). Every matmul runs through gemm_rows, whose per-row sums have one
// order for a weight whatever the batch (gemm_rows.cu), in chunks of 256 rows (the GEMV, whose
// rows are independent too, in chunks of kGemvMaxTokens for weights gemm_rows cannot take: F32,
// odd F16 widths); attention never takes the prompt kernel and splits the context as for one
// token, and graphs are off (their fused replays are not the eager calls). Single tokens pay:
// they decode through gemm_rows instead of the GEMV.
bool batch_invariant();

void matmul(CudaContext& ctx, const TensorView& out, const TensorView& weight, const TensorView& x,
            const TensorView* bias);
void gemv(CudaContext& ctx, const TensorView& out, const TensorView& weight, const TensorView& x,
          const TensorView* bias);
// Several weights of one type and width applied to the same x in one launch (Q/K/V, gate/up).
inline constexpr int kMaxGemvParts = 3;
// residual: also x += scale * out (x [n_out, n_tokens] F32, aliasing neither out nor the input),
// with add_scaled's float operation: the residual add after the O and down projections rides in
// their GEMV (fused.cu), which leaves the norm after it free to run on several blocks.
struct ResidualAdd {
  TensorView x;
  float scale = 1.0f;
};
struct GemvTarget {
  TensorView out;
  TensorView weight;
  const TensorView* bias;
  const ResidualAdd* residual = nullptr;
};
void gemv_parts(CudaContext& ctx, const TensorView& x, std::span<const GemvTarget> parts);
// The gate and up projections of a gated FFN in one streaming GEMV launch (1-2 tokens) that also
// writes h = act(gate) * up and, with quantize, h's Q8_0 codes for the down projection (left in
// the activation cache): fused.cu's gate ; up ; gated_activation. Only with
// CERA_CUDA_FUSE_GATED=1 and where the launch streams: it matches the unfused calls (the matmul
// and graph tests) but gained nothing (8B Q4_0 501.6 vs 501.7 t/s; docs/benchmarks/cuda.md v8).
// False: the caller runs the calls unfused (x may already be quantized; the cache says so).
struct GatedTarget {
  TensorView h;  // F32 [n_ff, n_tokens]
  Activation act;
  bool quantize;
};
bool gemv_gated(CudaContext& ctx, const TensorView& x, const GemvTarget& gate, const GemvTarget& up,
                const GatedTarget& out);
// The kActQ8 scratch of a GEMV: codes [n_tokens, n_in], then (d, code sum) per 32 elements.
struct ActQ8 {
  int8_t* q;
  float2* ds;
};
ActQ8 act_q8_scratch(CudaContext& ctx, int64_t n_tokens, int64_t n_in);
// x's rows quantized into the kActQ8 scratch (Q8_0 for act_block 32, Q8_K for 256), unless the
// cache says they already are; in record mode the scratch is sized and nothing is launched.
ActQ8 quantize_activations(CudaContext& ctx, const TensorView& x, int64_t act_block);
// Does gemv() read Q8_0 activations (32-element weight blocks) for this weight and batch?
bool gemv_takes_q8_0(const TensorView& weight, int64_t n_tokens);
void gemm(CudaContext& ctx, const TensorView& out, const TensorView& weight, const TensorView& x,
          const TensorView* bias);
// Prompt-path matmuls (gemm: cuBLAS on f16 copies) of at most graphed_gemm_rows() rows are
// recorded into graphs like the serving kernels (graph.cu): the decode steps of 129-256 rows ran
// their ~600 launches eagerly, unfused. Larger prompt chunks stay eager: each size would be a new
// graph. CERA_CUDA_GRAPH_GEMM_ROWS (at most 256, the default; 0: never), read once. Measured
// (H100, session 36, synthetic Q4_0, 256 rows a step): 8B 22.43 -> 21.67 ms a step, 1B 4.79 ->
// 4.53 ms; graphs equal eager to 1e-5 in the graph tests. The context's cuBLAS handle has a
// workspace of its own (cuda_context.cu), so captured cuBLAS calls never allocate.
int64_t graphed_gemm_rows();
// May gemm() of this batch be recorded (the default cuBLAS path, at most graphed_gemm_rows() rows)?
bool gemm_recordable(const TensorView& weight, int64_t n_tokens);
// Called after a verb wrote `out`: drops the quantized-activation cache if out overlaps its input.
void forget_overwritten_activations(CudaContext& ctx, const TensorView& out);
// out[n, rows] += bias[n] broadcast over rows.
void add_bias(CudaContext& ctx, const TensorView& out, const float* bias);

void embed(CudaContext& ctx, const TensorView& out, const TensorView& table, std::span<const int32_t> tokens,
           float scale);
// Backend::embed_ids: the ids ([n_tokens] I32) are a device view, read when the kernel runs.
void embed_ids(CudaContext& ctx, const TensorView& out, const TensorView& table, const TensorView& ids,
               float scale);

void rms_norm(CudaContext& ctx, const TensorView& out, const TensorView& x, const TensorView& weight, float eps);
void layer_norm(CudaContext& ctx, const TensorView& out, const TensorView& x, const TensorView& weight,
                const TensorView& bias, float eps);
void activation(CudaContext& ctx, const TensorView& out, const TensorView& x, Activation act);
void gated_activation(CudaContext& ctx, const TensorView& out, const TensorView& gate, const TensorView& up,
                      Activation act);
void add_scaled(CudaContext& ctx, const TensorView& out, const TensorView& a, const TensorView& b, float scale);
void scale(CudaContext& ctx, const TensorView& x, float s);

void rope(CudaContext& ctx, const TensorView& x, std::span<const int32_t> positions, const RopeParams& params);
void kv_store(CudaContext& ctx, const KvLayer& layer, const TensorView& k, const TensorView& v,
              std::span<const int32_t> slots);
void kv_copy(CudaContext& ctx, const KvLayer& layer, std::span<const int32_t> src_slots,
             std::span<const int32_t> dst_slots);
void kv_rerotate(CudaContext& ctx, const KvLayer& layer, std::span<const int32_t> slots, int32_t delta,
                 int32_t head_dim, const RopeParams& params);

// Backend::mask_logits on the device (mask_logits.cu).
void mask_logits(CudaContext& ctx, const TensorView& logits, std::span<const uint32_t> masks,
                 std::span<const int32_t> rows);

// Backend::top_k on the device (top_k.cu).
void top_k(CudaContext& ctx, const TensorView& ids, const TensorView& values, const TensorView& lse,
           const TensorView& logits, const TopKParams& params);

void attention(CudaContext& ctx, const TensorView& out, const TensorView& q, const KvLayer& layer,
               const AttentionBatch& batch, const AttentionParams& params);
// How early decode attention reads the cache rows of earlier steps: 0 after its PDL wait; 1 before
// it (attention_common.cuh, fresh_row); 2 also the fused RoPE + K/V store kernel before it lets it be
// scheduled as that kernel starts (fused.cu), so those reads overlap the Q/K/V GEMV.
// CERA_CUDA_ATTN_EARLY=0/1/2 (A/B runs).
int attention_early_mode();

// Optional verbs (Feature::kShortConv, Feature::kMoe): short_conv.cu, moe.cu, expert_matmul.cu.
void short_conv(CudaContext& ctx, const TensorView& out, const TensorView& bcx, const TensorView& kernel,
                const TensorView& state);
void moe_route(CudaContext& ctx, const TensorView& ids, const TensorView& weights, const TensorView& logits,
               const RouterParams& params);
// Decode batches (<= kGemvMaxTokens tokens) are one launch; larger ones two (grouping, products).
void matmul_experts(CudaContext& ctx, const TensorView& out, const TensorView& experts, const TensorView& x,
                    const TensorView& ids);
void moe_combine(CudaContext& ctx, const TensorView& out, const TensorView& expert_out, const TensorView& weights);

}  // namespace cera::ops::cuda
