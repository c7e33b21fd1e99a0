#!/usr/bin/env bash
# Builds the Python package as a user does, `pip install .` from the repository root, into a venv
# of its own (build/python-test-venv, made again when tests/python/requirements.txt changes), then
# runs a smoke import and pytest over tests/python (arguments are passed on to pytest). The ctest
# `python` (tests/python/CMakeLists.txt) runs it with CERA_BIN set: the tests convert
# stories260K and all-MiniLM-L6-v2 to GGUF with `cera convert`.
#
# The build: CERA_CUDA=OFF (CI has no GPU; the kernels would take most of the time), Ninja, every
# core, and ccache through the root CMakeLists.txt. scikit-build-core keeps its build folder
# (build/python-<wheel tag>), and --no-build-isolation keeps nanobind at one path, so a second run
# rebuilds only what changed. Here (2 cores): 5 minutes from an empty build folder with a cold
# ccache (the whole script, tests included, 299 s), seconds when nothing changed.
# The build takes the lock the other builds of this checkout take (CERA_BUILD_LOCK, default
# /tmp/cera-build.lock), so two big builds never share the 2 cores: do not run this under it.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
requirements=$root/tests/python/requirements.txt
venv=$root/build/python-test-venv
stamp=$venv/cera-requirements.sha256
lock=${CERA_BUILD_LOCK:-/tmp/cera-build.lock}

want=$(sha256sum <"$requirements" | cut -d' ' -f1)
if ! [[ -f $stamp && $(<"$stamp") == "$want" ]] || ! "$venv/bin/python" -c '' 2>/dev/null; then
  echo "test-python: making $venv" >&2
  rm -rf "$venv"
  mkdir -p "$root/build"
  python3 -m venv "$venv"  # Debian: python3-venv and python3-dev (scripts/install-deps.sh)
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
  echo "$want" >"$stamp"  # last, so a venv whose install failed is made again next time
fi

# The compiler the main build's CMake picks by default (cc/c++), not the one Python's sysconfig
# names (g++), which scikit-build-core would pass on: ccache keys on the compiler's name, and with
# g++ none of the library objects the release build just compiled were reused (CI: 10 hits of 150).
export CC=${CC:-cc} CXX=${CXX:-c++}
export CERA_CUDA=OFF CMAKE_GENERATOR=Ninja CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
start=$SECONDS
(cd "$root" && flock "$lock" "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  --no-build-isolation --no-deps --force-reinstall .)
echo "test-python: pip install . took $((SECONDS - start)) s" >&2

# Outside the source tree, so that the installed package is what gets imported.
outside=$(mktemp -d)
trap 'rm -rf "$outside"' EXIT
cd "$outside"
"$venv/bin/python" -c 'import cera; print("cera", cera.__version__, "from", cera.__file__); cera.Engine'
PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider \
  --rootdir "$root/tests/python" "$root/tests/python" "$@"
