// Whether greedy decode queues the next step before reading the current token back: step N+1
// reads token N's id on the device (ForwardBatch::token_ids) while the host still waits for it.
// It pays where the device runs while the host records the next step (a backend with a stream).
#pragma once

#include <cstdint>

namespace cera::runtime {

enum class DecodePipeline : uint8_t {
  kAuto,  // on when the backend overlaps the host (Backend::overlaps_host: CUDA)
  kOn,    // always (on the CPU every step still completes at once; the bookkeeping is the same)
  kOff,
};

}  // namespace cera::runtime
