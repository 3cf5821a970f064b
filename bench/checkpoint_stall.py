#!/usr/bin/python3
"""How long a checkpoint holds the training: synchronous, and train.async_checkpoint.

  /usr/bin/python3 bench/checkpoint_stall.py [--build DIR] [--steps N] [--device cpu|cuda]

Trains the gpt2-124m config's model, whole (12 layers, d 768, vocab 50257, seq 1024: 124M
parameters), on the demo corpus (prepared on first use) with one sequence a step, a checkpoint
every 2 steps and the last, once synchronously and once with train.async_checkpoint=true,
each into a fresh temporary folder. On the CPU the model computes in fp32 (weights and AdamW's
two moments: 1.4 GiB a checkpoint); on a GPU in bf16 with fp32 master weights.

A checkpoint's stall is the time its step boundary held the training. Synchronous: the whole
write (its "saved checkpoint ... in X s" line). Asynchronous: the copy to host memory ("snapshot
in X s") and any wait for the write before it ("waited X s"); the write itself ("... in the
background") goes on beside the next steps. The last step's checkpoint is written before the
run ends either way. Beside the stalls: each run's wall time, and the mean ms/step (each
progress line's, the checkpoints' stalls left out) of the steps after an interval's checkpoint,
which an asynchronous run trains while it writes: what the writing takes from the training on
a machine of few cores. Then whether the two runs' tensor files are the same bytes at every
checkpoint. Needs `make build` first; exits 0 whatever the figures are.
"""
import argparse
import filecmp
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRESS = re.compile(r"^step +(\d+)/\d+ \|.*\| ([0-9.]+) ms/step \|", re.M)
SAVED = re.compile(r"^kiln: saved checkpoint \S+/step-0*(\d+) \(([^)]+)\) in ([0-9.]+) s( in the background)?$", re.M)
SNAPSHOT = re.compile(r"^kiln: checkpoint step (\d+) snapshot in ([0-9.]+) s", re.M)
WAITED = re.compile(r"^kiln: checkpoint step (\d+) waited ([0-9.]+) s", re.M)


def train(kiln, device, steps, folder, asynchronous):
    command = [str(kiln), "train", "--no-store", "--name", "stall", "--config", "configs/gpt2-124m.json"]
    settings = ["train.steps=%d" % steps, "train.micro_batch=1", "train.global_batch=1", "train.warmup=2",
                "train.log_interval=1", "train.eval_interval=0", "train.sample_tokens=0",
                "train.checkpoint_interval=2", "train.checkpoint_dir=%s" % folder,
                "train.async_checkpoint=%s" % ("true" if asynchronous else "false"),
                'data.paths=["data/kjv-bpe"]', "data.tokenizer=data/kjv-tokenizer", "data.split=98,2,0",
                "backend.device=%s" % device]
    if device == "cpu":
        settings.append("precision.dtype=fp32")
    for setting in settings:
        command += ["--set", setting]
    start = time.monotonic()
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - start
    if result.returncode != 0:
        sys.exit("checkpoint_stall: %s failed:\n%s%s" % (" ".join(command), result.stdout, result.stderr))
    return result.stdout, wall


def stalls(output):
    """Each checkpoint's stall, write time and size, by step."""
    out = {}
    for step, size, seconds, background in SAVED.findall(output):
        entry = out.setdefault(int(step), {"stall": 0.0})
        entry["size"] = size
        entry["write"] = float(seconds)
        if not background:
            entry["stall"] += float(seconds)
    for step, seconds in SNAPSHOT.findall(output) + WAITED.findall(output):
        out.setdefault(int(step), {"stall": 0.0})["stall"] += float(seconds)
    return out


def same_tensor_files(sync, asynchronous):
    """Each step's tensor files of the two runs: byte for byte the same, or where not."""
    steps = sorted(p.name for p in sync.iterdir() if p.name.startswith("step-"))
    differ = [step + "/" + name for step in steps for name in ("model.safetensors", "optimizer.safetensors")
              if not filecmp.cmp(sync / step / name, asynchronous / step / name, shallow=False)]
    return "the same bytes" if not differ else "differ: " + ", ".join(differ)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--steps", type=int, default=7)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = parser.parse_args()
    kiln = (ROOT / args.build / "kiln").resolve()
    subprocess.run([str(ROOT / "scripts" / "prepare-kjv.sh")], check=True, env=dict(os.environ, BUILD_DIR=args.build))

    runs = {}
    with tempfile.TemporaryDirectory(dir=ROOT) as tmp:
        for asynchronous in (False, True):
            folder = Path(tmp) / ("async" if asynchronous else "sync")
            runs[asynchronous] = train(kiln, args.device, args.steps, folder, asynchronous)
        same = same_tensor_files(Path(tmp) / "sync" / "stall", Path(tmp) / "async" / "stall")

    sync, asyn = (stalls(runs[a][0]) for a in (False, True))
    print("gpt2-124m shape (12 layers, d 768, vocab 50257, seq 1024), %s, one sequence a step, %d steps, "
          "a checkpoint every 2 steps and the last" % (args.device, args.steps))
    print("%-18s %10s %12s %13s %15s" % ("checkpoint", "size", "sync stall", "async stall", "async write"))
    for step in sorted(sync):
        last = step == args.steps
        a = asyn.get(step, {})
        print("%-18s %10s %11.2fs %12.2fs %14s" % (
            "step %d%s" % (step, " (last)" if last else ""), sync[step].get("size", "?"), sync[step]["stall"],
            a.get("stall", float("nan")),
            "-" if last else "%.2fs" % a.get("write", float("nan"))))
    beside = {step + 1 for step in sync if step != args.steps and step + 1 <= args.steps}
    print("the two runs' tensor files, every checkpoint: %s" % same)
    for asynchronous in (False, True):
        output, wall = runs[asynchronous]
        ms = [float(m) for step, m in PROGRESS.findall(output) if int(step) in beside]
        print("%-6s wall %6.1f s; ms/step of steps %s: mean %.0f (%s)" % (
            "async" if asynchronous else "sync", wall, ",".join(str(s) for s in sorted(beside)),
            statistics.mean(ms) if ms else float("nan"), ", ".join("%.0f" % m for m in ms)))


if __name__ == "__main__":
    main()
