#!/usr/bin/env bash
# The compiler's register / spill reports of the GEMV variants and the prefill GEMM, on the
# development machine: tools/cuda/build.sh [out_dir] -> out_dir/gemv_bench.ptxas.txt and
# out_dir/gemm_q.ptxas.txt. The benchmark binaries themselves come from CMake
# (-DCERA_CUDA_BENCH=ON: targets gemv_bench and gemm_bench); the device machine runs them.
set -euo pipefail
out=${1:-build-cuda/tools-cuda}
mkdir -p "$out"
nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Xptxas -v -I src \
  -c tools/cuda/gemv_bench.cu -o "$out/gemv_bench.o" 2>"$out/gemv_bench.ptxas.txt"
nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Xptxas -v -I src \
  -c src/ops/cuda/gemm_q.cu -o "$out/gemm_q.o" 2>"$out/gemm_q.ptxas.txt"
