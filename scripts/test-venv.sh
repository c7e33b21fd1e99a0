#!/usr/bin/env bash
# Makes the Python virtual environment the tests/server/ suite runs in, at
# ${CERA_CACHE_DIR:-~/.cache/cera}/test-venv, and prints its python's path on stdout (progress
# goes to stderr). It is made once: the venv keeps the SHA-256 of tests/server/requirements.txt
# it was made from, and a changed file (or a venv whose python no longer runs) makes it again from
# scratch rather than patching it. Never runs `playwright install`: the tests use Debian's chromium.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
requirements=$root/tests/server/requirements.txt
cache=${CERA_CACHE_DIR:-$HOME/.cache/cera}
venv=$cache/test-venv
stamp=$venv/cera-requirements.sha256

want=$(sha256sum <"$requirements" | cut -d' ' -f1)
mkdir -p "$cache"
# One maker at a time (two `make test`s at once, say); the second finds the first's venv.
exec 9>"$cache/test-venv.lock"
flock 9

if [[ -f $stamp && $(<"$stamp") == "$want" ]] && "$venv/bin/python" -c '' 2>/dev/null; then
  echo "$venv/bin/python"
  exit 0
fi

echo "test-venv: making $venv from tests/server/requirements.txt" >&2
rm -rf "$venv"
python3 -m venv "$venv" >&2  # Debian: needs python3-venv (scripts/install-deps.sh)
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements" >&2
# Written last, so a venv whose install failed halfway is made again next time.
echo "$want" >"$stamp"
echo "test-venv: ready" >&2
echo "$venv/bin/python"
