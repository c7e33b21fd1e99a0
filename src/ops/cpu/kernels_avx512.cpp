// The avx512 kernel level (flags in CMakeLists.txt); the kernels themselves are in simd_*.inc.
// 4 tokens per register tile: AVX-512 has 32 vector registers, room for 4 rows x 4 tokens of accumulators.
#define CERA_CPU_LEVEL avx512
#define CERA_CPU_LEVEL_NAME "avx512"
#define CERA_TILE_TOKENS 4
#include "ops/cpu/simd_kernels.inc"

namespace cera::ops::cpu {
const KernelTable& avx512_kernels() { return avx512::table(); }
}  // namespace cera::ops::cpu
