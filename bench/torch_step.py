#!/usr/bin/python3
"""The PyTorch peer of build/kiln_bench_step: one training step of the same config, timed.

  /usr/bin/python3 bench/torch_step.py [--config FILE] [--set section.key=value ...]
                                       [--min-time SECONDS] [--json]

The model is tests/parity/torch_reference.py's (an independent PyTorch implementation of
kiln's architectures), fed parameters of the shapes kiln lays out: `kiln_bench_step
--describe` with the same --config and --set resolves the config, so both sides run the
same shapes, batch, optimizer settings and thread count (backend.threads; 0 = every core).

One step = zero_grad; forward and backward over each micro-batch of the global batch (loss
divided by the number of micro-batches); clip_grad_norm_ (train.clip_grad); AdamW step,
weight decay on matrices and embeddings only. fp32 on the CPU, seeded random tokens. One
warm-up step, then steps until --min-time seconds have passed (at least 3); prints tokens/s.
"""
import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent


def load_reference():
    path = ROOT / "tests" / "parity" / "torch_reference.py"
    sys.path.insert(0, str(path.parent))  # for the reference's own import of safetensors_io
    spec = importlib.util.spec_from_file_location("torch_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # The reference spells GELU (tanh) out as six elementwise ops, for readability; the
    # peer of a speed test uses PyTorch's fused kernel for the same function.
    module.gelu_tanh = lambda x: F.gelu(x, approximate="tanh")
    return module


def describe(binary, config, overrides):
    command = [str(binary)] + (["--config", config] if config else [])
    for assignment in overrides:
        command += ["--set", assignment]
    result = subprocess.run(command + ["--describe"], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("torch_step: %s failed:\n%s" % (" ".join(command), result.stderr))
    return json.loads(result.stdout)


def make_parameter(p, generator):
    shape = p["shape"]
    if p["init"] == "normal":
        value = torch.randn(shape, generator=generator) * p["std"]
    elif p["init"] == "ones":
        value = torch.ones(shape)
    else:
        value = torch.zeros(shape)
    return value.requires_grad_(True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="", help="kiln JSON run config")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="kiln config override section.key=value (repeatable)")
    parser.add_argument("--min-time", type=float, default=10.0, help="seconds of timed steps")
    parser.add_argument("--bench-binary", default=str(ROOT / "build" / "kiln_bench_step"))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    d = describe(args.bench_binary, args.config, args.overrides)
    ref = load_reference()
    torch.set_num_threads(d["threads"])
    cfg, train = d["model"], d["config"]["train"]

    generator = torch.Generator().manual_seed(train["seed"])
    P = {p["name"]: make_parameter(p, generator) for p in d["params"]}
    optimizer = torch.optim.AdamW(
        [{"params": [P[p["name"]] for p in d["params"] if p["decay"]],
          "weight_decay": train["weight_decay"]},
         {"params": [P[p["name"]] for p in d["params"] if not p["decay"]],
          "weight_decay": 0.0}],
        lr=train["lr"], betas=(train["beta1"], train["beta2"]), eps=train["adam_eps"])

    accum, B, T = d["grad_accum"], train["micro_batch"], cfg["seq_len"]
    batches = [(torch.randint(cfg["vocab_size"], (B, T), generator=generator),
                torch.randint(cfg["vocab_size"], (B, T), generator=generator))
               for _ in range(accum)]

    def step():
        optimizer.zero_grad(set_to_none=True)
        for tokens, targets in batches:
            loss = ref.mean_loss(ref.forward(cfg, P, tokens), targets) / accum
            loss.backward()
        if train["clip_grad"] > 0:
            torch.nn.utils.clip_grad_norm_(list(P.values()), train["clip_grad"])
        optimizer.step()

    step()  # warm-up
    steps, start = 0, time.perf_counter()
    while steps < 3 or time.perf_counter() - start < args.min_time:
        step()
        steps += 1
    seconds = (time.perf_counter() - start) / steps
    tokens_per_step = train["global_batch"] * T
    result = {"tok_per_s": tokens_per_step / seconds, "ms_per_step": seconds * 1e3,
              "steps": steps, "threads": torch.get_num_threads(), "torch": torch.__version__}
    if args.json:
        print(json.dumps(result))
    else:
        print("torch %s, %d threads: %.1f ms/step, %.0f tok/s (%d steps)"
              % (torch.__version__, result["threads"], result["ms_per_step"],
                 result["tok_per_s"], steps))


if __name__ == "__main__":
    main()
