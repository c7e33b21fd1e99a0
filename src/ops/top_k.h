// Host selection of a logits row's k best candidates and its log-sum-exp: the body of
// Backend::top_k for backends whose logits live in host memory, and the reference the device
// implementations are tested against.
#pragma once

#include <cstdint>
#include <span>

#include "ops/backend.h"

namespace cera::ops {

// Selects from `logits` (one row) after params.softcap into ids/values (params.k each, values
// descending, equal values in ascending id order) and returns the row's log-sum-exp.
float select_top_k(std::span<const float> logits, const TopKParams& params, std::span<int32_t> ids,
                   std::span<float> values);

}  // namespace cera::ops
