// matmul and embed: validation, activation quantization (once per call, to the weight's paired
// 8-bit format, one or two terms: ActivationPrecision) and the split of weight rows across the
// thread pool. Rows are split in multiples
// of the kernel's tile so that each weight row is read by one thread, once, for all tokens.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/half.h"
#include "ops/cpu/cpu_context.h"
#include "ops/cpu/repack.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace cera::ops::cpu {
namespace {

// The residual term of a two-term Q8_K row (kernels.h): r = x - d1 * q1 per 256-block, codes
// nearbyint(r / d2) with d2 = max|r| / 127, |code| <= 127 (the K kernels' sign trick needs it).
// Scalar on every level: Q8_K rows are quantized by quant's scalar reference anyway.
void quantize_q8_k_residual(const float* x, int64_t n, const quant::BlockQ8_K* q1, quant::BlockQ8_K* out) {
  for (int64_t b = 0; b < n / 256; ++b, x += 256) {
    float r[256];
    float amax = 0.0f;
    for (int j = 0; j < 256; ++j) {
      r[j] = x[j] - q1[b].d * static_cast<float>(q1[b].qs[j]);
      amax = std::fmax(amax, std::fabs(r[j]));
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = d;
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int j = 16 * g; j < 16 * g + 16; ++j) {
        const int q = static_cast<int>(std::nearbyint(std::fmax(-127.0f, std::fmin(127.0f, r[j] * id))));
        out[b].qs[j] = static_cast<int8_t>(q);
        sum += q;
      }
      out[b].bsums[g] = static_cast<int16_t>(sum);
    }
  }
}

}  // namespace

void quantize_activation_terms(const KernelTable& k, DType act_type, int terms, const float* src, int64_t n_in,
                               std::byte* dst, int64_t row_bytes, float* d, int32_t* sum) {
  const int64_t nb = n_in / 32;
  if (act_type == DType::kQ8_0) {
    k.quantize_q8_0(src, n_in, dst, d, sum);
    if (terms == 2) k.quantize_q8_0_residual(src, n_in, dst, dst + row_bytes, d + nb, sum + nb);
    return;
  }
  quant::quantize_activation_row(act_type, src, dst, n_in);
  if (terms == 2) {
    quantize_q8_k_residual(src, n_in, reinterpret_cast<const quant::BlockQ8_K*>(dst),
                           reinterpret_cast<quant::BlockQ8_K*>(dst + row_bytes));
  }
}

namespace {

// Quantizes x's rows into ctx scratch and describes them: one row per token, or two (the codes
// and the residual's codes, kernels.h) with ActivationPrecision::kInt8x2.
PackedActivations pack_activations(CpuContext& ctx, DType act_type, const TensorView& x) {
  const int64_t n_in = x.cols();
  const int64_t n_tokens = x.rows();
  PackedActivations p;
  p.type = act_type;
  if (act_type == DType::kF32) {
    p.data = x.data;
    p.row_stride = x.stride();
    return p;
  }
  const int terms = ctx.activations == ActivationPrecision::kInt8x2 ? 2 : 1;
  const int64_t n_rows = n_tokens * terms;
  const int64_t row_bytes = static_cast<int64_t>(*dtype_row_bytes(act_type, static_cast<uint64_t>(n_in)));
  ctx.act_rows.resize(static_cast<size_t>(row_bytes * n_rows));
  std::byte* rows = ctx.act_rows.data();
  const bool q8_0 = act_type == DType::kQ8_0;
  const int64_t nb = n_in / 32;
  if (q8_0) {
    ctx.act_d.resize(static_cast<size_t>(nb * n_rows));
    ctx.act_sum.resize(static_cast<size_t>(nb * n_rows));
  }
  float* act_d = ctx.act_d.data();
  int32_t* act_sum = ctx.act_sum.data();
  const KernelTable& k = *ctx.kernels;
  ctx.pool.parallel_for(n_tokens, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t r1 = t * terms;  // and r1 + 1, the residual row, when terms == 2
      quantize_activation_terms(k, act_type, terms, x.row_as<const float>(t), n_in, rows + r1 * row_bytes, row_bytes,
                                q8_0 ? act_d + r1 * nb : nullptr, q8_0 ? act_sum + r1 * nb : nullptr);
    }
  });
  p.data = rows;
  p.row_stride = row_bytes;
  p.block_d = act_d;
  p.block_sum = act_sum;
  p.terms = terms;
  return p;
}

}  // namespace

void check_f32_cpu(const TensorView& v, const char* what) {
  CERA_CHECK_MSG(v.device == Device::kCpu, std::string(what) + ": not a CPU tensor");
  CERA_CHECK_MSG(v.dtype == DType::kF32, std::string(what) + ": expected F32, got " +
                                             std::string(dtype_name(v.dtype)));
  CERA_CHECK_MSG(v.data != nullptr || v.n_elements() == 0, std::string(what) + ": null data");
}

void matmul(CpuContext& ctx, const TensorView& out, const TensorView& weight, const TensorView& x,
            const TensorView* bias) {
  check_f32_cpu(out, "matmul out");
  check_f32_cpu(x, "matmul x");
  CERA_CHECK(weight.device == Device::kCpu);
  const int64_t n_in = weight.cols();
  const int64_t n_out = weight.rows();
  const int64_t n_tokens = x.rows();
  CERA_CHECK_MSG(x.cols() == n_in, "matmul: x has " + std::to_string(x.cols()) +
                                       " columns, weight " + std::to_string(n_in));
  CERA_CHECK_MSG(out.cols() == n_out && out.rows() == n_tokens, "matmul: out shape mismatch");
  CERA_CHECK(n_in % dtype_block_size(weight.dtype) == 0);
  if (bias != nullptr) {
    check_f32_cpu(*bias, "matmul bias");
    CERA_CHECK(bias->n_elements() == n_out && bias->packed());
  }
  R16Weight r16{};
  const bool repacked = ctx.r16->find(weight.data, r16);
  if (repacked) {
    CERA_CHECK_MSG(r16.type == weight.dtype && r16.n_in == n_in && r16.n_out == n_out,
                   "matmul: a repacked weight must be used whole (no row slices)");
  }
  const MatmulRowsFn rows_fn = repacked ? ctx.kernels->r16_matmul_for(weight.dtype)
                                        : ctx.kernels->matmul_for(weight.dtype);
  CERA_CHECK_MSG(rows_fn != nullptr,
                 "matmul: no CPU kernel for weight type " + std::string(dtype_name(weight.dtype)));
  if (n_out == 0 || n_tokens == 0) return;
  CERA_CHECK_MSG(out.stride() % static_cast<int64_t>(sizeof(float)) == 0, "matmul: out stride");

  MatmulArgs args;
  args.weight_type = weight.dtype;
  args.weight = weight.data;
  args.w_stride = weight.stride();
  args.n_in = n_in;
  args.n_out = n_out;
  args.act = pack_activations(ctx, quant::activation_type_for(weight.dtype), x);
  args.n_tokens = n_tokens * args.act.terms;
  args.out = out.row_as<float>(0);
  args.out_stride = out.stride() / static_cast<int64_t>(sizeof(float));
  args.bias = bias != nullptr ? bias->row_as<const float>(0) : nullptr;

  // Many tokens over float weights: the GEMM (its chunks pack their own weight columns, once for
  // all tokens, so the chunk size does not change the packing work).
  const MatmulRowsFn gemm_fn = !repacked && args.act.type == DType::kF32 && args.act.terms == 1 &&
                                       args.n_tokens >= ctx.kernels->gemm_min_tokens
                                   ? ctx.kernels->gemm_for(weight.dtype)
                                   : nullptr;
  // Chunks of whole tiles, about 8 per thread so that dynamic claiming evens out the threads;
  // a small product runs on the calling thread alone (a dispatch costs a few microseconds).
  const int64_t tile = gemm_fn != nullptr ? ctx.kernels->gemm_cols : repacked ? kR16Rows : ctx.kernels->tile_rows;
  const int64_t n_tiles = (n_out + tile - 1) / tile;
  const int64_t macs = n_out * n_in * args.n_tokens;
  const int64_t grain = macs < (1 << 16) ? n_tiles
                                         : std::max<int64_t>(1, n_tiles / (8 * ctx.pool.size()));
  if (gemm_fn != nullptr) {
    // The GEMM's activations, packed once for every chunk (packing per chunk cost 15 % of an
    // embedding run at 4 chunks of 96 columns).
    const int64_t block = ctx.kernels->gemm_tokens;
    const int64_t n_blocks = (args.n_tokens + block - 1) / block;
    ctx.gemm_x.resize(static_cast<size_t>(n_blocks * block * n_in + 16));
    const auto addr = reinterpret_cast<uintptr_t>(ctx.gemm_x.data());
    float* packed = ctx.gemm_x.data() + ((64 - addr % 64) % 64) / sizeof(float);
    ctx.pool.parallel_for(n_blocks, macs < (1 << 16) ? n_blocks : 1, [&](int64_t begin, int64_t end) {
      ctx.kernels->gemm_pack(args, begin, end, packed);
    });
    args.gemm_x = packed;
  }
  const MatmulRowsFn fn = gemm_fn != nullptr ? gemm_fn : rows_fn;
  ctx.pool.parallel_for(n_tiles, grain, [&](int64_t begin, int64_t end) {
    fn(args, begin * tile, std::min(end * tile, n_out));
  });
}

void embed(CpuContext& ctx, const TensorView& out, const TensorView& table,
           std::span<const int32_t> tokens, float scale) {
  check_f32_cpu(out, "embed out");
  CERA_CHECK(table.device == Device::kCpu);
  CERA_CHECK(quant::has_dequantizer(table.dtype));
  const int64_t n_embd = table.cols();
  const int64_t n_vocab = table.rows();
  CERA_CHECK_MSG(out.cols() == n_embd && out.rows() == static_cast<int64_t>(tokens.size()),
                 "embed: out shape mismatch");
  for (int32_t id : tokens) CERA_CHECK_MSG(id >= 0 && id < n_vocab, "embed: token id out of range");
  R16Weight r16{};
  const bool repacked = ctx.r16->find(table.data, r16);
  CERA_CHECK(!repacked || (r16.n_in == n_embd && r16.n_out == n_vocab));
  ctx.pool.parallel_for(static_cast<int64_t>(tokens.size()), 16, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* dst = out.row_as<float>(t);
      const int32_t id = tokens[static_cast<size_t>(t)];
      if (repacked) {
        r16_dequantize_row(table.dtype, table.data, n_embd, id, dst);
      } else {
        quant::dequantize_row(table.dtype, table.row(id), dst, n_embd);
      }
      if (scale != 1.0f) {
        for (int64_t i = 0; i < n_embd; ++i) dst[i] *= scale;
      }
    }
  });
}

}  // namespace cera::ops::cpu
