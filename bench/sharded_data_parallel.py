#!/usr/bin/python3
"""Sharded data parallelism on the CPU: each parallel.shard level at dp2, with and without prefetch.

  /usr/bin/python3 bench/sharded_data_parallel.py [--steps N] [--build DIR] [--set KEY=VALUE ...]

Trains the tiny demo config's data (data/kjv-bpe from scripts/prepare-kjv.sh) on a GPT-2 of 8
layers of width 256, four micro-batches of 2 sequences a step split over two ranks of one
thread each (two micro-batches a rank, so the per-micro-batch reductions of sharded gradients
show), no validation, sampling or checkpoints, once per case:

  none                 the gradients all-reduced in buckets
  optimizer            ZeRO-1 (the distributed optimizer)
  gradients            ZeRO-2
  parameters           ZeRO-3, the next block gathered while one computes
  parameters-no-prefetch  ZeRO-3, each block gathered when it is needed
  parameters-per-step  ZeRO-3, every block gathered and reduced once a step

and prints each one's tokens/s (the mean of the progress lines after the first two steps), the
mean over both ranks and those steps of shard_ms (gathers and reductions the computation did
not hide) and comm_ms from the run store, and a rank's memory from the `kiln: memory` line.
Then it trains the same model under parallel.shard=parameters on 1, 2, 4 and 8 ranks for two
steps and prints the memory rank 0 allocated, arena by arena, as its `kiln: memory` line says.
Exits 0; not part of make test.
"""
import argparse
import csv
import io
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENS_PER_S = re.compile(r"^step (\d+)/\d+ .*\| (\d+) tok/s", re.M)
ARENA = r"{} ([0-9.]+ [KMG]?i?B)"
MPIRUN = ["mpirun", "--oversubscribe", "-np"]
CASES = [
    ("none", ["parallel.shard=none"]),
    ("optimizer", ["parallel.shard=optimizer"]),
    ("gradients", ["parallel.shard=gradients"]),
    ("parameters", ["parallel.shard=parameters"]),
    ("parameters-no-prefetch", ["parallel.shard=parameters", "parallel.shard_prefetch=false"]),
    ("parameters-per-step", ["parallel.shard=parameters", "parallel.shard_per_step=true"]),
]


def arena(output, name):
    found = re.search(ARENA.format(name), output)
    return found.group(1) if found else "-"


def mean(values):
    return sum(values) / len(values) if values else float("nan")


def train(kiln, ranks, args):
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    done = subprocess.run(MPIRUN + [str(ranks), kiln, "train", "--config", "configs/tiny.json"] + args, cwd=ROOT,
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(done.stdout + done.stderr)
    return done.stdout


def settings_args(steps, settings):
    args = []
    for setting in ["model.n_layer=8", "model.d_model=256", "model.n_head=8", f"train.steps={steps}",
                    "train.micro_batch=2", "train.global_batch=8", "train.warmup=1", "train.log_interval=1",
                    "train.eval_interval=0", "train.sample_tokens=0", "train.checkpoint_interval=0",
                    "backend.threads=1", *settings]:
        args += ["--set", setting]
    return args


def run(kiln, store, name, steps, settings):
    stdout = train(kiln, 2, ["--store", store, "--name", name] + settings_args(steps, settings))
    rates = [int(rate) for step, rate in TOKENS_PER_S.findall(stdout) if int(step) > 2]
    exported = subprocess.run([kiln, "runs", "export", name, "--store", store], cwd=ROOT, capture_output=True,
                              text=True, check=True)
    rows = [row for row in csv.DictReader(io.StringIO(exported.stdout)) if int(row["step"]) > 2]
    shard = [float(row["shard_ms"]) for row in rows if row["shard_ms"]]
    comm = [float(row["comm_ms"]) for row in rows if row["comm_ms"]]
    memory = {name: arena(stdout, name) for name in ("parameters", "gradients", "unit windows", "optimizer")}
    return mean(rates), mean(shard), mean(comm), memory


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--build", default="build", help="the build folder whose kiln runs")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    options = parser.parse_args()
    kiln = os.path.join(ROOT, options.build, "kiln")
    print(f"GPT-2, 8 layers of width 256, seq 128, 4 micro-batches of 2 a step over 2 ranks of 1 thread, "
          f"{options.steps} steps, {os.cpu_count()} cores")
    print("| parallel.shard | tokens/s | shard_ms | comm_ms | parameters | gradients | unit windows | optimizer |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as folder:
        store = os.path.join(folder, "runs.db")
        for name, settings in CASES:
            rate, shard, comm, memory = run(kiln, store, name, options.steps, settings + options.set)
            shard_cell = "-" if shard != shard else f"{shard:.1f}"
            print(f"| {name} | {rate:.0f} | {shard_cell} | {comm:.1f} | {memory['parameters']} | "
                  f"{memory['gradients']} | {memory['unit windows']} | {memory['optimizer']} |", flush=True)
    print()
    print("parallel.shard=parameters, rank 0's memory as allocated:")
    print("| ranks | parameters | gradients | unit windows | optimizer | activations |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for ranks in (1, 2, 4, 8):
        # Eight sequences a step: one micro-batch of one on each of 8 ranks.
        stdout = train(kiln, ranks, ["--no-store"] + settings_args(2, ["parallel.shard=parameters", "train.micro_batch=1"]
                                                                    + options.set))
        cells = " | ".join(arena(stdout, name) for name in
                           ("parameters", "gradients", "unit windows", "optimizer", "activations"))
        print(f"| {ranks} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
