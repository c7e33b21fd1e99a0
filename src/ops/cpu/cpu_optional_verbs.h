// Entry points of the CPU backend's optional verbs (Feature::kShortConv, Feature::kMoe):
// cpu_conv.cpp (short_conv) and cpu_moe.cpp (moe_route, matmul_experts, moe_combine). Internal
// to src/ops/cpu; kept apart from cpu_context.h so the dense verbs' header stays as it is.
#pragma once

#include "ops/cpu/cpu_context.h"

namespace cera::ops::cpu {

void short_conv(CpuContext& ctx, const TensorView& out, const TensorView& bcx, const TensorView& kernel,
                const TensorView& state);
void moe_route(CpuContext& ctx, const TensorView& ids, const TensorView& weights, const TensorView& logits,
               const RouterParams& params);
void matmul_experts(CpuContext& ctx, const TensorView& out, const TensorView& experts, const TensorView& x,
                    const TensorView& ids);
void moe_combine(CpuContext& ctx, const TensorView& out, const TensorView& expert_out, const TensorView& weights);

}  // namespace cera::ops::cpu
