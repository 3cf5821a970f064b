#!/usr/bin/python3
"""Context parallelism on the CPU: tokens/s of a long sequence on one rank and split over two.

  /usr/bin/python3 bench/context_parallel.py [--seq-len N] [--steps N] [--build DIR] [--set KEY=VALUE ...]

--set passes settings to every case: on one GPU, `--set backend.device=cuda --set
parallel.device_comm=mpi` (the ranks share the GPU through host memory).

Trains the tiny demo config (configs/tiny.json, data/kjv-bpe from scripts/prepare-kjv.sh) at a
long sequence, one sequence a micro-batch and two a step, no validation, sampling or
checkpoints, in three layouts on the same cores:

  cp1   one rank on every core (backend.threads = the cores)
  dp2   two ranks of one thread each, a sequence each (data parallelism: the throughput bar)
  cp2   two ranks of one thread each sharing every sequence (ring attention)

and prints each one's tokens/s (the mean of the progress lines after the first two steps) and
its activations per rank from the `kiln: memory` line. Exits 0; not part of make test.
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENS_PER_S = re.compile(r"^step (\d+)/\d+ .*\| (\d+) tok/s", re.M)
ACTIVATIONS = re.compile(r"kiln: memory.* activations ([0-9.]+ [KMG]?i?B)")
MPIRUN = ["mpirun", "--oversubscribe", "-np", "2"]


def run(kiln, seq_len, steps, ranks, settings):
    args = [kiln, "train", "--config", "configs/tiny.json", "--no-store"]
    for setting in [f"model.seq_len={seq_len}", f"train.steps={steps}", "train.micro_batch=1",
                    "train.global_batch=2", "train.warmup=1", "train.log_interval=1",
                    "train.eval_interval=0", "train.sample_tokens=0", "train.checkpoint_interval=0",
                    *settings]:
        args += ["--set", setting]
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    done = subprocess.run((MPIRUN if ranks > 1 else []) + args, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(done.stdout + done.stderr)
    rates = [int(rate) for step, rate in TOKENS_PER_S.findall(done.stdout) if int(step) > 2]
    memory = ACTIVATIONS.search(done.stdout)
    return sum(rates) / len(rates), memory.group(1) if memory else "?"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--build", default="build", help="the build folder whose kiln runs")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    options = parser.parse_args()
    cores = os.cpu_count() or 2
    cases = [("cp1", 1, [f"backend.threads={cores}"]),
             ("dp2", 2, [f"backend.threads={max(1, cores // 2)}"]),
             ("cp2", 2, [f"backend.threads={max(1, cores // 2)}", "parallel.cp=2"])]
    print(f"tiny config, seq_len {options.seq_len}, {options.steps} steps of 2 sequences, {cores} cores")
    print("| layout | tokens/s | activations per rank |")
    print("| --- | ---: | ---: |")
    for name, ranks, settings in cases:
        kiln = os.path.join(ROOT, options.build, "kiln")
        rate, memory = run(kiln, options.seq_len, options.steps, ranks, settings + options.set)
        print(f"| {name} | {rate:.0f} | {memory} |", flush=True)


if __name__ == "__main__":
    main()
