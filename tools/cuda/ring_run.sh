#!/usr/bin/env bash
# A/B of gemm_rows_direct's ring variant (src/ops/cuda/gemm_rows_direct_ring.cu) on the H200.
# Run from a folder holding bin/test_ops_cuda and bin/gemm_bench:
#   tools/cuda/ring_run.sh [bench] [tests] [sanitize]     (default: all three)
# Each step runs under `timeout` (bench 4 x 120 s, tests 300 + 2 x 120 s, sanitize 3 x 180 s at
# most); to stay inside 10-minute device calls, run `./ring_run.sh bench tests`, then
# `./ring_run.sh sanitize`.
# CERA_CUDA_ROWS_DIRECT_RING: 0/unset = register kernel, 1 or 4 = RING=4 (3 blocks/SM),
# 8 = RING=8 (2 blocks/SM), 3 = RING=3 (4 blocks/SM up to 16 tokens; RING=4 above).
# Logs under $OUT (default ./ring-out); the summary is $OUT/summary.txt.
set -uo pipefail
OUT=${OUT:-./ring-out}
mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin
export LD_LIBRARY_PATH=${CERA_LIB:+$CERA_LIB:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
SUM=$OUT/summary.txt
sections=${*:-bench tests sanitize}
: >"$SUM"
# step NAME LOG SECONDS CMD...: runs CMD under `timeout`, output in $OUT/LOG, one summary line.
step() {
  local name=$1 log=$2 secs=$3; shift 3
  local t0=$(date +%s)
  timeout --kill-after=10 "$secs" "$@" >"$OUT/$log" 2>&1
  local rc=$?
  local verdict=PASS
  [ $rc -eq 124 ] && verdict="TIMEOUT (${secs} s)"
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && verdict="FAIL rc=$rc"
  echo "$name: $verdict, $(($(date +%s) - t0)) s (log $OUT/$log)" | tee -a "$SUM"
  tail -4 "$OUT/$log"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$SUM"
for s in $sections; do
  case $s in
  tests)
    CERA_CUDA_ROWS_DIRECT_RING=1 step "tests RING=1 (=4), full sweep" tests-ring4.log 300 \
      bin/test_ops_cuda --gtest_filter='CudaMatmul.ServingRows*:CudaGraph*' --gtest_brief=1
    for r in 8 3; do
      CERA_CUDA_TEST_QUICK=1 CERA_CUDA_ROWS_DIRECT_RING=$r step "tests RING=$r, quick sweep" tests-ring$r.log 120 \
        bin/test_ops_cuda --gtest_filter='CudaMatmul.ServingRows*:CudaGraph*' --gtest_brief=1
    done
    ;;
  sanitize)
    for r in 1 8 3; do
      CERA_CUDA_TEST_QUICK=1 CERA_CUDA_ROWS_DIRECT_RING=$r step "memcheck RING=$r, ServingRows, quick sweep" \
        memcheck-ring$r.log 180 compute-sanitizer --tool memcheck --error-exitcode 1 \
        bin/test_ops_cuda --gtest_filter='CudaMatmul.ServingRows*' --gtest_brief=1
    done
    ;;
  bench)
    for r in 0 1 8 3; do
      CERA_CUDA_ROWS_DIRECT_RING=$r step "gemm_bench RING=$r" bench-ring$r.log 120 \
        bin/gemm_bench --serving --types q4_0 --tokens 2,4,8,16,32,64 --reps 50
      grep '^| q4_0' "$OUT/bench-ring$r.log" | sed "s/^/RING=$r /" >>"$SUM"
    done
    ;;
  *) echo "unknown section $s (tests, sanitize, bench)"; exit 2 ;;
  esac
done
echo "--- $SUM"; cat "$SUM"
