// Measures this machine's memory read bandwidth (GB/s) with `threads` readers over a buffer far
// larger than the caches: the ceiling that batch-1 decode, which reads every weight once per
// token, can approach.
#pragma once

namespace cera::cli {

double measure_read_bandwidth_gbs(int threads);

}  // namespace cera::cli
