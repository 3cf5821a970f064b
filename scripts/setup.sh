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
  libboost-dev             # Boost.Beast and Boost.Asio (header-only) for the dashboard's server
  chromium                 # the headless browser the dashboard's browser tests drive
  libssl-dev               # SHA-256 of checkpoint files
  libpcre2-dev             # Unicode regex with JIT for GPT-2's pre-tokenisation
  libutf8proc-dev          # Unicode NFC, the normalizer of Qwen's tokenizer.json
  libopenmpi-dev openmpi-bin   # multi-process runs: mpirun and the MPI communicator
  libncurses-dev tmux      # kiln tui, and the terminal its tests drive
  bible-kjv                # the demo corpus
  python3-torch python3-numpy   # the PyTorch reference for parity tests and benchmarks
  python3-jinja2           # the reference renderer for the chat template parity test
  prometheus               # the real scraper of the test that reads a live run's /metrics
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm packages, each folder pinned by its package-lock.json, from the npm registry. node and
# npm come with the machine.
npm_ci() {  # folder, a file that exists once installed
  if [ ! -f "$1/node_modules/$2" ]; then
    command -v npm >/dev/null || { echo "setup: npm is needed for $1" >&2; exit 1; }
    (cd "$1" && npm ci --silent --no-audit --no-fund >/dev/null)
  fi
}
root="$(dirname "$0")/.."
npm_ci "$root/tests/tokenizer" @huggingface/tokenizers/package.json  # the tokenizer tests' reference encoders
npm_ci "$root/webui" uplot/dist/uPlot.iife.min.js          # the dashboard's charts, built into kiln
npm_ci "$root/tests/browser" playwright-core/package.json   # drives chromium in the browser tests
