#!/usr/bin/env bash
# Runs the CUDA checks and benchmarks on the GPU machine in one call and writes a results table.
#   scripts/cuda-check.sh [tests] [sanitize] [models] [bench] [eager] [bench8b] [profile] [moe] [parity] [gemv-ab] [chain]
#                         [stream] [graph-gemm]
#   (default: tests sanitize models bench; eager = 1B Q4_0 decode with CUDA graphs off; profile =
#   per-verb device time of 8B and 1B Q4_0 prefill and decode; moe = synthetic lfm2-1.2b and
#   qwen3-30b-a3b Q4_0 (~0.7 and ~17 GB) benchmarked against the 4.3 TB/s roofline; parity = the
#   whole-model parity tests of every fixture on CUDA, CERA_TEST_DEVICE=cuda; gemv-ab = decode of the
#   four benchmark shapes with the streaming GEMV never / where it pays / everywhere; chain = the
#   8B Q4_0 layer GEMVs as one persistent launch against the product's chain, tools/cuda/gemv_chain_bench;
#   stream = gemm_rows_stream's checks and decode A/B; graph-gemm = the prompt path recorded into graphs
#   up to 256 rows, checks and the 256-row decode A/B)
# Environment:
#   CERA_BIN     folder with the `cera`, `test_ops_cuda` and `test_model` binaries (default build-cuda paths)
#   CERA_LIB     extra shared-library folder (libfmt.so.9 when the binaries were built elsewhere)
#   CERA_MODELS  folder with stories260K.bin, tok512.bin, stories260K.greedy-256.txt and
#                optionally SmolLM2-135M-Instruct.Q4_1.gguf (default ../shared/models)
#   OUT          where logs and results.md go (default /tmp/cuda-check)
#   SYNTH_DIR    where the synthetic benchmark models are written (default /tmp/cera-synth)
set -uo pipefail
OUT=${OUT:-/tmp/cuda-check}
SYNTH_DIR=${SYNTH_DIR:-/tmp/cera-synth}
MODELS=${CERA_MODELS:-../shared/models}
CERA=${CERA_BIN:+$CERA_BIN/cera}
CERA=${CERA:-build-cuda/apps/cli/cera}
TESTS=${CERA_BIN:+$CERA_BIN/test_ops_cuda}
TESTS=${TESTS:-build-cuda/src/ops/cuda/test_ops_cuda}
MODEL_TESTS=${CERA_BIN:+$CERA_BIN/test_model}
MODEL_TESTS=${MODEL_TESTS:-build-cuda/tests/test_model}
export LD_LIBRARY_PATH=${CERA_LIB:+$CERA_LIB:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p "$OUT" "$SYNTH_DIR"
RESULTS=$OUT/results.md
sections=${*:-tests sanitize models bench}

row() { echo "| $1 | $2 | $3 |" | tee -a "$RESULTS"; }
# run NAME LOG CMD...: runs CMD with output in $OUT/LOG, records pass/fail and seconds.
run() {
  local name=$1 log=$2; shift 2
  local t0=$(date +%s%N)
  "$@" >"$OUT/$log" 2>&1
  local rc=$?
  local ms=$((($(date +%s%N) - t0) / 1000000))
  row "$name" "$([ $rc -eq 0 ] && echo PASS || echo "FAIL rc=$rc")" "$((ms / 1000)).$((ms % 1000 / 100)) s"
  return $rc
}

echo "# cuda-check $(date -u +%FT%TZ)" >"$RESULTS"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$RESULTS"
echo "| check | result | time |" >>"$RESULTS"
echo "| --- | --- | --- |" >>"$RESULTS"

for s in $sections; do
  case $s in
  tests)
    run "test_ops_cuda (full sweep)" tests.log "$TESTS" --gtest_brief=1
    tail -3 "$OUT/tests.log"
    # The off-by-default kernel variants on the quick sweep (every type, tile tails and batch
    # sizes, fewer widths): at full size the three passes took ~10 minutes (v10), and the tests
    # and sanitize sections must fit one 10-minute device call.
    CERA_CUDA_TEST_QUICK=1 CERA_CUDA_GEMM=mma run "test_ops_cuda matmul with the gemm_q prefill GEMM (quick sweep)" \
      tests-mma.log "$TESTS" --gtest_filter='CudaMatmul*:GemmQ*' --gtest_brief=1
    tail -3 "$OUT/tests-mma.log"
    CERA_CUDA_TEST_QUICK=1 CERA_CUDA_GEMM=mma CERA_CUDA_GEMM_Q=wgmma \
      run "test_ops_cuda matmul with the gemm_q wgmma variant (quick sweep)" \
      tests-wgmma.log "$TESTS" --gtest_filter='CudaMatmul*:GemmQ*' --gtest_brief=1
    tail -3 "$OUT/tests-wgmma.log"
    # The streaming GEMV on every launch it can take (by default only where it is faster), and
    # gemm_rows off (CERA_CUDA_ROWS_MIN=257): the GEMV for 2-16 rows and the prompt path above,
    # as before gemm_rows took serving batches (gemm_rows.h).
    CERA_CUDA_TEST_QUICK=1 CERA_CUDA_GEMV_STREAM=all CERA_CUDA_FUSE_GATED=1 CERA_CUDA_ROWS_MIN=257 \
      run "test_ops_cuda matmul and graphs with the streaming GEMV everywhere, gemm_rows off (quick sweep)" \
      tests-stream.log "$TESTS" --gtest_filter='CudaMatmul*:CudaGraph*' --gtest_brief=1
    tail -3 "$OUT/tests-stream.log"
    # gemm_rows_direct takes Q4_0 up to 64 rows by default (gemm_rows.h); with it off, gemm_rows'
    # own Q4_0 path on the full serving-rows sweep and the graph tests, and memcheck of both.
    CERA_CUDA_ROWS_DIRECT_MAX=0 \
      run "test_ops_cuda serving rows and graphs with gemm_rows_direct off" \
      tests-direct-off.log "$TESTS" --gtest_filter='CudaMatmul*:CudaGraph*' --gtest_brief=1
    tail -3 "$OUT/tests-direct-off.log"
    # gemm_rows_direct's register kernel (the ring kernel is the default: gemm_rows.h).
    CERA_CUDA_TEST_QUICK=1 CERA_CUDA_ROWS_DIRECT_RING=0 \
      run "test_ops_cuda serving rows and graphs with gemm_rows_direct's register kernel (quick sweep)" \
      tests-direct-register.log "$TESTS" --gtest_filter='CudaMatmul*:CudaGraph*' --gtest_brief=1
    tail -3 "$OUT/tests-direct-register.log"
    CERA_CUDA_TEST_QUICK=1 run "memcheck of the serving kernels (gemm_rows_direct on, quick sweep)" \
      memcheck-direct.log timeout 240 compute-sanitizer --tool memcheck --error-exitcode 3 "$TESTS" \
      --gtest_filter='CudaMatmul.ServingRows*:CudaGraph*' --gtest_brief=1
    grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck-direct.log" | tail -3
    # Batch-invariant mode: every matmul through gemm_rows, single rows and prompts in chunks too.
    CERA_CUDA_TEST_QUICK=1 CERA_CUDA_BATCH_INVARIANT=1 \
      run "test_ops_cuda matmul with CERA_CUDA_BATCH_INVARIANT=1 (quick sweep)" \
      tests-invariant.log "$TESTS" --gtest_filter='CudaMatmul*' --gtest_brief=1
    tail -3 "$OUT/tests-invariant.log"
    ;;
  sanitize)
    CERA_CUDA_TEST_QUICK=1 run "compute-sanitizer memcheck (quick sweep)" memcheck.log \
      timeout 240 compute-sanitizer --tool memcheck --error-exitcode 3 "$TESTS" --gtest_brief=1
    grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -3
    CERA_CUDA_TEST_QUICK=1 CERA_CUDA_GEMV_STREAM=all CERA_CUDA_FUSE_GATED=1 \
      run "compute-sanitizer memcheck, streaming GEMV everywhere" \
      memcheck-stream.log timeout 240 compute-sanitizer --tool memcheck --error-exitcode 3 "$TESTS" \
      --gtest_filter='CudaMatmul*:CudaGraph*' --gtest_brief=1
    grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck-stream.log" | tail -3
    ;;
  models)
    "$CERA" convert --llama2c "$MODELS/stories260K.bin" --tokenizer "$MODELS/tok512.bin" \
      -o "$SYNTH_DIR/stories260K.gguf" >"$OUT/convert.log" 2>&1
    # The reference is llama2.c's float32 run: F32 K/V on both backends (CUDA's default is F16).
    for dev in cuda cpu; do
      "$CERA" run -m "$SYNTH_DIR/stories260K.gguf" --device $dev --kv-type f32 -p "" -n 256 --temp 0 \
        >"$OUT/stories-$dev.txt" 2>"$OUT/stories-$dev.err"
    done
    run "stories260K greedy 256, cuda == reference" stories-cmp.log \
      cmp "$OUT/stories-cuda.txt" "$MODELS/stories260K.greedy-256.txt"
    run "stories260K greedy 256, cpu == reference" stories-cmp-cpu.log \
      cmp "$OUT/stories-cpu.txt" "$MODELS/stories260K.greedy-256.txt"
    "$CERA" run -m "$SYNTH_DIR/stories260K.gguf" --device cuda -p "" -n 256 --temp 0 >"$OUT/stories-cuda-default.txt" 2>/dev/null
    run "stories260K greedy 256, cuda with its default (F16) K/V == reference" stories-cmp-f16.log \
      cmp "$OUT/stories-cuda-default.txt" "$MODELS/stories260K.greedy-256.txt"
    smol=$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf
    if [ -f "$smol" ]; then
      q="The capital of France is"
      # 64 greedy tokens (past end-of-generation) on each backend with the same KV cache type:
      # F32 (the parity setting; the CPU's default) and F16 (CUDA's default). Activations: one
      # 8-bit term in the CUDA GEMV, two on the CPU by default; then with the CPU rounding
      # activations like the GEMV (reported: near ties may go either way).
      for kv in f32 f16; do
        for dev in cuda cpu; do
          "$CERA" run -m "$smol" --device $dev --kv-type $kv -p "$q" -n 64 --temp 0 --ignore-eos \
            >"$OUT/smol-$dev-$kv.txt" 2>"$OUT/smol-$dev-$kv.err"
        done
        run "SmolLM2 Q4_1 greedy 64 (ignore eos), kv $kv, cuda == cpu" smol-cmp-$kv.log \
          cmp "$OUT/smol-cuda-$kv.txt" "$OUT/smol-cpu-$kv.txt"
      done
      "$CERA" run -m "$smol" --device cpu --kv-type f32 --cpu-activations int8 -p "$q" -n 64 --temp 0 --ignore-eos \
        >"$OUT/smol-cpu-int8.txt" 2>"$OUT/smol-cpu-int8.err"
      run "SmolLM2 Q4_1 greedy 64, kv f32, cuda == cpu with int8 activations" smol-cmp-int8.log \
        cmp "$OUT/smol-cuda-f32.txt" "$OUT/smol-cpu-int8.txt"
      head -c 400 "$OUT/smol-cuda-f16.txt" "$OUT/smol-cpu-f32.txt" "$OUT/smol-cpu-int8.txt"
      # A long prompt goes through the prefill (f16 tensor-core) paths as one chunk.
      prompt=$(printf 'Once upon a time, in a small village by the sea, there lived an old fisherman. %.0s' {1..8})
      for kv in f32 f16; do
        for dev in cuda cpu; do
          "$CERA" run -m "$smol" --device $dev --kv-type $kv -p "$prompt" -n 32 --temp 0 --ignore-eos \
            >"$OUT/smol-long-$dev-$kv.txt" 2>"$OUT/smol-long-$dev-$kv.err"
        done
        run "SmolLM2 Q4_1 long prompt + 32, kv $kv, cuda == cpu" smol-long-cmp-$kv.log \
          cmp "$OUT/smol-long-cuda-$kv.txt" "$OUT/smol-long-cpu-$kv.txt"
      done
      grep -h "tokens/s" "$OUT/smol-cuda-f16.err" "$OUT/smol-cpu-f32.err" | tee -a "$OUT/speeds.txt"
    fi
    ;;
  eager)
    f=$SYNTH_DIR/llama-1b-q4_0.gguf
    [ -f "$f" ] || run "synth llama-1b q4_0" synth-eager.log "$CERA" synth --shape llama-1b --type q4_0 -o "$f"
    CERA_CUDA_GRAPHS=0 run "bench llama-1b q4_0 eager (no graphs)" bench-eager.log \
      "$CERA" bench -m "$f" --device cuda -p 0 -n 128 -r 3 --no-membw
    grep -E "^\| tg" "$OUT/bench-eager.log" | sed "s/^/llama-1b q4_0 eager /" | tee -a "$OUT/bench.md"
    ;;
  profile)
    # Per-verb device time (eager, CERA_CUDA_PROFILE=1): prefill 512 and 16 decode steps.
    for spec in llama-8b:q4_0 llama-1b:q4_0; do
      shape=${spec%%:*} type=${spec##*:} f=$SYNTH_DIR/$shape-$type.gguf
      [ -f "$f" ] || run "synth $shape $type" "synth-$shape-$type.log" "$CERA" synth --shape $shape --type $type -o "$f"
      CERA_CUDA_PROFILE=1 run "profile $shape $type" "profile-$shape-$type.log" \
        "$CERA" bench -m "$f" --device cuda -p 512 -n 16 -r 1 --no-membw
      grep -A40 "cuda verb profile" "$OUT/profile-$shape-$type.log" | head -30 | sed "s/^/$shape $type /" >>"$OUT/bench.md"
    done
    ;;
  moe)
    # Decode share of the roofline counts the bytes a token reads: for qwen3-30b-a3b 8 of 128 experts.
    for shape in lfm2-1.2b qwen3-30b-a3b; do
      f=$SYNTH_DIR/$shape-q4_0.gguf
      [ -f "$f" ] || run "synth $shape q4_0" "synth-$shape-q4_0.log" "$CERA" synth --shape $shape --type q4_0 -o "$f"
      CERA_CUDA_GRAPH_STATS=1 run "bench $shape q4_0" "bench-$shape-q4_0.log" \
        "$CERA" bench -m "$f" --device cuda -p 512 -n 128 -r 3 --roofline-gbs 4300
      grep -E "^\| (pp|tg)|reads" "$OUT/bench-$shape-q4_0.log" | sed "s/^/$shape q4_0 /" | tee -a "$OUT/bench.md"
    done
    ;;
  parity)
    # The fixtures are read from the source tree: this folder (the repository root), not the build's path.
    CERA_TEST_DEVICE=cuda CERA_SOURCE_DIR=$PWD run "parity + lfm2 state tests on cuda (every fixture)" parity.log \
      "$MODEL_TESTS" --gtest_filter='Architectures/Parity.*:Gemma3/SlidingWindowParity.*:Lfm2Family/RecurrentState.*:RecurrentStateShift.*' \
      --gtest_brief=1
    grep -E "^parity|FAILED|Failure" "$OUT/parity.log" >"$OUT/parity.md"
    tail -3 "$OUT/parity.log"
    ;;
  chain)
    # A step's GEMVs as one persistent launch against the product's chain (docs/benchmarks/cuda.md
    # v8); needs the microbenchmarks (-DCERA_CUDA_BENCH=ON).
    chain_bench=${CERA_BIN:+$CERA_BIN/gemv_chain_bench}
    chain_bench=${chain_bench:-build-cuda/src/ops/cuda/gemv_chain_bench}
    for bps in 1 2; do
      log=chain-$bps.log
      run "persistent GEMV chain bench (8B Q4_0 shapes, 32 layers, $bps block(s) an SM)" $log \
        timeout 120 "$chain_bench" --check --blocks-per-sm $bps
      grep -E "^\||check|device" "$OUT/$log" | tee -a "$OUT/bench.md"
    done
    ;;
  gemv-ab)
    # Decode with the streaming GEMV never / where it pays (default) / everywhere, one machine for all.
    for spec in llama-8b:q4_0 llama-1b:q4_0 llama-8b:q8_0 llama-1b:f16; do
      shape=${spec%%:*} type=${spec##*:} f=$SYNTH_DIR/$shape-$type.gguf
      [ -f "$f" ] || run "synth $shape $type" "synth-$shape-$type.log" "$CERA" synth --shape $shape --type $type -o "$f"
      for mode in "0 96" "where-faster 96" "all 96"; do
        set -- $mode
        log=gemv-ab-$shape-$type-$1-$2.log
        CERA_CUDA_GEMV_STREAM=$1 CERA_CUDA_GEMV_RING_KB=$2 run "decode $shape $type, stream $1, ring $2" $log \
          "$CERA" bench -m "$f" --device cuda -p 0 -n 128 -r 3 --no-membw
        grep -E "^\| tg" "$OUT/$log" | sed "s/^/$shape $type stream=$1 ring=$2 /" | tee -a "$OUT/bench.md"
      done
    done
    ;;
  stream)
    # gemm_rows_stream (off by default until this section has run: gemm_rows.h): the serving-rows
    # sweeps with it on (one and two blocks an SM, several token tiles up to 256 rows), memcheck,
    # the kernel beside the direct kernels (gemm_bench) and 8B / 1B Q4_0 decode at 16 and 64 rows
    # with it on and off (cera bench --concurrency, one run of each in this call).
    CERA_CUDA_ROWS_STREAM=1 run "test_ops_cuda serving rows with gemm_rows_stream" tests-stream-rows.log \
      "$TESTS" --gtest_filter='CudaMatmul.StreamRows*:CudaMatmul.Serving*:CudaGraph*' --gtest_brief=1
    CERA_CUDA_TEST_QUICK=1 CERA_CUDA_ROWS_STREAM=2 CERA_CUDA_ROWS_STREAM_MAX=256 \
      run "test_ops_cuda serving rows with gemm_rows_stream, 2 blocks an SM, up to 256 rows (quick sweep)" \
      tests-stream-rows2.log "$TESTS" --gtest_filter='CudaMatmul.StreamRows*:CudaGraph*' --gtest_brief=1
    CERA_CUDA_TEST_QUICK=1 CERA_CUDA_ROWS_STREAM=1 CERA_CUDA_ROWS_STREAM_MAX=256 \
      run "compute-sanitizer memcheck: gemm_rows_stream (quick sweep)" memcheck-stream.log \
      compute-sanitizer --tool memcheck --error-exitcode 9 "$TESTS" --gtest_filter='CudaMatmul.StreamRows*' --gtest_brief=1
    GEMM_BENCH=${CERA_BIN:+$CERA_BIN/gemm_bench}
    if [ -x "${GEMM_BENCH:-}" ]; then
      for v in 0 1 2; do
        CERA_CUDA_ROWS_STREAM=$v "$GEMM_BENCH" --serving --types q4_0 --tokens 8,16,32,64 --reps 30 2>&1 |
          grep "^| q4_0" | sed "s/^/stream=$v /" | tee -a "$OUT/bench.md"
      done
    fi
    for shape in llama-8b llama-1b; do
      f=$SYNTH_DIR/$shape-q4_0.gguf
      [ -f "$f" ] || run "synth $shape q4_0" "synth-$shape-q4_0.log" "$CERA" synth --shape $shape --type q4_0 -o "$f"
      for n in 16 64; do
        for v in 0 1 2; do
          CERA_CUDA_ROWS_STREAM=$v run "bench $shape q4_0 --concurrency $n stream=$v" "bench-$shape-c$n-s$v.log" \
            "$CERA" bench -m "$f" --device cuda -c 512 -b 2048 --concurrency $n --prompt 128 --gen 128 -r 1 \
            --roofline-gbs 4300 --roofline-tflops 790
          grep -iE "decode" "$OUT/bench-$shape-c$n-s$v.log" | sed "s/^/$shape q4_0 c$n stream=$v /" | tee -a "$OUT/bench.md"
        done
      done
    done
    ;;
  graph-gemm)
    # The prompt path recorded into graphs up to 256 rows (CERA_CUDA_GRAPH_GEMM_ROWS, on by default
    # since session 36: cuda_ops.h): the graph tests with it forced on 17-256 rows (gemm_rows capped
    # at 16), and 8B Q4_0 decode at 256 rows with it and without.
    CERA_CUDA_GRAPH_GEMM_ROWS=256 CERA_CUDA_ROWS_MAX=16 run "test_ops_cuda graphs with the prompt path recorded" \
      tests-graph-gemm.log "$TESTS" --gtest_filter='CudaGraph*:CudaMatmul.Serving*' --gtest_brief=1
    f=$SYNTH_DIR/llama-8b-q4_0.gguf
    [ -f "$f" ] || run "synth llama-8b q4_0" "synth-llama-8b-q4_0.log" "$CERA" synth --shape llama-8b --type q4_0 -o "$f"
    for v in 0 256; do
      CERA_CUDA_GRAPH_GEMM_ROWS=$v run "bench llama-8b q4_0 --concurrency 256 graph-gemm=$v" "bench-8b-c256-g$v.log" \
        "$CERA" bench -m "$f" --device cuda -c 512 -b 2048 --concurrency 256 --prompt 128 --gen 128 -r 1 \
        --roofline-gbs 4300 --roofline-tflops 790
      grep -iE "decode" "$OUT/bench-8b-c256-g$v.log" | sed "s/^/llama-8b q4_0 c256 graph-gemm=$v /" | tee -a "$OUT/bench.md"
    done
    ;;
  bench | bench8b)
    if [ $s = bench ]; then specs="llama-1b:q4_0 llama-1b:f16"; else specs="llama-8b:q4_0 llama-8b:q8_0"; fi
    for spec in $specs; do
      shape=${spec%%:*} type=${spec##*:} f=$SYNTH_DIR/$shape-$type.gguf
      [ -f "$f" ] || run "synth $shape $type" "synth-$shape-$type.log" "$CERA" synth --shape $shape --type $type -o "$f"
      CERA_CUDA_GRAPH_STATS=1 run "bench $shape $type" "bench-$shape-$type.log" "$CERA" bench -m "$f" --device cuda -p 512 -n 128 -r 3 --no-membw
      grep -E "^\| (pp|tg)" "$OUT/bench-$shape-$type.log" | sed "s/^/$shape $type /" | tee -a "$OUT/bench.md"
      if [ "$spec" = llama-8b:q4_0 ] || [ "$spec" = llama-1b:q4_0 ]; then
        run "bench $shape $type depth 4096" "bench-$shape-$type-d4096.log" \
          "$CERA" bench -m "$f" --device cuda -p 0 -n 128 -r 3 -d 4096 --no-membw
        grep -E "^\| tg" "$OUT/bench-$shape-$type-d4096.log" | sed "s/^/$shape $type /" | tee -a "$OUT/bench.md"
      fi
    done
    ;;
  esac
done
# The device tool returns at most 8 files: keep results.md, bench.md and parity.md, pack every log.
(cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=results.md --exclude=bench.md --exclude=parity.md -- * \
  2>/dev/null && find . -maxdepth 1 -type f ! -name logs.tgz ! -name results.md ! -name bench.md ! -name parity.md -delete)
echo
cat "$RESULTS"
[ -f "$OUT/bench.md" ] && cat "$OUT/bench.md"
[ -f "$OUT/parity.md" ] && cat "$OUT/parity.md"
exit 0
