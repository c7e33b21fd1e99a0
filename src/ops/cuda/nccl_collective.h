// Tensor-parallel collectives between CUDA devices of one host through NCCL (the CUDA toolkit's
// collective library): one communicator per rank from ncclCommInitAll, every operation queued on
// the rank's backend like its verbs (graph.h post_call), so that it runs in order on the backend's
// stream and inside its CUDA graphs. NCCL is loaded when a group is made (dlopen of libnccl.so.2):
// the 200 MB library is needed only by tensor-parallel CUDA runs, not by every cera binary.
#pragma once

#include <memory>
#include <span>

#include "core/status.h"
#include "ops/backend.h"
#include "ops/collective.h"

namespace cera::ops {

// One rank per backend, backends[r] a CUDA backend on devices[r]; the devices must differ (NCCL
// refuses two ranks on one GPU). An error names what is missing: NCCL itself, or a device.
Result<std::unique_ptr<CollectiveGroup>> make_nccl_group(std::span<Backend* const> backends,
                                                         std::span<const int32_t> devices);

}  // namespace cera::ops
