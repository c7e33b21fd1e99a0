#!/usr/bin/env bash
# Installs what building and testing cera needs on Debian 12, and nothing when it is all there.
# Safe to run repeatedly; `make test` and `make run` call it first. `install-deps.sh run` installs
# only what building the cera command needs, so `make run` on a fresh machine fetches no browser.
set -euo pipefail

packages=(build-essential cmake ninja-build ccache git python3 python3-pip
          libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libfmt-dev
          libcpp-httplib-dev clang libclang-rt-14-dev)
# The tests/server/ suite: its Python venv (scripts/test-venv.sh) and the browser its web UI
# tests drive headless (CMake's CERA_CHROMIUM).
# python3-dev: the headers `pip install .` builds the Python module against (tests/python).
test_packages=(python3-venv python3-dev chromium)
case ${1:-all} in
  run) ;;
  all) packages+=("${test_packages[@]}") ;;
  *) echo "usage: install-deps.sh [run]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}"
fi
