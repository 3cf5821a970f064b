#!/usr/bin/env bash
# The demo: build the kiln binary alone (the CUDA backend only where a GPU is visible, or with
# KILN_CUDA=ON), quietly, its compiler output in BUILD_DIR/demo-build.log; prepare the King
# James Bible (Debian's bible-kjv) with a BPE tokenizer learned from it on first use; then
# train the tiny model on it with the embedded defaults and print a sample, serving the
# dashboard while it trains (its URL is printed first; KILN_DEMO_LISTEN picks another address
# than 127.0.0.1:8080). Extra arguments go to `kiln train` (e.g. --set train.steps=200).
set -euo pipefail
cd "$(dirname "$0")/.."

build="${BUILD_DIR:-build}"
jobs="${JOBS:-$(nproc)}"
cuda="${KILN_CUDA:-}"
if [ -z "$cuda" ]; then
  if nvidia-smi -L >/dev/null 2>&1; then cuda=ON; else cuda=OFF; fi
fi
log="$build/demo-build.log"
mkdir -p "$build"
echo "demo: building kiln (CUDA backend ${cuda}, $jobs jobs; the compiler's output goes to $log)"
start=$(date +%s)
if ! { cmake -S . -B "$build" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA="$cuda" &&
       cmake --build "$build" --target kiln -j "$jobs"; } >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "demo: the build failed; its whole output is in $log" >&2
  exit 1
fi
echo "demo: built $build/kiln in $(( $(date +%s) - start )) s"

scripts/prepare-kjv.sh
exec "$build/kiln" train --serve "${KILN_DEMO_LISTEN:-127.0.0.1:8080}" "$@"
