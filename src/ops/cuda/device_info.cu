#include <cuda_runtime.h>

#include "ops/cuda/device_info.h"

namespace cera::cuda {

Result<std::vector<DeviceInfo>> list_devices() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  // No driver or no device is a normal answer on CPU-only machines.
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) return std::vector<DeviceInfo>{};
  if (err != cudaSuccess) return io_error(std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err));
  std::vector<DeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    devices.push_back({i, prop.name, prop.major, prop.minor, prop.totalGlobalMem, prop.multiProcessorCount});
  }
  return devices;
}

}  // namespace cera::cuda
