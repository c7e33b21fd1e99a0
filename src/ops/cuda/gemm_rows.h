// Which kernel a matmul's batch takes, and the tensor-core GEMM for serving batches (gemm_rows.cu):
// the decode rows of many requests in one step, from 2 to 256 rows. Internal to src/ops/cuda.
#pragma once

#include <cstdint>
#include <span>

#include "ops/cuda/cuda_context.h"
#include "ops/cuda/cuda_ops.h"

namespace cera::ops::cuda {

// kGemv: gemv.cu (1 row, or any batch of at most kGemvMaxTokens rows where gemm_rows cannot
// take the weight, and every such batch under CERA_CUDA_BATCH_INVARIANT=1); kRows: gemm_rows
// (rows_min() .. rows_max() rows); kPrefill: matmul.cu's prompt path (cuBLAS on an f16 copy, or
// gemm_q), which graph.cu runs eagerly. Decision: the GEMV reads 8-bit activations and does one
// dp4a per 4 weights and row, so its work grows with the rows while its weight reads do not; at
// 16 rows it ran at 8 % of the H200's bandwidth (docs/benchmarks/batched_profile_h200.md).
enum class MatmulPath : uint8_t { kGemv, kRows, kPrefill };
MatmulPath matmul_path(const TensorView& weight, int64_t n_tokens);

// The integer in environment variable `name`, clamped to [lo, hi]; `fallback` when unset or
// empty. The serving paths' A/B knobs below read their values through it, once each.
int64_t env_int(const char* name, int64_t fallback, int64_t lo, int64_t hi);

// The row range gemm_rows takes: CERA_CUDA_ROWS_MIN (default 5; 257 turns gemm_rows off) and
// CERA_CUDA_ROWS_MAX (default 128, at most 256), read once (A/B runs, and the test passes that
// keep the GEMV and prefill paths covered: scripts/cuda-check.sh). Measured on the H200 (8B Q4_0
// decode step, docs/benchmarks/serving_batch_h200.md): 4 rows 3.93 ms by the GEMV against 5.44
// by gemm_rows, 8 rows 6.55 against 5.79; 256 rows 19.74 ms by the prompt path (cuBLAS) against
// 31.54 by gemm_rows.
int64_t rows_min();
int64_t rows_max();
inline constexpr int64_t kRowsMaxLimit = 256;

// Can gemm_rows() take this weight? The block formats, and F16/BF16 rows of a multiple of 8
// elements, 16-byte aligned (as gemm_q_supports).
bool gemm_rows_supports(const TensorView& weight);

// out[n_out, n_tokens] = x[n_in, n_tokens] · weight[n_in, n_out]ᵀ (+ bias[n_out]), views already
// validated by matmul(). x is read as f16 (bf16 for BF16 weights) through gemm_activations();
// eager, record (sizes scratch only) or capture mode.
void gemm_rows(CudaContext& ctx, const TensorView& out, const TensorView& weight, const TensorView& x,
               const TensorView* bias);

// Several weights of one type and width applied to the same x in one launch (Q/K/V, gate/up),
// each summed exactly as by gemm_rows alone (graph.cu's replay fuses them: fused.cu).
struct RowsTarget {
  TensorView out;
  TensorView weight;
  const TensorView* bias;
};
void gemm_rows_parts(CudaContext& ctx, const TensorView& x, std::span<const RowsTarget> parts);

// Q4_0 batches of at most rows_direct_max() rows (CERA_CUDA_ROWS_DIRECT_MAX, at most 256; default
// 64, where the H200 measured it as fast as gemm_rows or faster; 0: never) go to
// gemm_rows_direct.cu's kernel (weights decoded from registers straight into tensor-core
// fragments), except under CERA_CUDA_BATCH_INVARIANT=1, whose k order is gemm_rows' own.
int64_t rows_direct_max();
// Which of gemm_rows_direct's kernels runs: 0 the register kernel; 3, 4 (default) or 8 (1: 4) the
// ring kernel with that many weight stages a warp (gemm_rows_direct_ring.cu), from
// CERA_CUDA_ROWS_DIRECT_RING, read once (A/B runs on one binary). Measured on the H200 (8B Q4_0
// decode): RING=4 3,559 / 7,603 tokens/s at 16 / 64 rows against the register kernel's 3,462 /
// 7,293 and RING=8's 3,466 / 7,484 (docs/benchmarks/serving_batch_h200.md).
int rows_direct_ring();
bool gemm_rows_direct_takes(DType dtype, int64_t n_tokens);
void gemm_rows_direct_parts(CudaContext& ctx, const TensorView& x, std::span<const RowsTarget> parts);

// Q4_0 batches of at most rows_stream_max() rows (CERA_CUDA_ROWS_STREAM_MAX, at most 256; default
// 64) whose rows are a multiple of 256 elements go to gemm_rows_stream.cu's persistent kernel (a
// producer warp streams the weights by bulk copies into a ring that consumer warps decode into
// tensor-core fragments), except under CERA_CUDA_BATCH_INVARIANT=1, when CERA_CUDA_ROWS_STREAM
// turns it on: 1 or 2 resident blocks an SM; 0 (the default until it is measured on a GPU:
// gemm_rows_stream.cu) leaves these batches to the direct kernels.
int rows_stream_blocks();
int64_t rows_stream_max();
bool gemm_rows_stream_takes(const TensorView& weight, int64_t n_tokens);
void gemm_rows_stream_parts(CudaContext& ctx, const TensorView& x, std::span<const RowsTarget> parts);

// The split-k scratch of both serving kernels (ScratchKind::kGemmSplit): arrival counters in a
// region of fixed size that the kernels leave at zero, then `partial_floats` of partial tiles
// (three times as many for a single weight: graph replay fuses up to three such calls into one
// launch and capture must not grow the scratch). Nothing is allocated when counters is 0.
struct SplitScratch {
  int* counters = nullptr;
  float* partials = nullptr;
};
SplitScratch split_scratch(CudaContext& ctx, int64_t counters, int64_t partial_floats, size_t n_parts);

// How the weights of a launch become blocks, for both serving kernels: each weight's tiles of
// tile_rows weight rows x m_tiles token tiles x its k splits, the parts' blocks one after the
// other. The splits: as many as fill `slots` blocks in one wave for one token tile of that weight
// alone, each at least two of the k_steps long, at most 16; from the weight's shape alone, so a
// fused launch sums as the separate ones do (and gemm_rows' every batch as any other). Checks
// that the weights share type and width and that the launch fits its index types.
struct SplitShape {
  int64_t tile_rows;    // weight rows a tile
  int64_t m_tiles;      // token tiles
  int64_t k_steps;      // the k loop's steps a row
  int64_t tile_floats;  // a partial tile's floats
  int64_t slots;        // blocks in one wave
};
struct PartSplit {
  int n_out = 0, n_tiles = 0, n_splits = 1, first_block = 0;
  int64_t counter_at = 0, partial_at = 0;  // into split_scratch's counters and partials (n_splits > 1)
};
struct SplitPlan {
  PartSplit part[kMaxGemvParts];
  int64_t blocks = 0, counters = 0, partial_floats = 0;
};
SplitPlan plan_splits(std::span<const RowsTarget> parts, const SplitShape& shape);

// x's rows converted to f16 (bf16) into kGemmX scratch, [n_tokens][n_in] packed, unless the
// activation cache says they already are there (Q/K/V and gate/up share one conversion); in
// record mode the scratch is sized and nothing is launched (matmul.cu).
const void* gemm_activations(CudaContext& ctx, const TensorView& x, bool bf16);

}  // namespace cera::ops::cuda
