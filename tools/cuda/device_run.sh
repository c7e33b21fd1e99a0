#!/usr/bin/env bash
# One device call for the CUDA work: GEMV microbenchmark + SASS check, then scripts/cuda-check.sh,
# then depth-4096 decode with the attention split fill 2/4/8 (A/B in the same run). Binaries are built on the
# development machine and carried in $DEV (bin/: cera, test_ops_cuda, gemv_bench; lib/: libfmt;
# models/: the stories260K files):
#   tools/cuda/device_run.sh [sections for cuda-check]   (DEV default .devg, OUT required)
set -uo pipefail
DEV=${DEV:-.devg}
export LD_LIBRARY_PATH=$DEV/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p "$OUT"
if [ -x "$DEV/bin/gemv_bench" ]; then
  "$DEV/bin/gemv_bench" >"$OUT/gemv_bench.txt" 2>&1
  echo "gemv_bench rc=$?" >>"$OUT/gemv_bench.txt"
  if command -v cuobjdump >/dev/null; then
    cuobjdump -sass "$DEV/bin/gemv_bench" >/tmp/sass.txt 2>&1
    awk '/Function :/{f=$3} /LDG|IDP/{match($0,/(LDG|IDP)[.A-Z0-9_]*/); c[f" "substr($0,RSTART,RLENGTH)]++}
         END{for(k in c) print c[k], k}' /tmp/sass.txt | grep -E "rows_q_kernelILNS_5DTypeE2ELi1ELi1E|rows_q_kernelILNS_5DTypeE8ELi1ELi1E|gemv_q_kernelILNS_5DTypeE2ELi1E|rows_f_kernelILNS_5DTypeE1ELi1E" | sort -k2 >>"$OUT/gemv_bench.txt"
  fi
fi
CERA_BIN=$DEV/bin CERA_LIB=$DEV/lib CERA_MODELS=$DEV/models OUT=$OUT/check scripts/cuda-check.sh ${*:-tests sanitize models bench bench8b} >/dev/null 2>&1
S=/tmp/cera-synth
# Attention split fill (CERA_CUDA_ATTN_FILL: blocks per SM target) at depth 4096.
for spec in llama-1b-q4_0 llama-8b-q4_0; do
  [ -f $S/$spec.gguf ] || continue
  for f in 2 4 8; do
    CERA_CUDA_ATTN_FILL=$f "$DEV/bin/cera" bench -m $S/$spec.gguf --device cuda -p 0 -n 128 -r 3 -d 4096 --no-membw 2>&1 |
      grep -E "^\| tg" | sed "s/^/$spec attn_fill=$f /" >>"$OUT/ab.md"
  done
done
cat "$OUT/check/results.md" "$OUT/check/bench.md" "$OUT/ab.md" 2>/dev/null
grep -E "^#|8b\.|rc=" "$OUT/gemv_bench.txt" | grep "B=1\|^#\|rc=\|LDG\|IDP" | cut -c1-100 | head -80
