#!/usr/bin/env bash
# Builds tools/cuda/gemv_bench on the development machine (the device machine runs it):
#   tools/cuda/build.sh [out_dir]   -> out_dir/gemv_bench and out_dir/gemv_bench.ptxas.txt
# (the compiler's register / spill report for every kernel variant), and out_dir/gemm_q.ptxas.txt.
set -euo pipefail
out=${1:-build-cuda/tools-cuda}
mkdir -p "$out"
nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Xptxas -v -I src \
  tools/cuda/gemv_bench.cu -o "$out/gemv_bench" 2>"$out/gemv_bench.ptxas.txt"
# The prefill GEMM's register / spill report (the kernels themselves are in cera_ops_cuda; the
# timed binary is gemm_bench, built by CMake with -DCERA_CUDA_BENCH=ON).
nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Xptxas -v -I src \
  -c src/ops/cuda/gemm_q.cu -o "$out/gemm_q.o" 2>"$out/gemm_q.ptxas.txt"
