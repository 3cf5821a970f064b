#!/usr/bin/python3
"""kiln against PyTorch on the CPU: one training step, same config, threads and shapes.

  /usr/bin/python3 bench/cpu_step.py [--threads N] [--min-time SECONDS] [--repeats R]

For each case runs build/kiln_bench_step (Google Benchmark) and bench/torch_step.py (the
PyTorch peer), alternating R times, and keeps each side's best tokens/s: on a shared
machine other work only ever slows a run down. Prints a table of tokens/s, the ratio
kiln/PyTorch and the target. A benchmark reports; it exits 0 whatever the ratios are.
Needs `make build` first (`make bench` does both).
"""
import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "build" / "kiln_bench_step"
TORCH_STEP = ROOT / "bench" / "torch_step.py"

GPT2_SMALL = ["model.n_layer=2", "model.seq_len=256", "train.micro_batch=2",
              "train.global_batch=2", "precision.dtype=fp32", "backend.device=cpu"]
# (name, config, overrides, target ratio kiln/PyTorch)
CASES = [
    # The tiny target was set at the byte vocabulary (257) and the one micro-batch of 32 the
    # demo used before its BPE tokenizer and its micro-batches of 8; the case keeps that
    # shape so the figures stay comparable.
    ("tiny (4 layers, d 128, vocab 257, seq 128, batch 32)", "configs/tiny.json",
     ["model.vocab_size=257", "train.micro_batch=32"], 2.0),
    ("gpt2-124m shape (2 layers, d 768, vocab 50257, seq 256, batch 2)",
     "configs/gpt2-124m.json", GPT2_SMALL, 1.0),
    # 8 experts, top 2, in every layer; the peer runs them as Mixtral's block does (a loop
    # over the experts, index_add back), without the balancing losses.
    ("moe-tiny (4 layers, d 128, 8 experts top 2, vocab 2048, seq 128, batch 8)",
     "configs/moe-tiny.json", ["train.global_batch=8", "moe.aux_loss_coeff=0",
                               "moe.z_loss_coeff=0"], 1.0),
    # DeepSeek-V3's latent attention without its experts and its multi-token prediction; the
    # peer runs the reference's latent_attention (its value heads unpadded).
    ("deepseek-v3-tiny dense (4 layers, d 128, 4 latent-attention heads of 32 + 16, vocab 2048, seq 128, batch 8)",
     "configs/deepseek-v3-tiny.json", ["moe.num_experts=0", "model.mtp_depth=0", "train.global_batch=8"], 1.0),
]


def run_json(command):
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if result.returncode != 0:
        sys.exit("cpu_step: %s failed:\n%s%s" % (" ".join(command), result.stdout, result.stderr))
    return json.loads(result.stdout)


def config_args(config, overrides):
    args = ["--config", config]
    for assignment in overrides:
        args += ["--set", assignment]
    return args


def kiln_tok_per_s(config, overrides, min_time):
    out = run_json([str(BENCH)] + config_args(config, overrides) +
                   ["--benchmark_min_time=%g" % min_time, "--benchmark_format=json"])
    return out["benchmarks"][0]["tok_per_s"]


def torch_tok_per_s(config, overrides, min_time):
    out = run_json([sys.executable, str(TORCH_STEP)] + config_args(config, overrides) +
                   ["--min-time", str(min_time), "--json"])
    return out["tok_per_s"]


def machine():
    model = platform.processor() or platform.machine()
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = next(line.split(":", 1)[1].strip() for line in lscpu.splitlines()
                     if line.startswith("Model name"))
    except (OSError, StopIteration):
        pass
    blas = os.path.realpath("/usr/lib/%s-linux-gnu/libblas.so.3" % platform.machine())
    load = " ".join("%.2f" % x for x in os.getloadavg())
    # OpenBLAS's kernels set the speed of every product on both sides: asked for by name, or
    # OpenBLAS's own choice for this CPU.
    core = os.environ.get("OPENBLAS_CORETYPE", "OpenBLAS's choice")
    return "%s, %d cores; torch %s (libblas.so.3 -> %s); OPENBLAS_CORETYPE %s; load average %s" % (
        model, os.cpu_count(), torch.__version__, blas, core, load)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=0,
                        help="threads for both sides (default 0: every core)")
    parser.add_argument("--min-time", type=float, default=5.0,
                        help="seconds of timed steps per run (default 5)")
    parser.add_argument("--repeats", type=int, default=2,
                        help="runs per side and case, alternating; the best counts (default 2)")
    args = parser.parse_args()
    if not BENCH.exists():
        sys.exit("cpu_step: %s is missing: run `make build` first" % BENCH)

    threads = ["backend.threads=%d" % args.threads] if args.threads > 0 else []
    print(machine())
    rows = []
    for name, config, overrides, target in CASES:
        overrides = overrides + threads
        kiln, peer = 0.0, 0.0
        for _ in range(args.repeats):
            kiln = max(kiln, kiln_tok_per_s(config, overrides, args.min_time))
            peer = max(peer, torch_tok_per_s(config, overrides, args.min_time))
        ratio = kiln / peer
        rows.append("| %s | %.0f | %.0f | %.2fx | >= %gx %s |" % (
            name, kiln, peer, ratio, target, "pass" if ratio >= target else "FAIL"))
        print("  %s: kiln %.0f tok/s, PyTorch %.0f tok/s" % (name, kiln, peer), flush=True)

    n = args.threads if args.threads > 0 else os.cpu_count()
    print("\nfp32, %d threads each side, best of %d runs of >= %gs per side:\n" % (
        n, args.repeats, args.min_time))
    print("| case | kiln tok/s | PyTorch tok/s | kiln/PyTorch | target |")
    print("| --- | ---: | ---: | ---: | --- |")
    print("\n".join(rows))
    print("\nload average after: %s" % " ".join("%.2f" % x for x in os.getloadavg()))


if __name__ == "__main__":
    main()
