#!/usr/bin/python3
"""What recording a run in the store costs the training: kiln train with the store on and off.

  /usr/bin/python3 bench/store_overhead.py [--steps N] [--repeats R] [--log-intervals 1,25]

Trains configs/tiny.json on the demo corpus (prepared on first use) for --steps steps,
without validation or sampling, once with --no-store and once with a fresh store file,
alternating R times per log interval. Each progress line gives the milliseconds per step of
its interval, everything the training loop does included (the store's rows are handed over,
and its commands read, inside the loop); the first 5 steps of each run are warm-up and left
out. The figure per side is the median over all the other intervals of all its runs: short
alternating runs and a median keep the shared machine's drift out of the comparison. The
overhead is (store - no store) / no store. log_interval=1 is the worst case: a row and a
commit every step. Target: at most 1% on the tiny config. Needs `make build` first; exits 0
whatever the figures are.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KILN = ROOT / "build" / "kiln"
PROGRESS = re.compile(r"^step +(\d+)/\d+ \|.*\| ([0-9.]+) ms/step \|", re.M)
WARMUP_STEPS = 5


def step_times(steps, log_interval, store):
    command = [str(KILN), "train", "--config", "configs/tiny.json",
               "--set", "train.steps=%d" % steps, "--set", "train.warmup=10",
               "--set", "train.log_interval=%d" % log_interval,
               "--set", "train.eval_interval=0", "--set", "train.sample_tokens=0"]
    command += ["--store", store, "--name", "overhead-%d" % time.time_ns()] if store else ["--no-store"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("store_overhead: %s failed:\n%s%s" % (" ".join(command), result.stdout, result.stderr))
    return [float(ms) for step, ms in PROGRESS.findall(result.stdout) if int(step) > WARMUP_STEPS]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--log-intervals", default="1,25")
    args = parser.parse_args()
    subprocess.run([str(ROOT / "scripts" / "prepare-kjv.sh")], check=True)

    print("tiny config, %d steps a run, %d alternating runs per side; median ms/step over "
          "the runs' intervals after step %d" % (args.steps, args.repeats, WARMUP_STEPS))
    print("%-12s %10s %10s %10s %9s" % ("log_interval", "no store", "store", "overhead", "samples"))
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "overhead.db")
        for interval in (int(i) for i in args.log_intervals.split(",")):
            off, on = [], []
            for _ in range(args.repeats):
                off += step_times(args.steps, interval, None)
                on += step_times(args.steps, interval, store)
            a, b = statistics.median(off), statistics.median(on)
            print("%-12d %10.2f %10.2f %9.2f%% %9d" % (interval, a, b, 100 * (b - a) / a,
                                                       min(len(off), len(on))))


if __name__ == "__main__":
    main()
