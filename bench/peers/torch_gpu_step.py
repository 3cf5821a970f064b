#!/usr/bin/env python3
"""The PyTorch peer of kiln's GPU step benchmark: one training step of the same model, timed.

  python3 bench/peers/torch_gpu_step.py [--config FILE] [--set section.key=value ...]
      [--bench-binary build-gpu/kiln_bench_step] [--min-time SECONDS] [--warmup STEPS]
      [--compile-mode MODE] [--json]

PyTorch at its best for this model, as plain PyTorch writes it (nanoGPT's shape):
nn.Embedding, nn.Linear, F.scaled_dot_product_attention(is_causal=True), which picks the
flash or cuDNN kernels, with enable_gqa=True for grouped-query heads (no expanded copies of
the key/value heads; torch >= 2.5), LayerNorm/GELU-tanh/learned positions/tied head for GPT-2,
RMSNorm/SwiGLU/RoPE for Llama; the whole model and its loss under torch.compile, the products
in BF16 under torch.autocast (fp32 weights, as PyTorch's mixed precision keeps them),
torch.optim.AdamW(fused=True), clip_grad_norm_ (foreach on the GPU).

`kiln_bench_step --describe` with the same --config and --set gives the shapes, batch,
optimizer settings, initialisation and FLOP counts, so both sides run the same model: every
parameter here has kiln's name and shape (checked), and the vocabulary is padded as kiln pads
it (the padded logits are computed, the loss reads the first vocab_size).

One step = zero_grad; forward and backward over each micro-batch (loss / micro-batches);
clip_grad_norm_ (train.clip_grad); AdamW step; torch.cuda.synchronize. --warmup steps first:
torch.compile compiles the forward and the backward once, in the first (its seconds are
reported as compile_s, counted once per case and never in the timed steps); the shapes never
change, so nothing compiles again. Then 5 steps with a synchronize after each phase for the
forward/backward/optimizer split, then steps until --min-time seconds have passed (at least
3). Tokens/s, TFLOP/s, MFU and HFU use kiln's FLOP counts and peak (trainer/model/flops.h);
peak memory is torch.cuda.max_memory_allocated over the timed steps.
"""
import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
PHASE_STEPS = 5


def describe(binary, config, overrides):
    command = [str(binary)] + (["--config", config] if config else [])
    for assignment in overrides:
        command += ["--set", assignment]
    result = subprocess.run(command + ["--describe"], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("torch_gpu_step: %s --describe failed: %s" % (" ".join(command),
                                                                result.stderr.strip()))
    return json.loads(result.stdout)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def make_norm(cfg):
    if cfg["arch"] == "llama":
        return RMSNorm(cfg["d_model"], cfg["norm_eps"])
    return nn.LayerNorm(cfg["d_model"], eps=cfg["norm_eps"])


def rope(x, cos, sin):
    """x [B, heads, T, hd], rotate-half pairing (i, i + hd/2); cos, sin [T, hd/2]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).type_as(x)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.H, self.KV, self.hd = cfg["n_head"], cfg["n_kv_head"], cfg["head_dim"]
        bias = cfg["arch"] != "llama"
        # One fused projection; its rows are the query heads, then the key and value heads.
        self.qkv = nn.Linear(cfg["d_model"], (self.H + 2 * self.KV) * self.hd, bias=bias)
        self.proj = nn.Linear(self.H * self.hd, cfg["d_model"], bias=bias)

    def forward(self, x, rope_table):
        B, T, _ = x.shape
        H, KV, hd = self.H, self.KV, self.hd
        q, k, v = self.qkv(x).split([H * hd, KV * hd, KV * hd], dim=-1)
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, KV, hd).transpose(1, 2)
        v = v.view(B, T, KV, hd).transpose(1, 2)
        if rope_table is not None:
            q, k = rope(q, *rope_table), rope(k, *rope_table)
        # Query head h reads key/value head h // (H / KV), as in kiln.
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=KV != H)
        return self.proj(y.transpose(1, 2).reshape(B, T, H * hd))


class Mlp(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.swiglu = cfg["arch"] == "llama"
        C, Fd = cfg["d_model"], cfg["d_ff"]
        self.fc = nn.Linear(C, 2 * Fd if self.swiglu else Fd, bias=not self.swiglu)
        self.proj = nn.Linear(Fd, C, bias=not self.swiglu)

    def forward(self, x):
        h = self.fc(x)
        if self.swiglu:
            gate, up = h.chunk(2, dim=-1)  # rows [gate | up], as kiln lays them out
            h = F.silu(gate) * up
        else:
            h = F.gelu(h, approximate="tanh")
        return self.proj(h)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.norm1, self.attn = make_norm(cfg), Attention(cfg)
        self.norm2, self.mlp = make_norm(cfg), Mlp(cfg)

    def forward(self, x, rope_table):
        x = x + self.attn(self.norm1(x), rope_table)
        return x + self.mlp(self.norm2(x))


class Gpt(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        C, Vp, T = cfg["d_model"], cfg["padded_vocab"], cfg["seq_len"]
        self.llama = cfg["arch"] == "llama"
        self.wte = nn.Embedding(Vp, C)
        if not self.llama:
            self.wpe = nn.Embedding(T, C)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg["n_layer"]))
        self.final_norm = make_norm(cfg)
        if not cfg["tie_embeddings"]:
            self.lm_head = nn.Linear(C, Vp, bias=False)
        if self.llama:
            hd = cfg["head_dim"]
            inv_freq = cfg["rope_theta"] ** (-2.0 * torch.arange(hd // 2, dtype=torch.float64) / hd)
            angle = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
            self.register_buffer("cos", torch.cos(angle).float(), persistent=False)
            self.register_buffer("sin", torch.sin(angle).float(), persistent=False)

    def forward(self, tokens, targets):
        T = tokens.shape[1]
        x = self.wte(tokens)
        rope_table = None
        if self.llama:
            rope_table = (self.cos[:T], self.sin[:T])
        else:
            x = x + self.wpe(torch.arange(T, device=tokens.device))
        for layer in self.layers:
            x = layer(x, rope_table)
        x = self.final_norm(x)
        head = self.wte.weight if self.cfg["tie_embeddings"] else self.lm_head.weight
        logits = F.linear(x, head)
        V, Vp = self.cfg["vocab_size"], self.cfg["padded_vocab"]
        return F.cross_entropy(logits.view(-1, Vp)[:, :V], targets.view(-1))


def kiln_name(name):
    """This model's parameter name in kiln's terms ("wte.weight" -> "wte")."""
    return {"wte.weight": "wte", "wpe.weight": "wpe"}.get(name, name)


def init_like_kiln(model, params):
    """kiln's shapes (padding rows aside) and initialisation for every parameter; fails on
    any parameter one side has and the other lacks."""
    described = {p["name"]: p for p in params}
    mine = {kiln_name(name): w for name, w in model.named_parameters()}
    if set(mine) != set(described):
        sys.exit("torch_gpu_step: parameters differ from kiln's: only here %s, only in kiln %s"
                 % (sorted(set(mine) - set(described)), sorted(set(described) - set(mine))))
    with torch.no_grad():
        for name, w in mine.items():
            p = described[name]
            rows = p["shape"][0]
            if list(w.shape[1:]) != p["shape"][1:] or w.shape[0] < rows:
                sys.exit("torch_gpu_step: %s is %s here, %s in kiln" % (name, list(w.shape),
                                                                       p["shape"]))
            w.zero_()  # rows past kiln's (vocabulary padding) stay zero, as in kiln
            if p["init"] == "normal":
                w[:rows].normal_(0.0, p["std"])
            elif p["init"] == "ones":
                w[:rows].fill_(1.0)
    return sum(math.prod(p["shape"]) for p in params)


def grad_scaler(enabled):
    """Loss scaling, for fp16 only (a no-op when not enabled)."""
    if hasattr(torch.amp, "GradScaler"):  # torch >= 2.3
        return torch.amp.GradScaler("cuda", enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="", help="kiln JSON run config")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="kiln config override section.key=value (repeatable)")
    parser.add_argument("--bench-binary", default=str(ROOT / "build" / "kiln_bench_step"))
    parser.add_argument("--min-time", type=float, default=10.0, help="seconds of timed steps")
    parser.add_argument("--warmup", type=int, default=2,
                        help="untimed steps first, at least 1 (the first compiles)")
    parser.add_argument("--compile-mode", default=None,
                        help="torch.compile's mode (default: its default; max-autotune-no-"
                             "cudagraphs searches GEMM kernels, minutes more per case)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.warmup < 1:
        parser.error("--warmup must be at least 1: the first step compiles")
    if not torch.cuda.is_available():
        sys.exit("torch_gpu_step: torch %s sees no CUDA GPU" % torch.__version__)

    d = describe(args.bench_binary, args.config, args.overrides)
    cfg, train = d["model"], d["config"]["train"]
    dtype = d["config"]["precision"]["dtype"]
    device = torch.device("cuda")
    torch.manual_seed(train["seed"])

    with device:  # built and initialised on the GPU
        model = Gpt(cfg)
    n_params = init_like_kiln(model, d["params"])
    # Weight decay on matrices and embeddings, not on norms and biases (kiln's rule).
    decay = [w for w in model.parameters() if w.dim() >= 2]
    no_decay = [w for w in model.parameters() if w.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": train["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=train["lr"], betas=(train["beta1"], train["beta2"]), eps=train["adam_eps"],
        fused=True)
    compiled = torch.compile(model, mode=args.compile_mode)
    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype)
    scaler = grad_scaler(enabled=dtype == "fp16")

    accum, B, T = d["grad_accum"], train["micro_batch"], cfg["seq_len"]
    generator = torch.Generator(device=device).manual_seed(train["seed"])
    batches = [tuple(torch.randint(cfg["vocab_size"], (B, T), generator=generator, device=device)
                     for _ in range(2)) for _ in range(accum)]

    def step(split=None):
        mark = time.perf_counter()

        def lap(phase):
            nonlocal mark
            if split is not None:
                torch.cuda.synchronize()
                now = time.perf_counter()
                split[phase] += now - mark
                mark = now

        optimizer.zero_grad(set_to_none=True)
        for tokens, targets in batches:
            with torch.autocast("cuda", dtype=autocast_dtype or torch.bfloat16,
                                enabled=autocast_dtype is not None):
                loss = compiled(tokens, targets) / accum
            lap("fwd")
            scaler.scale(loss).backward()
            lap("bwd")
        scaler.unscale_(optimizer)
        if train["clip_grad"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), train["clip_grad"])
        scaler.step(optimizer)
        scaler.update()
        torch.cuda.synchronize()
        lap("opt")

    start = time.perf_counter()
    step()
    compile_s = time.perf_counter() - start
    for _ in range(args.warmup - 1):
        step()
    warmup_s = time.perf_counter() - start
    split = {"fwd": 0.0, "bwd": 0.0, "opt": 0.0}
    for _ in range(PHASE_STEPS):
        step(split)
    torch.cuda.reset_peak_memory_stats()
    steps, start = 0, time.perf_counter()
    while steps < 3 or time.perf_counter() - start < args.min_time:
        step()
        steps += 1
    seconds = (time.perf_counter() - start) / steps

    tokens_per_s = train["global_batch"] * T / seconds
    model_flops = d["model_flops_per_token"]
    hardware_flops = model_flops + d["recomputed_flops_per_token"]
    peak = d["peak_flops"]
    result = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "dtype": dtype,
        "params": n_params,
        "tokens_per_s": tokens_per_s,
        "ms_per_step": seconds * 1e3,
        "steps": steps,
        "tflops": tokens_per_s * model_flops / 1e12,
        "mfu": tokens_per_s * model_flops / peak if peak > 0 else None,
        "hfu": tokens_per_s * hardware_flops / peak if peak > 0 else None,
        "peak_mem_bytes": torch.cuda.max_memory_allocated(),
        "reserved_mem_bytes": torch.cuda.max_memory_reserved(),
        "fwd_ms": split["fwd"] * 1e3 / PHASE_STEPS,
        "bwd_ms": split["bwd"] * 1e3 / PHASE_STEPS,
        "opt_ms": split["opt"] * 1e3 / PHASE_STEPS,
        "compile_mode": args.compile_mode or "default",
        "compile_s": compile_s,
        "warmup_s": warmup_s,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print("torch %s on %s, %s: %.1f ms/step, %.0f tok/s, %.1f TFLOP/s, MFU %s, peak %.2f GiB"
              % (result["torch"], result["device"], dtype, result["ms_per_step"], tokens_per_s,
                 result["tflops"], "%.1f%%" % (100 * result["mfu"]) if peak > 0 else "n/a",
                 result["peak_mem_bytes"] / 2**30))


if __name__ == "__main__":
    main()
