#!/usr/bin/env bash
# The README's C example, exactly as written there (its first ```c block), compiled as C99 with
# warnings as errors against include/ and libcera.so, then run on SmolLM2: it must exit 0 and
# answer with Paris (the model's greedy reply to its question; tests/api/c/stream_reply.c checks
# the same). Exit 77 (skipped) when the model is not installed (`make models`).
# Usage: readme_c_example.sh SOURCE_DIR LIBCERA_SO C_COMPILER
set -euo pipefail
src=$1 lib=$2 cc=$3
cache=${CERA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cera}
model=$cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
if [[ ! -f $model ]]; then
  echo "skipped: $model is missing (run \`make models\`)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
awk '/^```c$/ {on = 1; next} on && /^```$/ {exit} on {print}' "$src/README.md" >"$work/hello.c"
if [[ ! -s $work/hello.c ]]; then
  echo "README.md has no \`\`\`c block" >&2
  exit 1
fi
"$cc" -std=c99 -Wall -Wextra -Wpedantic -Werror -I"$src/include" "$work/hello.c" -L"$(dirname "$lib")" -lcera \
  -Wl,-rpath,"$(dirname "$lib")" -o "$work/hello"
"$work/hello" "$model" | tee "$work/out.txt"
grep -q "Paris" "$work/out.txt" || { echo "the reply does not name Paris" >&2; exit 1; }
grep -Eq '^\([0-9]+ tokens\)$' "$work/out.txt" || { echo "no token count line" >&2; exit 1; }
