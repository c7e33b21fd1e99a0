// The CUDA backend (Hopper, sm_90a): one device, one stream, float32 activations and KV cache,
// weights uploaded once by import_weight into a GPU layout (see weight_layout.h). Plain C++ header
// so that src/api can create the backend without including CUDA headers.
#pragma once

#include <memory>

#include "ops/backend.h"

namespace cera::ops {

struct CudaBackendOptions {
  int device = 0;  // CUDA device index
  // Run logged verbs as CUDA graphs (graph.h); the environment variable CERA_CUDA_GRAPHS=0 also
  // turns them off (every verb then launches eagerly).
  bool graphs = true;
};

// The backend on options.device, or a Status naming why not (no driver, no device, bad index).
Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaBackendOptions& options = {});

}  // namespace cera::ops
