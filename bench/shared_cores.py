#!/usr/bin/python3
"""Two CPU trainings on one machine: each alone, then both at once, as kiln ran before and now.

Runs `kiln train` on the tiny demo config (data/kjv-bpe, from scripts/prepare-kjv.sh) and reads
the ms/step of its progress lines, leaving out the first interval (start-up, warm caches). Cases:

  alone             one run as kiln runs now (its share of the cores, OpenMP spins 10,000 turns)
  alone, passive    one run whose OpenMP threads sleep at once (OMP_WAIT_POLICY=passive)
  alone, before     one run on every core with libgomp's default spin (GOMP_SPINCOUNT=300000)
  two, before       two runs at once, each as "alone, before": kiln before core sharing
  two, passive      two runs at once on their share of the cores, sleeping at once
  two, pinned       two runs at once, each on every core (backend.threads fixed), kiln's spin
  two, shared       two runs at once as kiln runs now

Prints ms/step of each run and its ratio to the first case. Exits 0; not part of make test.
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


def run_together(count, steps, settings, env):
    # Only the case's own OpenMP settings: kiln chooses when none is set.
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    procs = [subprocess.Popen(command(steps, settings), cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env={**base, **env})
             for _ in range(count)]
    outputs = [p.communicate()[0] for p in procs]
    for p, out in zip(procs, outputs):
        if p.returncode != 0:
            sys.exit(out)
    return [ms_per_step(out) for out in outputs]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    if not os.path.exists(os.path.join(ROOT, "data", "kjv-bpe.idx")):
        sys.exit("bench/shared_cores.py: no data/kjv-bpe; run scripts/prepare-kjv.sh first")
    cores = len(os.sched_getaffinity(0))
    every_core = [f"backend.threads={cores}"]
    before = {"GOMP_SPINCOUNT": "300000"}  # libgomp's default, without kiln's setting
    passive = {"OMP_WAIT_POLICY": "passive"}
    print(f"{cores} cores, {args.steps} steps a run, tiny config")
    run_together(1, 20, [], {})  # a first run finds cold caches: not timed
    alone = None
    for name, count, settings, env in (("alone", 1, [], {}),
                                       ("alone, passive", 1, [], passive),
                                       ("alone, before", 1, every_core, before),
                                       ("two, before", 2, every_core, before),
                                       ("two, passive", 2, [], passive),
                                       ("two, pinned", 2, every_core, {}),
                                       ("two, shared", 2, [], {})):
        start = time.monotonic()
        times = run_together(count, args.steps, settings, env)
        wall = time.monotonic() - start
        alone = alone or times[0]
        shown = "  ".join(f"{ms:8.1f} ({ms / alone:5.2f}x)" for ms in times)
        print(f"{name:16} ms/step {shown}   wall {wall:4.0f} s", flush=True)

if __name__ == "__main__":
    main()
