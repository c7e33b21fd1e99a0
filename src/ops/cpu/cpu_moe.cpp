// Mixture-of-experts verbs: moe_route (scores, top-k, weights), matmul_experts and moe_combine.
// matmul_experts groups the (token, slot) rows by expert (a counting sort), quantizes the
// activation rows once, and hands each chosen expert's rows to the same per-ISA row kernels the
// dense matmul uses, as one matrix-matrix product: each chosen expert's weights are read once per
// call whatever the batch, and experts nobody chose are never read. One parallel_for covers all
// (expert, row tile) units, so a decode step with k experts is one dispatch, not k.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "ops/cpu/cpu_optional_verbs.h"
#include "ops/cpu/repack.h"
#include "quant/quant.h"

namespace cera::ops::cpu {
namespace {

void check_i32_cpu(const TensorView& v, const char* what) {
  CERA_CHECK_MSG(v.device == Device::kCpu && v.dtype == DType::kI32, std::string(what) + ": expected CPU I32");
}

// Activation rows of one matmul_experts call in the weight's paired format, grouped by expert.
struct GroupedActivations {
  std::vector<std::byte> rows;  // [n_rows][row_bytes]
  std::vector<float> d;         // Q8_0 only: [n_rows][n_blocks]
  std::vector<int32_t> sum;     // Q8_0 only: [n_rows][n_blocks]
  int64_t row_bytes = 0;
  int64_t n_blocks = 0;
};

}  // namespace

void moe_route(CpuContext& ctx, const TensorView& ids, const TensorView& weights, const TensorView& logits,
               const RouterParams& params) {
  check_i32_cpu(ids, "moe_route ids");
  check_f32_cpu(weights, "moe_route weights");
  check_f32_cpu(logits, "moe_route logits");
  const int64_t n_expert = logits.cols(), n_tokens = logits.rows(), k = params.n_expert_used;
  CERA_CHECK_MSG(k >= 1 && k <= n_expert, "moe_route: n_expert_used " + std::to_string(k) + " of " +
                                              std::to_string(n_expert) + " experts");
  CERA_CHECK_MSG(ids.cols() == k && ids.rows() == n_tokens && weights.cols() == k && weights.rows() == n_tokens,
                 "moe_route: ids and weights must be [k, n_tokens]");
  const float* bias = nullptr;
  if (params.selection_bias != nullptr) {
    check_f32_cpu(*params.selection_bias, "moe_route selection_bias");
    CERA_CHECK(params.selection_bias->n_elements() == n_expert && params.selection_bias->packed());
    CERA_CHECK_MSG(params.gating == RouterGating::kSigmoid, "moe_route: a selection bias needs sigmoid gating");
    bias = params.selection_bias->row_as<const float>(0);
  }
  const int64_t grain = n_tokens * n_expert < (1 << 14) ? std::max<int64_t>(n_tokens, 1) : 16;
  ctx.pool.parallel_for(n_tokens, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> score(static_cast<size_t>(n_expert)), choice(static_cast<size_t>(n_expert));
    std::vector<int32_t> order(static_cast<size_t>(n_expert));
    for (int64_t t = begin; t < end; ++t) {
      const float* l = logits.row_as<const float>(t);
      if (params.gating == RouterGating::kSoftmax) {
        const float mx = *std::max_element(l, l + n_expert);
        float total = 0.0f;
        for (int64_t e = 0; e < n_expert; ++e) total += score[e] = std::exp(l[e] - mx);
        for (int64_t e = 0; e < n_expert; ++e) score[e] /= total;
      } else {
        for (int64_t e = 0; e < n_expert; ++e) score[e] = 1.0f / (1.0f + std::exp(-l[e]));
      }
      for (int64_t e = 0; e < n_expert; ++e) choice[e] = bias != nullptr ? score[e] + bias[e] : score[e];
      std::iota(order.begin(), order.end(), 0);
      // Best first; equal scores keep the lower expert id first (torch.topk's order on ties).
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
        return choice[a] > choice[b] || (choice[a] == choice[b] && a < b);
      });
      int32_t* id = ids.row_as<int32_t>(t);
      float* w = weights.row_as<float>(t);
      float sum = 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        id[j] = order[j];
        sum += w[j] = score[order[j]];
      }
      const float mul = params.normalize ? params.scale / sum : params.scale;
      for (int64_t j = 0; j < k; ++j) w[j] *= mul;
    }
  });
}

void matmul_experts(CpuContext& ctx, const TensorView& out, const TensorView& experts, const TensorView& x,
                    const TensorView& ids) {
  check_f32_cpu(out, "matmul_experts out");
  check_f32_cpu(x, "matmul_experts x");
  check_i32_cpu(ids, "matmul_experts ids");
  CERA_CHECK(experts.device == Device::kCpu);
  const int64_t n_in = experts.ne[0], n_out = experts.ne[1], n_expert = experts.ne[2];
  const int64_t k = ids.cols(), n_tokens = ids.rows(), n_rows = k * n_tokens;
  CERA_CHECK_MSG(experts.ne[3] == 1 && x.cols() == n_in, "matmul_experts: x has " + std::to_string(x.cols()) +
                                                              " columns, experts " + std::to_string(n_in));
  const bool shared_x = x.rows() == n_tokens;  // [n_in, n_tokens]: every slot of a token reads the same row
  CERA_CHECK_MSG(shared_x || (x.ne[1] == k && x.rows() == n_rows), "matmul_experts: x must be [n_in, n_tokens] or [n_in, k, n_tokens]");
  CERA_CHECK_MSG(out.cols() == n_out && out.ne[1] == k && out.rows() == n_rows, "matmul_experts: out must be [n_out, k, n_tokens]");
  CERA_CHECK(n_in % dtype_block_size(experts.dtype) == 0);
  R16Weight r16{};
  const bool repacked = ctx.r16->find(experts.data, r16);
  if (repacked) {
    // import_weight repacked the stack as one [n_in, n_out * n_expert] matrix; an expert starts at
    // a 16-row group boundary only when n_out is a multiple of 16 (true of every real MoE).
    CERA_CHECK_MSG(r16.type == experts.dtype && r16.n_in == n_in && r16.n_out == n_out * n_expert,
                   "matmul_experts: a repacked expert stack must be used whole");
    CERA_CHECK_MSG(n_out % kR16Rows == 0, "matmul_experts: repacked experts need n_out % 16 == 0");
  }
  const MatmulRowsFn rows_fn = repacked ? ctx.kernels->r16_matmul_for(experts.dtype) : ctx.kernels->matmul_for(experts.dtype);
  CERA_CHECK_MSG(rows_fn != nullptr, "matmul_experts: no CPU kernel for weight type " + std::string(dtype_name(experts.dtype)));
  if (n_rows == 0 || n_out == 0) return;

  // Group the rows r = j + k * t by expert (stable, so each expert sees its tokens in order).
  std::vector<int64_t> count(static_cast<size_t>(n_expert) + 1, 0), perm(static_cast<size_t>(n_rows));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int32_t* id = ids.row_as<const int32_t>(t);
    for (int64_t j = 0; j < k; ++j) {
      CERA_CHECK_MSG(id[j] >= 0 && id[j] < n_expert, "matmul_experts: expert id " + std::to_string(id[j]) + " out of range");
      ++count[static_cast<size_t>(id[j]) + 1];
    }
  }
  std::vector<int64_t> first(count.size());
  std::partial_sum(count.begin(), count.end(), first.begin());  // first[e]: start of expert e's rows
  std::vector<int64_t> fill(first.begin(), first.end() - 1);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int32_t* id = ids.row_as<const int32_t>(t);
    for (int64_t j = 0; j < k; ++j) perm[static_cast<size_t>(fill[static_cast<size_t>(id[j])]++)] = j + k * t;
  }

  // Activation rows in the weight's paired format, in grouped order. Shared rows are quantized
  // once per slot (k times per token): n_in work per row, next to n_in * n_out for the product.
  // With two-term activations (the default) each row becomes two: codes and residual codes.
  const DType act_type = quant::activation_type_for(experts.dtype);
  const int terms = act_type != DType::kF32 && ctx.activations == ActivationPrecision::kInt8x2 ? 2 : 1;
  GroupedActivations a;
  a.row_bytes = static_cast<int64_t>(*dtype_row_bytes(act_type, static_cast<uint64_t>(n_in)));
  a.n_blocks = n_in / 32;
  a.rows.resize(static_cast<size_t>(a.row_bytes * n_rows * terms));
  const bool q8_0 = act_type == DType::kQ8_0;
  if (q8_0) {
    a.d.resize(static_cast<size_t>(a.n_blocks * n_rows * terms));
    a.sum.resize(static_cast<size_t>(a.n_blocks * n_rows * terms));
  }
  ctx.pool.parallel_for(n_rows, n_rows * n_in < (1 << 16) ? n_rows : 4, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      const int64_t r = perm[static_cast<size_t>(s)];
      const float* src = x.row_as<const float>(shared_x ? r / k : r);
      std::byte* dst = a.rows.data() + s * terms * a.row_bytes;
      quantize_activation_terms(*ctx.kernels, act_type, terms, src, n_in, dst, a.row_bytes,
                                q8_0 ? a.d.data() + s * terms * a.n_blocks : nullptr,
                                q8_0 ? a.sum.data() + s * terms * a.n_blocks : nullptr);
    }
  });

  // One unit = one row tile of one chosen expert.
  const int64_t tile = repacked ? kR16Rows : ctx.kernels->tile_rows;
  const int64_t tiles_per_expert = (n_out + tile - 1) / tile;
  std::vector<int32_t> active;
  for (int64_t e = 0; e < n_expert; ++e) {
    if (count[static_cast<size_t>(e) + 1] > 0) active.push_back(static_cast<int32_t>(e));
  }
  std::vector<float> grouped_out(static_cast<size_t>(n_rows * n_out));
  const int64_t n_units = static_cast<int64_t>(active.size()) * tiles_per_expert;
  const int64_t macs = n_rows * n_in * n_out;
  const int64_t grain = macs < (1 << 16) ? n_units : std::max<int64_t>(1, n_units / (8 * ctx.pool.size()));
  ctx.pool.parallel_for(n_units, grain, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t e = active[static_cast<size_t>(u / tiles_per_expert)];
      const int64_t row0 = (u % tiles_per_expert) * tile;
      const int64_t s0 = first[static_cast<size_t>(e)];
      MatmulArgs m;
      m.weight_type = experts.dtype;
      m.weight = repacked ? experts.data + r16_size(experts.dtype, n_in, e * n_out) : experts.row(e * n_out);
      m.w_stride = experts.stride();
      m.n_in = n_in;
      m.n_out = n_out;
      m.n_tokens = count[static_cast<size_t>(e) + 1] * terms;
      m.act.type = act_type;
      m.act.terms = terms;
      m.act.data = a.rows.data() + s0 * terms * a.row_bytes;
      m.act.row_stride = a.row_bytes;
      if (q8_0) {
        m.act.block_d = a.d.data() + s0 * terms * a.n_blocks;
        m.act.block_sum = a.sum.data() + s0 * terms * a.n_blocks;
      }
      m.out = grouped_out.data() + s0 * n_out;
      m.out_stride = n_out;
      rows_fn(m, row0, std::min(row0 + tile, n_out));
    }
  });
  // Scatter back to out[:, j, t].
  for (int64_t s = 0; s < n_rows; ++s) {
    std::memcpy(out.row_as<float>(perm[static_cast<size_t>(s)]), grouped_out.data() + s * n_out,
                static_cast<size_t>(n_out) * sizeof(float));
  }
}

void moe_combine(CpuContext& ctx, const TensorView& out, const TensorView& expert_out, const TensorView& weights) {
  check_f32_cpu(out, "moe_combine out");
  check_f32_cpu(expert_out, "moe_combine expert_out");
  check_f32_cpu(weights, "moe_combine weights");
  const int64_t n = out.cols(), n_tokens = out.rows(), k = weights.cols();
  CERA_CHECK_MSG(weights.rows() == n_tokens && expert_out.cols() == n && expert_out.ne[1] == k &&
                     expert_out.rows() == k * n_tokens,
                 "moe_combine: expert_out must be [n, k, n_tokens] and weights [k, n_tokens]");
  const int64_t grain = n_tokens * n * k < (1 << 15) ? std::max<int64_t>(n_tokens, 1) : 4;
  ctx.pool.parallel_for(n_tokens, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* w = weights.row_as<const float>(t);
      float* o = out.row_as<float>(t);
      const float* e0 = expert_out.row_as<const float>(k * t);
      for (int64_t i = 0; i < n; ++i) o[i] = w[0] * e0[i];
      for (int64_t j = 1; j < k; ++j) {
        const float* ej = expert_out.row_as<const float>(k * t + j);
        for (int64_t i = 0; i < n; ++i) o[i] += w[j] * ej[i];
      }
    }
  });
}

}  // namespace cera::ops::cpu
