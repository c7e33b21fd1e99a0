// The calling thread's current CUDA device, set before the backend touches its device. Tensor-
// parallel ranks drive several devices from several threads (and the runtime's thread reaches
// every rank's KV cache), while CUDA's current device is per thread; a thread-local cache keeps
// the common case a compare.
#pragma once

namespace cera::ops::cuda {

void bind_device(int device);
// After a library call that may have changed the current device behind bind_device's back
// (ncclCommInitAll sets each device in turn): sets `device` whatever the cache says.
void rebind_device(int device);

}  // namespace cera::ops::cuda
