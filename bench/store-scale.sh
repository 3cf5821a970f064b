#!/bin/bash
# The store and the dashboard at cluster scale (bench/README.md): builds kiln and the
# benchmark, then runs it with the arguments given (see bench/store_scale_benchmark.cpp), its
# output also written to bench/results/<UTC time>-store-scale.txt with the machine, the
# commit and the command.
#
#   bench/store-scale.sh [--scale F] [--stores abcde] [--requests N] [--dir DIR] [--keep]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# A build folder configured already keeps its generator (make build's, or another).
[ -f "$BUILD_DIR/CMakeCache.txt" ] || cmake -S . -B "$BUILD_DIR" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target kiln kiln_bench_store_scale >/dev/null
out="bench/results/$(date -u +%Y-%m-%dT%H%MZ)-store-scale.txt"
{
  echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(uname -sr)"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
  echo "command: bench/store-scale.sh $*"
  "$BUILD_DIR/kiln_bench_store_scale" "$@"
} | tee "$out"
echo "raw output: $out"
