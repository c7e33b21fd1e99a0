// pdl_enabled (launch.cuh): read once from the environment.
#include <cstdlib>

#include "ops/cuda/launch.cuh"

namespace cera::ops::cuda {

bool pdl_enabled() {
  static const bool enabled = [] {
    const char* e = std::getenv("CERA_CUDA_PDL");
    return !(e != nullptr && e[0] == '0');
  }();
  return enabled;
}

}  // namespace cera::ops::cuda
