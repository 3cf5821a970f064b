#!/usr/bin/python3
"""Pipeline schedules on the CPU: the bubble each schedule plans against the one each stage measures.

  /usr/bin/python3 bench/pipeline_schedules.py [--pp P] [--micro-batches 2,4,8,16] [--steps N]
                                               [--build DIR] [--set KEY=VALUE ...]

Trains the tiny demo config's data (data/kjv-bpe from scripts/prepare-kjv.sh) on a GPT-2 of 8
layers of width 256 over a pipeline of P stages (2 by default), one rank of one thread each
(at P = 2 one rank a core of this VM's 2: a rank that waits in a receive does not take a core
another one computes on; at P = 4 two ranks share each core), no validation, sampling or
checkpoints, for each count of micro-batches of 2 sequences a step under each schedule:

  1f1b          Megatron's 1F1B
  interleaved   interleaved 1F1B, 2 chunks a stage (parallel.vpp=2; counts that are multiples of P)
  zb-h1         ZB-H1, each backward split in the input's gradient and the weights'
  zbv           ZBV, the same over two chunks a stage in a V
  dualpipev     DeepSeek's DualPipeV in the same V (counts of at least 2 P)

and prints the bubble the run planned (the start-up line: the schedule played out, a backward
costing two forwards), the bubble measured (pipe_ms over fwd_ms + bwd_ms, the mean over both
ranks and the steps after the second, from the run store: the waits in receives, transfers
included) and tokens/s (the mean of the progress lines after the second step).
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
PLANNED = re.compile(r"kiln: pipeline of .* schedule over \d+ micro-batches: bubble ([0-9.]+)%")
SCHEDULES = [
    ("1f1b", ["parallel.schedule=1f1b"]),
    ("interleaved", ["parallel.schedule=1f1b", "parallel.vpp=2"]),
    ("zb-h1", ["parallel.schedule=zb-h1"]),
    ("zbv", ["parallel.schedule=zbv"]),
    ("dualpipev", ["parallel.schedule=dualpipev"]),
]


def runs(name, pp, micro_batches):
    """Whether the schedule takes this many micro-batches over pp stages."""
    if name == "interleaved":
        return micro_batches % pp == 0
    if name == "dualpipev":
        return micro_batches >= 2 * pp
    return True


def mean(values):
    return sum(values) / len(values) if values else float("nan")


def run(kiln, store, name, pp, steps, micro_batches, settings):
    args = ["--store", store, "--name", name]
    for setting in ["model.n_layer=8", "model.d_model=256", "model.n_head=8", f"train.steps={steps}",
                    "train.micro_batch=2", f"train.global_batch={2 * micro_batches}", "train.warmup=1",
                    "train.log_interval=1", "train.eval_interval=0", "train.sample_tokens=0",
                    "train.checkpoint_interval=0", "backend.threads=1", f"parallel.pp={pp}", *settings]:
        args += ["--set", setting]
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    done = subprocess.run(["mpirun", "--oversubscribe", "-np", str(pp), kiln, "train", "--config", "configs/tiny.json"]
                          + args, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(done.stdout + done.stderr)
    planned = float(PLANNED.search(done.stdout).group(1))
    rates = [int(rate) for step, rate in TOKENS_PER_S.findall(done.stdout) if int(step) > 2]
    exported = subprocess.run([kiln, "runs", "export", name, "--store", store], cwd=ROOT, capture_output=True,
                              text=True, check=True)
    rows = [row for row in csv.DictReader(io.StringIO(exported.stdout)) if int(row["step"]) > 2]
    measured = [float(row["pipe_ms"]) / (float(row["fwd_ms"]) + float(row["bwd_ms"])) for row in rows]
    return planned, 100 * mean(measured), mean(rates)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pp", type=int, default=2, help="pipeline stages, a rank each")
    parser.add_argument("--micro-batches", default="2,4,8,16", help="the counts a step, comma-separated")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--build", default="build", help="the build folder whose kiln runs")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    options = parser.parse_args()
    kiln = os.path.join(ROOT, options.build, "kiln")
    counts = [int(m) for m in options.micro_batches.split(",")]
    print(f"GPT-2, 8 layers of width 256, seq 128, pp{options.pp} over {options.pp} ranks of 1 thread, "
          f"micro-batches of 2, {options.steps} steps, {os.cpu_count()} cores")
    print("| micro-batches | schedule | bubble planned | bubble measured | tokens/s |")
    print("| ---: | --- | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as folder:
        store = os.path.join(folder, "runs.db")
        for m in counts:
            for name, settings in SCHEDULES:
                if not runs(name, options.pp, m):
                    continue
                planned, measured, rate = run(kiln, store, f"{name}-m{m}", options.pp, options.steps, m,
                                              settings + options.set)
                print(f"| {m} | {name} | {planned:.1f}% | {measured:.1f}% | {rate:.0f} |", flush=True)


if __name__ == "__main__":
    main()
