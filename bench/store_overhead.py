#!/usr/bin/python3
"""What recording a run in the store costs the training: kiln train with the store on and off.

  /usr/bin/python3 bench/store_overhead.py [--steps N] [--repeats R] [--log-intervals 1,25]

Trains configs/tiny.json on the King James Bible (prepared on first use) for --steps steps,
without validation or sampling, once with --no-store and once with a fresh store file,
alternating R times per log interval, and times each whole process. The best run of each
side counts (other work on a shared machine only ever slows a run down); the overhead is
(store - no store) / no store. log_interval=1 is the worst case: a row and a commit every
step. Target: at most 1% on the tiny config. Needs `make build` first; exits 0 whatever
the figures are.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KILN = ROOT / "build" / "kiln"


def timed_run(steps, log_interval, store):
    command = [str(KILN), "train", "--config", "configs/tiny.json",
               "--set", "train.steps=%d" % steps, "--set", "train.warmup=10",
               "--set", "train.log_interval=%d" % log_interval,
               "--set", "train.eval_interval=0", "--set", "train.sample_tokens=0"]
    command += ["--store", store, "--name", "overhead-%d" % time.time_ns()] if store else ["--no-store"]
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit("store_overhead: %s failed:\n%s%s" % (" ".join(command), result.stdout, result.stderr))
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--log-intervals", default="1,25")
    args = parser.parse_args()
    subprocess.run([str(ROOT / "scripts" / "prepare-kjv.sh")], check=True)

    print("tiny config, %d steps, %d alternating runs per side; seconds per run (best, median)"
          % (args.steps, args.repeats))
    print("%-12s %16s %16s %10s" % ("log_interval", "no store", "store", "overhead"))
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "overhead.db")
        for interval in (int(i) for i in args.log_intervals.split(",")):
            off, on = [], []
            for _ in range(args.repeats):
                off.append(timed_run(args.steps, interval, None))
                on.append(timed_run(args.steps, interval, store))
            overhead = (min(on) - min(off)) / min(off)
            print("%-12d %7.2f, %6.2f %7.2f, %6.2f %9.2f%%" % (
                interval, min(off), statistics.median(off), min(on), statistics.median(on),
                100 * overhead))


if __name__ == "__main__":
    main()
