// The avx2 kernel level (flags in CMakeLists.txt); the kernels themselves are in simd_*.inc.
// 2 tokens per register tile: AVX2 has 16 vector registers, so 4 rows x 2 tokens of accumulators.
#define CERA_CPU_LEVEL avx2
#define CERA_CPU_LEVEL_NAME "avx2"
#define CERA_TILE_TOKENS 2
#include "ops/cpu/simd_kernels.inc"

namespace cera::ops::cpu {
const KernelTable& avx2_kernels() { return avx2::table(); }
}  // namespace cera::ops::cpu
