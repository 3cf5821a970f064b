#!/usr/bin/python3
"""Two CPU trainings on one machine: each alone, then both at once, with and without core sharing.

Runs `kiln train` on the tiny demo config (data/kjv-bpe, from scripts/prepare-kjv.sh) and reads
the ms/step of its progress lines, leaving out the first interval (start-up, warm caches). Cases:

  alone      one run, every core (the reference)
  pinned     two runs at once, each with backend.threads = every core: what kiln did before
             core sharing, and what a fixed thread count still does
  shared     two runs at once, backend.threads = 0: each trains on its share of the cores

Prints ms/step of each run and its slowdown against the run alone. Exits 0; not part of make test.
"""
import argparse
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KILN = os.path.join(ROOT, "build", "kiln")
MS_PER_STEP = re.compile(r"^step (\d+)/\d+ .*\| ([0-9.]+) ms/step", re.M)


def command(steps, settings):
    args = [KILN, "train", "--no-store", "--set", f"train.steps={steps}", "--set", "train.log_interval=10",
            "--set", "train.eval_interval=0", "--set", "train.sample_tokens=0",
            "--set", "train.checkpoint_interval=0"]
    for setting in settings:
        args += ["--set", setting]
    return args


def ms_per_step(output):
    rows = [(int(step), float(ms)) for step, ms in MS_PER_STEP.findall(output)]
    timed = [ms for step, ms in rows if step > 10]
    if not timed:
        sys.exit("no progress lines in:\n" + output)
    return sum(timed) / len(timed)


def run_together(count, steps, settings):
    procs = [subprocess.Popen(command(steps, settings), cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for _ in range(count)]
    outputs = [p.communicate()[0] for p in procs]
    for p, out in zip(procs, outputs):
        if p.returncode != 0:
            sys.exit(out)
    return [ms_per_step(out) for out in outputs]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=80)
    args = parser.parse_args()
    if not os.path.exists(os.path.join(ROOT, "data", "kjv-bpe.idx")):
        sys.exit("bench/shared_cores.py: no data/kjv-bpe; run scripts/prepare-kjv.sh first")
    cores = len(os.sched_getaffinity(0))
    every_core = f"backend.threads={cores}"
    print(f"{cores} cores, {args.steps} steps a run, tiny config")
    alone = run_together(1, args.steps, [])[0]
    print(f"alone    ms/step {alone:8.1f}")
    for name, settings in (("pinned", [every_core]), ("shared", [])):
        start = time.monotonic()
        times = run_together(2, args.steps, settings)
        wall = time.monotonic() - start
        shown = "  ".join(f"{ms:8.1f} ({ms / alone:.2f}x)" for ms in times)
        print(f"{name:8} ms/step {shown}   wall {wall:.0f} s")


if __name__ == "__main__":
    main()
