#!/usr/bin/env bash
# Installs every system package kiln needs from Debian's archive. Idempotent: when
# everything is already installed it prints nothing and touches nothing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libopenblas-openmp-dev   # BLAS for the CPU backend; the OpenMP build shares our thread pool
  libcli11-dev libfmt-dev nlohmann-json3-dev
  libgtest-dev libbenchmark-dev
  libsqlite3-dev sqlite3   # the run store, and the shell to query it
  bible-kjv                # the demo corpus
  python3-torch python3-numpy   # the PyTorch reference for parity tests and benchmarks
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
