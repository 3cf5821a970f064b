#!/bin/sh
# The memory a rank holds at each parallel.shard level, from kiln plan (the trainer's own
# sizing, trainer/plan/rank_memory.h): llama-8b (its own tp2 with sequence parallelism),
# gpt2-1.5b (one GPU a replica) and deepseek-moe-16b (its 64 experts over ep 8, full
# recomputation) on 8 and 64 H100s, micro-batch 1, bf16. Prints a markdown table a model, GiB
# per arena of the rank that needs the most, a layout that does not fit an H100 included
# (marked).
# docs/parallelism.md#sharded-data-parallelism
#   bench/sharded_memory.sh [BUILD_DIR]
set -eu
cd "$(dirname "$0")/.."
kiln="${1:-build}/kiln"
for model in llama-8b gpt2-1.5b deepseek-moe-16b; do
  extra=""
  [ "$model" = deepseek-moe-16b ] && extra="--set parallel.ep=8 --set train.recompute=full"
  for gpus in 8 64; do
    echo "$model on $gpus H100s:"
    echo "| parallel.shard | layout | parameters | gradients | unit windows | optimizer | activations | total |"
    echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    for shard in none optimizer gradients parameters; do
      # shellcheck disable=SC2086
      "$kiln" plan --config "configs/$model.json" --gpus "$gpus" --gpu h100 --this-layout --json \
        --set train.micro_batch=1 --set precision.dtype=bf16 --set parallel.distributed_optimizer=false \
        --set parallel.shard="$shard" $extra |
        python3 -c '
import json, sys
shard = sys.argv[1]
plan = json.load(sys.stdin)
fits = bool(plan["layouts"])
layout = plan["layouts"][0] if fits else plan["too_big"][0]
arenas = layout["memory"]["arenas"]
gib = lambda n: "%.2f" % (n / 2**30)
cells = [arenas.get(name, 0) for name in ("parameters", "gradients", "unit windows", "optimizer", "activations")]
total = gib(layout["memory"]["total_bytes"]) + ("" if fits else " (does not fit)")
print("| %s | %s | %s | %s |" % (shard, layout["layout"], " | ".join(gib(c) for c in cells), total))
' "$shard"
    done
    echo
  done
done
