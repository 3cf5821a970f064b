#!/bin/bash
# Runs the CPU benchmarks whose figures bench/README.md and docs/ quote, each writing its raw
# output to bench/results/<date>-cpu-<N>core-<name>.txt under a header that names the machine,
# the date, the commit and the command, so every CPU figure has a file behind it as every GPU
# figure does.
#
#   bench/cpu-figures.sh [NAME ...]     # default: all, in the order below
#
# Names: step ops store store-overhead tokenizer dashboard planner shared-cores
# context-parallel checkpoint-stall chaos-soak. Needs `make build` first (and data/kjv-bpe from
# scripts/prepare-kjv.sh for the ones that train on it; root for chaos-soak's stand-in hosts). Figures are only worth keeping from a quiet machine: each
# file records the load average before and after its run.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A commands=(
  [step]="/usr/bin/python3 bench/cpu_step.py --repeats 3 --min-time 3"
  [ops]="build/kiln_bench_ops --benchmark_min_time=1"
  [store]="build/kiln_bench_store"
  [store-overhead]="/usr/bin/python3 bench/store_overhead.py --repeats 4"
  [tokenizer]="build/kiln_bench_tokenizer"
  [dashboard]="build/kiln_bench_dashboard"
  [planner]="/usr/bin/python3 bench/planner_calibration.py"
  [shared-cores]="/usr/bin/python3 bench/shared_cores.py --steps 60"
  [context-parallel]="/usr/bin/python3 bench/context_parallel.py --steps 8"
  [checkpoint-stall]="/usr/bin/python3 bench/checkpoint_stall.py"
  [chaos-soak]="/usr/bin/python3 bench/chaos_soak.py --seed 20261128"
)
order=(step ops store store-overhead tokenizer dashboard planner shared-cores context-parallel checkpoint-stall chaos-soak)

names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${order[@]}")
for name in "${names[@]}"; do
  if [ -z "${commands[$name]+set}" ]; then
    echo "cpu-figures: no benchmark named '$name'; the names are: ${order[*]}" >&2
    exit 2
  fi
done

cores=$(nproc)
model=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
memory=$(free -g | awk '/^Mem:/ {print $2}')
commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- . ':!bench/results' || commit="$commit with uncommitted changes"
mkdir -p bench/results

for name in "${names[@]}"; do
  stamp=$(date -u +%Y-%m-%dT%H%MZ)
  out="bench/results/$stamp-cpu-${cores}core-$name.txt"
  {
    echo "machine: $cores cores, $memory GiB, $model"
    echo "date: $stamp  commit: $commit"
    echo "command: ${commands[$name]}"
    echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
  } > "$out"
  echo "cpu-figures: $name -> $out" >&2
  status=0
  ${commands[$name]} >> "$out" 2>&1 || status=$?
  {
    echo
    echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)  exit status: $status"
  } >> "$out"
done
