// CUDA device discovery: the one place the rest of cera asks "is there a GPU?".
// Kept free of CUDA headers so callers outside src/ops/cuda stay plain C++.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace cera::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  unsigned long long total_memory_bytes = 0;
  int multiprocessors = 0;
};

// Every visible device; an empty list (not an error) when the driver reports none.
Result<std::vector<DeviceInfo>> list_devices();

}  // namespace cera::cuda
