// Scale searches of the K-quant quantizers: pick each sub-block's scale (and min) by trying a
// small grid of candidate scales, rounding to codes, and solving the weighted least-squares fit
// for those codes in closed form; the best fit by weighted squared error wins. This is the
// algorithm of llama.cpp's reference quantizers (make_qkx2_quants / make_qx_quants), rewritten.
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace cera::quant::detail {

// Candidate inverse scales (nmax + rmin + rdelta*k) / (max - min), k = 0..nstep.
struct ScaleGrid {
  float rmin;
  float rdelta;
  int nstep;
};

struct AffineFit {
  float scale;    // >= 0
  float neg_min;  // >= 0; x ~= scale * code - neg_min
};

// Fits x[i] ~= scale * codes[i] - neg_min with codes in [0, nmax] and min <= 0 (the range always
// includes 0), minimising sum weights[i] * err^2. Writes the n codes of the best fit.
AffineFit fit_affine_codes(const float* x, const float* weights, int n, int nmax, ScaleGrid grid,
                           uint8_t* codes);

// Fits x[i] ~= scale * (codes[i] - nmax) with codes in [0, 2*nmax - 1], weights x[i]^2 (so large
// magnitudes, which dominate dot products, are kept precise). Returns the signed scale: the
// largest-magnitude element maps to code 0. An all-(near-)zero group gives scale 0, codes 0.
float fit_symmetric_codes(const float* x, int n, int nmax, uint8_t* codes);

// One Q4_K / Q5_K super-block before bit packing.
struct AffineSuperBlock {
  uint16_t d;                     // fp16 scale of the 6-bit scales
  uint16_t dmin;                  // fp16 scale of the 6-bit mins
  uint8_t scales[kScaleBytesK4];  // packed as scale_pack.h
  uint8_t codes[kQK256];          // [256] element order, 0..nmax
};

// Q4_K (nmax 15) / Q5_K (nmax 31): per 32-element sub-block an affine fit with weights
// rms(sub-block) + |x| (large elements matter more, yet no element is ignored), then the eight
// scales and mins are themselves quantized to 6 bits and the codes re-rounded against the
// scales actually stored.
void quantize_affine_superblock(const float* x, int nmax, ScaleGrid grid, AffineSuperBlock& out);

}  // namespace cera::quant::detail
