#!/bin/sh
# The memory a rank holds at each parallel.shard level, from kiln plan (the trainer's own
# sizing, trainer/plan/rank_memory.h): llama-8b (its own tp2 with sequence parallelism) and
# gpt2-1.5b (one GPU a replica) on 8 and 64 H100s, micro-batch 1, bf16. Prints a markdown table a
# model, GiB per arena of the rank that needs the most. docs/parallelism.md#sharded-data-parallelism
#   bench/sharded_memory.sh [BUILD_DIR]
set -eu
cd "$(dirname "$0")/.."
kiln="${1:-build}/kiln"
for model in llama-8b gpt2-1.5b; do
  for gpus in 8 64; do
    echo "$model on $gpus H100s:"
    echo "| parallel.shard | layout | parameters | gradients | unit windows | optimizer | activations | total |"
    echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    for shard in none optimizer gradients parameters; do
      "$kiln" plan --config "configs/$model.json" --gpus "$gpus" --gpu h100 --this-layout --json \
        --set train.micro_batch=1 --set precision.dtype=bf16 --set parallel.distributed_optimizer=false \
        --set parallel.shard="$shard" |
        python3 -c '
import json, sys
shard = sys.argv[1]
plan = json.load(sys.stdin)
layout = plan["layouts"][0]
arenas = layout["memory"]["arenas"]
gib = lambda n: "%.2f" % (n / 2**30)
cells = [arenas.get(name, 0) for name in ("parameters", "gradients", "unit windows", "optimizer", "activations")]
print("| %s | %s | %s | %s |" % (shard, layout["layout"], " | ".join(gib(c) for c in cells), gib(layout["memory"]["total_bytes"])))
' "$shard"
    done
    echo
  done
done
