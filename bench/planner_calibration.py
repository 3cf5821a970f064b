#!/usr/bin/python3
"""The planner's time model against measured steps on this machine's CPU.

  /usr/bin/python3 bench/planner_calibration.py [--build DIR] [--steps N]

For the tiny config and a gpt2-124m-shaped one (12 heads of 64, 4 layers, sequence 256), first
profiles one rank at each thread count the layouts' ranks run with (kiln_bench_step
--profile-json: the CPU's product, attention and memory-bound rates), then for each layout below asks `kiln plan --gpu cpu --profile ...
--this-layout` for its step time and trains it under mpirun for N steps, timing the steps
after the first two. Prints predicted against measured and the error; exits 0 (not part of
make test). docs/planner.md and bench/README.md hold its output.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENS_PER_S = re.compile(r"^step (\d+)/\d+ .*\| (\d+) tok/s", re.M)
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}

CONFIGS = {
    "tiny": ("configs/tiny.json", ["train.global_batch=32", "train.micro_batch=8"]),
    "gpt2-124m-shaped": ("configs/gpt2-124m.json",
                         ["model.n_layer=4", "model.seq_len=256", "train.global_batch=8", "train.micro_batch=2",
                          "precision.dtype=fp32", "data.paths=[\"data/kjv-bpe\"]", "data.tokenizer=data/kjv-tokenizer"]),
}
# (config, ranks, settings)
LAYOUTS = [
    ("tiny", 1, []),
    ("tiny", 2, []),
    ("tiny", 2, ["parallel.distributed_optimizer=true"]),
    ("tiny", 2, ["parallel.tp=2"]),
    ("tiny", 2, ["parallel.tp=2", "parallel.sequence_parallel=true"]),
    ("tiny", 2, ["parallel.pp=2"]),
    ("tiny", 2, ["parallel.pp=2", "parallel.vpp=2"]),
    ("tiny", 1, ["train.recompute=full"]),
    ("tiny", 4, ["parallel.tp=2", "parallel.pp=2"]),
    ("gpt2-124m-shaped", 1, []),
    ("gpt2-124m-shaped", 2, []),
    ("gpt2-124m-shaped", 2, ["parallel.tp=2"]),
    ("gpt2-124m-shaped", 2, ["parallel.pp=2"]),
]


def settings_args(settings):
    out = []
    for s in settings:
        out += ["--set", s]
    return out


def profile(build, config, settings, path):
    subprocess.run([os.path.join(build, "kiln_bench_step"), "--config", config, *settings_args(settings),
                    "--profile", "--profile-json", path], cwd=ROOT, check=True, capture_output=True)


TITLE = re.compile(r"/(\w+)/(\w+)/L(\d+)_C(\d+)_T(\d+)_B(\d+)x(\d+) ")
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 2}
# The name prefixes of the blocks' memory-bound ops ("add" takes add_bias too; the loss, the
# embedding and the optimizer's ops are modelled apart).
BLOCK_OPS = ("layernorm", "rmsnorm", "add", "bias_backward", "gelu", "swiglu", "rope")


def block_elements(profile_path):
    """The elements the blocks' memory-bound ops move per token and residual width, per layer
    (the final norm included), by op: what the time model's per-architecture constant stands for."""
    with open(profile_path) as f:
        j = json.load(f)
    arch, dtype, layers, width, seq, micro, accum = TITLE.search(j["title"]).groups()
    unit = int(layers) * int(width) * int(seq) * int(micro) * int(accum) * DTYPE_BYTES[dtype]
    by_op = {}
    for op in j["ops"]:
        if op["op"].startswith(BLOCK_OPS):
            by_op[op["op"]] = by_op.get(op["op"], 0) + op.get("bytes_per_step", 0) / unit
    return arch, sum(by_op.values()), by_op


def predicted(build, config, settings, ranks, profile_path):
    out = subprocess.run([os.path.join(build, "kiln"), "plan", "--gpu", "cpu", "--profile", profile_path,
                          "--gpus", str(ranks), "--this-layout", "--json", "--config", config,
                          *settings_args(settings)], cwd=ROOT, check=True, capture_output=True, text=True)
    layouts = json.loads(out.stdout)["layouts"]
    return layouts[0]["step_s"] if layouts else None


def measured(build, config, settings, ranks, steps):
    common = [f"train.steps={steps}", "train.warmup=1", "train.log_interval=1", "train.eval_interval=0",
              "train.sample_tokens=0", "train.checkpoint_interval=0"]
    cmd = ([] if ranks == 1 else ["mpirun", "--oversubscribe", "-np", str(ranks)]) + [
        os.path.join(build, "kiln"), "train", "--no-store", "--config", config, *settings_args(settings + common)]
    done = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True)
    if done.returncode != 0:
        return None, (done.stderr.strip().splitlines() or ["failed"])[-1]
    rates = [int(r) for s, r in TOKENS_PER_S.findall(done.stdout) if int(s) > 2]
    return rates, ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        # Each rank runs an even share of the cores: the rates at that many threads.
        cores = len(os.sched_getaffinity(0))
        profiles = {}
        for name, (config, settings) in CONFIGS.items():
            for threads in sorted({max(1, cores // ranks) for _, ranks, _ in LAYOUTS}):
                profiles[name, threads] = os.path.join(tmp, f"{name}-{threads}.json")
                profile(args.build, config, settings + [f"backend.threads={threads}"], profiles[name, threads])
        for (name, threads), path in sorted(profiles.items()):
            arch, total, by_op = block_elements(path)
            parts = ", ".join(f"{op} {v:.1f}" for op, v in sorted(by_op.items()))
            print(f"{name} ({arch}, {threads} threads): the blocks' memory-bound ops move {total:.1f} elements "
                  f"per token and residual width a layer ({parts})")
        print()
        print("| config | ranks | layout | predicted ms | measured ms | error |")
        print("| --- | ---: | --- | ---: | ---: | ---: |")
        errors = []
        for name, ranks, extra in LAYOUTS:
            config, settings = CONFIGS[name]
            want = predicted(args.build, config, settings + extra, ranks, profiles[name, max(1, cores // ranks)])
            rates, why = measured(args.build, config, settings + extra, ranks, args.steps)
            if not rates or want is None:
                print(f"| {name} | {ranks} | {' '.join(extra) or '-'} | - | - | {why or 'no prediction'} |")
                continue
            cfg_tokens = {"tiny": 32 * 128, "gpt2-124m-shaped": 8 * 256}[name]
            got = cfg_tokens / (sum(rates) / len(rates))
            error = want / got - 1
            errors.append(abs(error))
            print(f"| {name} | {ranks} | {' '.join(extra) or '-'} | {want * 1e3:.1f} | {got * 1e3:.1f} | "
                  f"{100 * error:+.0f}% |", flush=True)
        if errors:
            print(f"\nmean |error| {100 * sum(errors) / len(errors):.0f}%, worst {100 * max(errors):.0f}%, "
                  f"{sum(e <= 0.2 for e in errors)} of {len(errors)} within 20%")


if __name__ == "__main__":
    sys.exit(main())
