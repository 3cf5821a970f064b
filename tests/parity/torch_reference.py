#!/usr/bin/python3
"""An independent PyTorch model of kiln's GPT-2 and Llama-style transformers.

Run by tests/torch_parity_test.cpp as `/usr/bin/python3 torch_reference.py DIR`, and by
tests/hf_export_parity_test.cpp as `torch_reference.py --hf MODEL_DIR DIR` (see hf_main).
DIR holds manifest.json (config, parameter names and shapes, which of them train, the LoRA
scale and dropout, optimizer settings),
params/NAME.bin (fp32 little-endian, vocabulary padding left out), tokens.bin and
targets.bin (int32 [batch, seq_len]; a target < 0 is masked). It writes:
  logits.bin        fp32 [batch * seq_len, vocab_size] of the first forward
  grads/NAME.bin    fp32, the gradient of the mean loss for every parameter
  result.json       {"loss", "mtp_losses": each multi-token prediction depth's mean loss,
                     "losses": 10 training losses + the loss after the last step (the
                     next-token loss; the steps train on the objective with L_MTP),
                     "grad_norms": the norm before clipping at each step}

Written from the model description (pre-norm blocks, LayerNorm/GELU-tanh/learned
positions/tied head for GPT-2; RMSNorm/SwiGLU/RoPE/GQA/untied head for Llama; Mixtral's
top-k softmax router over SwiGLU experts; Qwen3's RMSNorm of each query and key head before
RoPE (transformers' Qwen3Attention); DeepSeek-V3's multi-head latent attention
(transformers' DeepseekV3Attention, latent_attention below) and multi-token prediction (the
DeepSeek-V3 report's modules, in forward); LoRA as PEFT's LoraLayer computes it, each adapted
projection's output plus scale * B(A(dropout(x))), the manifest's lora_dropout naming the
masks kiln draws), not from kiln's code. torch 1.13 has neither F.scaled_dot_product_attention nor F.rms_norm, so
attention and RMSNorm are spelled out.
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

from lora_dropout import keep_mask
from safetensors_io import read_safetensors


def load(path, dtype, shape):
    return torch.from_numpy(np.fromfile(path, dtype=dtype).reshape(shape).copy())


def save(path, tensor):
    tensor.detach().to(torch.float32).contiguous().numpy().astype("<f4").tofile(path)


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def rope_tables(cfg):
    """cos and sin [seq_len, d / 2]; angle = pos * theta^(-2i / d), d the dims RoPE turns:
    head_dim, or latent attention's qk_rope_head_dim."""
    hd, T = cfg.get("qk_rope_head_dim") or cfg["head_dim"], cfg["seq_len"]
    i = torch.arange(hd // 2, dtype=torch.float64)
    inv_freq = cfg["rope_theta"] ** (-2.0 * i / hd)
    scaling = cfg.get("rope_scaling")
    if scaling:  # Hugging Face's rope_type "llama3" (Llama 3.1), as transformers computes it
        factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
        original = scaling["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > original / low, inv_freq / factor, inv_freq)
        smooth = (original / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < original / high) & ~(wavelen > original / low)
        inv_freq = torch.where(medium, smoothed, scaled)
    factor = 1.0
    yarn = cfg.get("yarn")
    if yarn:  # Hugging Face's rope_type "yarn" (YaRN; DeepSeek-V3's long context)
        s, original = yarn["factor"], yarn["original_max_position_embeddings"]

        def correction_dim(rotations):
            return hd * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(cfg["rope_theta"]))

        low = max(math.floor(correction_dim(yarn["beta_fast"])), 0)
        high = min(math.ceil(correction_dim(yarn["beta_slow"])), hd - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(hd // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        inv_freq = inv_freq / s * ramp + inv_freq * (1 - ramp)
        factor = yarn_mscale(s, yarn["mscale"]) / yarn_mscale(s, yarn["mscale_all_dim"])
    angle = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return (factor * torch.cos(angle)).float(), (factor * torch.sin(angle)).float()


def yarn_mscale(scale, mscale):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def apply_rope(x, cos, sin):
    """x [B, heads, T, hd]; rotate-half: pairs (i, i + hd/2)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[: x.shape[2]], sin[: x.shape[2]]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def causal_attention(q, k, v, window=None):
    """q [B, H, T, hd], k and v [B, H, T, hd]: softmax(q k^T / sqrt(hd)) v, causal; with a
    sliding window (Mistral's), query i sees only the keys j with i - window < j."""
    T, hd = q.shape[2], q.shape[3]
    scores = q @ k.transpose(-1, -2) / math.sqrt(hd)
    masked = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
    if window:
        masked |= torch.ones(T, T, dtype=torch.bool).tril(diagonal=-window)
    scores = scores.masked_fill(masked, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def latent_attention(cfg, P, pre, x, cos, sin):
    """DeepSeek-V3's multi-head latent attention over x [B, T, C] (transformers'
    DeepseekV3Attention, with the rotate-half RoPE pairing): the query from its latent
    (q_lora_rank > 0) or from x, the keys' unturned part and the values from the key/value
    latent, one RoPE key for every head; heads of qk_nope + qk_rope, softmax scaled by
    1 / sqrt(qk_nope + qk_rope), values v_head_dim wide. kiln's layout: one down-projection
    whose rows are [query latent | key/value latent | RoPE key]; each up-projection's rows head
    by head, [nope | rope] for the query, [key nope | value] for the keys and values."""
    B, T, _ = x.shape
    H, rq, rkv = cfg["n_head"], cfg["q_lora_rank"], cfg["kv_lora_rank"]
    dn, dr, dv, eps = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"], cfg["norm_eps"]
    down = F.linear(x, P[pre + "down.weight"])
    q_latent, kv_latent, k_rope = down.split([rq, rkv, dr], dim=-1)
    if rq > 0:
        q = F.linear(rms_norm(q_latent, P[pre + "q_norm.weight"], eps), P[pre + "q_up.weight"])
    else:
        q = F.linear(x, P[pre + "q.weight"])
    kv = F.linear(rms_norm(kv_latent, P[pre + "kv_norm.weight"], eps), P[pre + "kv_up.weight"])
    q = q.view(B, T, H, dn + dr).transpose(1, 2)
    kv = kv.view(B, T, H, dn + dv).transpose(1, 2)
    q_nope, q_rope = q.split([dn, dr], dim=-1)
    k_nope, v = kv.split([dn, dv], dim=-1)
    k_rope = apply_rope(k_rope.view(B, 1, T, dr), cos, sin).expand(B, H, T, dr)
    q = torch.cat([q_nope, apply_rope(q_rope, cos, sin)], dim=-1)
    k = torch.cat([k_nope, k_rope], dim=-1)
    yarn = cfg.get("yarn")
    if yarn and yarn["mscale_all_dim"]:  # DeepSeek's softmax scale times mscale^2, on the queries
        q = q * yarn_mscale(yarn["factor"], yarn["mscale_all_dim"]) ** 2
    out = causal_attention(q, k, v).transpose(1, 2).reshape(B, T, H * dv)
    return F.linear(out, P[pre + "proj.weight"])


def softmax_route(cfg, P, pre, flat):
    """Mixtral's and Qwen3-MoE's router over flat [N, C]: softmax scores, the top_k experts of
    each token, their scores divided by their sum unless normalize_top_k is false (Qwen3-MoE's
    norm_topk_prob). Returns gates and experts, [N, top_k] each."""
    probs = torch.softmax(F.linear(flat, P[pre + "router.weight"]), dim=-1)
    gates, chosen = probs.topk(cfg["top_k"], dim=-1)
    if cfg.get("normalize_top_k", True):
        gates = gates / gates.sum(dim=-1, keepdim=True)
    return gates, chosen


def selection_bias(cfg, pre, E):
    """A block's selection bias [E] (DeepSeek-V3's e_score_correction_bias): cfg's
    "expert_bias", by block number as a string, as kiln's checkpoints key it (layer L's "L";
    multi-token prediction module k's block, pre "mtp.<k-1>.", n_layer + k - 1's), zeros where
    none."""
    kind, index = pre.split(".")[:2]
    block = int(index) + (cfg["n_layer"] if kind == "mtp" else 0)
    bias = (cfg.get("expert_bias") or {}).get(str(block))
    return torch.zeros(E) if bias is None else torch.as_tensor(bias, dtype=torch.float32)


def sigmoid_route(cfg, P, pre, flat):
    """DeepSeek-V3's router (transformers' DeepseekV3TopkRouter) over flat [N, C]: sigmoid
    scores s; the choice by s + bias (the selection bias weighs no output): the experts cut
    into route_groups groups of consecutive experts, each group scored by the sum of its two
    best s + bias, the route_groups_topk best groups kept, every expert of the others counted
    as 0 (transformers' masked_fill), the top_k of all; the gates the chosen experts' s,
    divided by their sum when normalize_top_k (plus transformers' 1e-20), times gate_scale
    (routed_scaling_factor). Returns gates and experts, [N, top_k] each."""
    E, G = cfg["num_experts"], cfg.get("route_groups", 1)
    scores = torch.sigmoid(F.linear(flat, P[pre + "router.weight"]))
    biased = scores + selection_bias(cfg, pre, E)[None, :]
    group_scores = biased.view(-1, G, E // G).topk(2, dim=-1)[0].sum(dim=-1)
    groups = group_scores.topk(cfg.get("route_groups_topk", 1), dim=-1)[1]
    kept = torch.zeros_like(group_scores).scatter(1, groups, 1.0).bool()
    kept = kept[:, :, None].expand(-1, G, E // G).reshape(-1, E)
    chosen = biased.masked_fill(~kept, 0.0).topk(cfg["top_k"], dim=-1)[1]
    gates = scores.gather(1, chosen)
    if cfg.get("normalize_top_k", True):
        gates = gates / (gates.sum(dim=-1, keepdim=True) + 1e-20)
    return gates * cfg.get("gate_scale", 1.0), chosen


def sparse_moe(cfg, P, pre, x):
    """A sparse MLP over x [B, T, C]: the router's gates and experts (softmax_route, or
    sigmoid_route when cfg's "score" is "sigmoid"), each expert a SwiGLU, the outputs weighed
    by the gates and summed; with shared experts (DeepSeek's), one SwiGLU every token takes
    added, as wide as all of them. The experts are stacked as kiln stacks them: fc [E * 2F, C]
    with expert e's [gate | up] rows at [2eF, 2(e+1)F), proj [E * C, F] with its rows at
    [eC, (e+1)C); the shared experts' shared.fc [2S, C] rows [gate | up], shared.proj [C, S]."""
    E, Fe, C = cfg["num_experts"], cfg["expert_ffn"], x.shape[-1]
    flat = x.reshape(-1, C)
    route = sigmoid_route if cfg.get("score") == "sigmoid" else softmax_route
    gates, chosen = route(cfg, P, pre, flat)
    fc = P[pre + "experts.fc.weight"].view(E, 2 * Fe, C)
    proj = P[pre + "experts.proj.weight"].view(E, C, Fe)
    out = torch.zeros_like(flat)
    for e in range(E):
        token, choice = (chosen == e).nonzero(as_tuple=True)
        if token.numel() == 0:
            continue
        gate, up = F.linear(flat[token], fc[e]).split(Fe, dim=-1)
        y = F.linear(F.silu(gate) * up, proj[e])
        out = out.index_add(0, token, y * gates[token, choice].unsqueeze(-1))
    if pre + "shared.fc.weight" in P:
        gate, up = F.linear(flat, P[pre + "shared.fc.weight"]).chunk(2, dim=-1)
        out = out + F.linear(F.silu(gate) * up, P[pre + "shared.proj.weight"])
    return out.view_as(x)


def forward(cfg, P, tokens, mtp_logits=None):
    """Logits [B, T, vocab_size] from parameters P (a dict of float32 tensors); with a list
    mtp_logits, the multi-token prediction modules' logits appended to it, depth by depth."""
    llama = cfg["arch"] == "llama"
    B, T = tokens.shape
    H, KV, hd, C = cfg["n_head"], cfg["n_kv_head"], cfg["head_dim"], cfg["d_model"]
    eps = cfg["norm_eps"]

    def norm(x, prefix):
        if llama:
            return rms_norm(x, P[prefix + ".weight"], eps)
        return F.layer_norm(x, (C,), P[prefix + ".weight"], P[prefix + ".bias"], eps)

    drop = cfg.get("lora_dropout")

    def lora_input(x, adapter):
        """x as PEFT's lora_dropout hands it to the adapter in training: torch.nn.Dropout's
        inverted dropout (the mask scaled by 1 / (1 - p), then multiplied in), with the mask
        kiln draws (lora_dropout.py)."""
        if not drop:
            return x
        keep = keep_mask(adapter, drop["p"], drop["seed"], drop["first_sample"], B, T, x.shape[-1])
        return x * (torch.from_numpy(keep).to(x.dtype) / (1 - drop["p"]))

    def linear(x, prefix, parts=(None,)):
        """A (possibly fused) projection; parts: the LoRA target of each equal-or-listed
        output segment, whose adapter prefix.TARGET.lora_a / lora_b adds
        scale * B(A(dropout(x)))."""
        y = F.linear(x, P[prefix + ".weight"], P.get(prefix + ".bias"))
        widths = [y.shape[-1]] if len(parts) == 1 else parts_widths[prefix.split(".", 2)[2]]
        segments = list(y.split(widths, dim=-1))
        for i, target in enumerate(parts):
            name = "%s.%s.lora_" % (prefix, target)
            if name + "a" in P:
                a = F.linear(lora_input(x, "%s.%s" % (prefix, target)), P[name + "a"])
                segments[i] = segments[i] + cfg["lora_scale"] * F.linear(a, P[name + "b"])
        return torch.cat(segments, dim=-1)

    parts_widths = {"attn.qkv": [H * hd, KV * hd, KV * hd], "mlp.fc": [cfg["d_ff"]] * 2}

    def self_attention(x, pre):
        """Fused projection, rows = query heads, key heads, value heads."""
        qkv = linear(norm(x, pre + "norm1"), pre + "attn.qkv", ("q", "k", "v"))
        q, k, v = qkv.split([H * hd, KV * hd, KV * hd], dim=-1)
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, KV, hd).transpose(1, 2)
        v = v.view(B, T, KV, hd).transpose(1, 2)
        if cfg.get("qk_norm"):  # Qwen3: each query and key head RMS-normalised, before RoPE
            q = rms_norm(q, P[pre + "attn.q_norm.weight"], eps)
            k = rms_norm(k, P[pre + "attn.k_norm.weight"], eps)
        if llama:
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        # Grouped-query: query head h reads key/value head h // (H / KV).
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        attn = causal_attention(q, k, v, cfg.get("sliding_window")).transpose(1, 2).reshape(B, T, H * hd)
        return linear(attn, pre + "attn.proj", ("o",))

    x = P["wte"][tokens]
    if not llama:
        x = x + P["wpe"][:T][None]
    cos, sin = rope_tables(cfg) if llama else (None, None)

    def block(x, pre):
        if cfg.get("attention") == "mla":
            x = x + latent_attention(cfg, P, pre + "attn.", norm(x, pre + "norm1"), cos, sin)
        else:
            x = x + self_attention(x, pre)
        # MLP: GELU (tanh) for GPT-2, SwiGLU with [gate | up] rows for Llama, Mixtral's
        # experts where the layer has them.
        if pre + "moe.router.weight" in P:
            return x + sparse_moe(cfg, P, pre + "moe.", norm(x, pre + "norm2"))
        h = linear(norm(x, pre + "norm2"), pre + "mlp.fc", ("gate", "up") if llama else ("fc",))
        if llama:
            gate, up = h.split(cfg["d_ff"], dim=-1)
            h = F.silu(gate) * up
        else:
            h = gelu_tanh(h)
        return x + linear(h, pre + "mlp.proj", ("down",))

    for layer in range(cfg["n_layer"]):
        x = block(x, "layers.%d." % layer)

    h = norm(x, "final_norm")
    head = P["wte"] if cfg["tie_embeddings"] else P["lm_head.weight"]
    logits = h @ head.t()
    # DeepSeek-V3's multi-token prediction (its report, section 2.2): module k reads at
    # position i the last depth's h and the embedding of token i + k (past the row: token 0,
    # whose target is masked), normalised apart and projected together, [e | h] in Megatron's
    # order, then one block and its own final norm; the shared head gives token i + k + 1.
    for k in range(1, cfg.get("mtp_depth", 0) + 1 if mtp_logits is not None else 1):
        pre = "mtp.%d." % (k - 1)
        ahead = torch.zeros_like(tokens)
        ahead[:, :T - k] = tokens[:, k:]
        e = rms_norm(P["wte"][ahead], P[pre + "enorm.weight"], eps)
        x = F.linear(torch.cat([e, rms_norm(h, P[pre + "hnorm.weight"], eps)], dim=-1), P[pre + "eh_proj.weight"])
        h = norm(block(x, pre), pre + "final_norm")
        mtp_logits.append(h @ head.t())
    return logits


def mean_loss(logits, targets):
    V = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-1,
                           reduction="mean")


def mtp_targets(targets, k):
    """Depth k's targets: position i's is target i + k, masked past the row."""
    ahead = torch.full_like(targets, -1)
    ahead[:, :targets.shape[1] - k] = targets[:, k:]
    return ahead


def training_loss(cfg, P, tokens, targets):
    """The objective: the mean next-token loss plus DeepSeek's L_MTP, mtp_loss_weight / D times
    the sum of every depth's summed losses over the main loss's count of targets. Also the
    main loss and each depth's mean over its own targets."""
    mtp = []
    logits = forward(cfg, P, tokens, mtp)
    main = mean_loss(logits, targets)
    total, depth_means = main, []
    count = (targets >= 0).sum()
    for k, depth_logits in enumerate(mtp, start=1):
        ahead = mtp_targets(targets, k)
        summed = F.cross_entropy(depth_logits.reshape(-1, depth_logits.shape[-1]), ahead.reshape(-1),
                                 ignore_index=-1, reduction="sum")
        total = total + cfg["mtp_loss_weight"] / len(mtp) * summed / count
        depth_means.append((summed / (ahead >= 0).sum()).item())
    return logits, total, main, depth_means


def main():
    out_dir = sys.argv[1]
    with open(os.path.join(out_dir, "manifest.json")) as f:
        cfg = json.load(f)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    B, T = cfg["batch"], cfg["seq_len"]
    tokens = load(os.path.join(out_dir, "tokens.bin"), "<i4", (B, T)).long()
    targets = load(os.path.join(out_dir, "targets.bin"), "<i4", (B, T)).long()
    targets[targets < 0] = -1

    def fresh_params():
        P = {}
        for p in cfg["params"]:
            w = load(os.path.join(out_dir, "params", p["name"] + ".bin"), "<f4", p["shape"])
            P[p["name"]] = w.float().requires_grad_(p.get("trains", True))
        return P

    # One forward and backward: logits, loss, gradients of the mean loss.
    P = fresh_params()
    logits, total, loss, mtp_losses = training_loss(cfg, P, tokens, targets)
    assert logits.dtype == torch.float32 and logits.shape[-1] == cfg["vocab_size"]
    total.backward()
    save(os.path.join(out_dir, "logits.bin"), logits.reshape(B * T, -1))
    os.makedirs(os.path.join(out_dir, "grads"), exist_ok=True)
    for name, w in P.items():
        if w.requires_grad:
            save(os.path.join(out_dir, "grads", name + ".bin"), w.grad)

    # Ten steps of torch.optim.AdamW on the same batch, clipped by clip_grad_norm_;
    # weight decay on matrices and embeddings (the manifest's decay flags) only.
    P = fresh_params()
    trained = [p for p in cfg["params"] if p.get("trains", True)]
    decay = [P[p["name"]] for p in trained if p["decay"]]
    no_decay = [P[p["name"]] for p in trained if not p["decay"]]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg["lr"][0], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["adam_eps"])
    losses, norms = [], []
    for step in range(cfg["steps"]):
        optimizer.zero_grad(set_to_none=True)
        _, total_t, loss_t, _ = training_loss(cfg, P, tokens, targets)
        total_t.backward()
        norm = torch.nn.utils.clip_grad_norm_(decay + no_decay, cfg["clip_grad"])
        for group in optimizer.param_groups:
            group["lr"] = cfg["lr"][step]
        optimizer.step()
        losses.append(loss_t.item())
        norms.append(norm.item())
    with torch.no_grad():
        losses.append(mean_loss(forward(cfg, P, tokens), targets).item())

    with open(os.path.join(out_dir, "result.json"), "w") as f:
        json.dump({"loss": loss.item(), "mtp_losses": mtp_losses, "losses": losses, "grad_norms": norms}, f,
                  indent=1)


def interleaved_to_halves(w, block, rope):
    """w's rows in blocks of `block`, the last `rope` rows of each turned by RoPE in
    interleaved pairs (2i, 2i + 1), as transformers' DeepseekV3 turns them with rope_interleave
    (apply_rotary_pos_emb_interleave: view(..., rope / 2, 2).transpose(-1, -2), then rotate-half);
    reordered once, in the weights, to the rotate-half pairs (i, i + rope / 2) that
    latent_attention turns: row i of a block's rotary part is the file's 2i, row rope / 2 + i its
    2i + 1. The attention is the same: queries' and keys' rotary dims move alike."""
    C = w.shape[-1]
    v = w.reshape(-1, block, C)
    nope, turned = v[:, : block - rope], v[:, block - rope:]
    turned = turned.reshape(-1, rope // 2, 2, C).transpose(1, 2).reshape(-1, rope, C)
    return torch.cat([nope, turned], dim=1).reshape(w.shape)


def deepseek_v3_from_hf(hf, t, P):
    """cfg of a DeepseekV3ForCausalLM folder, its weights into P under this script's names
    (transformers' DeepseekV3 modeling): latent attention's q_a_proj (q_proj without a query
    latent, q_lora_rank null), q_a_layernorm, q_b_proj (per head [nope | rope]),
    kv_a_proj_with_mqa ([key/value latent | rotary key]), kv_a_layernorm, kv_b_proj (per head
    [key nope | value]), o_proj; the first first_k_dense_replace layers a dense SwiGLU of
    intermediate_size, the rest DeepseekV3MoE: gate.weight and gate.e_score_correction_bias
    (sigmoid_route), n_routed_experts of moe_intermediate_size, shared_experts of
    moe_intermediate_size * n_shared_experts. The latent norms take eps 1e-6 in transformers
    whatever rms_norm_eps says, and latent_attention takes norm_eps: the file must say 1e-6."""
    C, H, L = hf["hidden_size"], hf["num_attention_heads"], hf["num_hidden_layers"]
    assert hf["hidden_act"] == "silu" and not hf.get("attention_bias", False)
    assert hf["rms_norm_eps"] == 1e-6 and hf.get("num_key_value_heads", H) == H
    rq, rkv = hf.get("q_lora_rank") or 0, hf["kv_lora_rank"]
    dn, dr = hf["qk_nope_head_dim"], hf["qk_rope_head_dim"]
    scaling = hf.get("rope_scaling") or {}
    yarn = None
    if scaling.get("rope_type", scaling.get("type")) == "yarn":
        yarn = {"factor": scaling["factor"],
                "original_max_position_embeddings": scaling["original_max_position_embeddings"],
                "beta_fast": scaling.get("beta_fast") or 32, "beta_slow": scaling.get("beta_slow") or 1,
                "mscale": scaling.get("mscale") or 0, "mscale_all_dim": scaling.get("mscale_all_dim") or 0}
        # transformers before 5 take the factor as max_position_embeddings / original context.
        assert yarn["factor"] * yarn["original_max_position_embeddings"] == hf["max_position_embeddings"]
        # rope_tables takes the table's factor as mscale / mscale_all_dim, as transformers does
        # when both are set; the other cases it does not follow.
        assert yarn["mscale"] and yarn["mscale_all_dim"]
    else:
        assert not scaling
    experts = hf.get("n_routed_experts")
    first_sparse = hf["first_k_dense_replace"] if experts else L
    cfg = {"arch": "llama", "attention": "mla", "n_layer": L, "n_head": H, "n_kv_head": H,
           "head_dim": dn + dr, "d_model": C, "d_ff": hf["intermediate_size"],
           "vocab_size": hf["vocab_size"], "seq_len": hf["max_position_embeddings"],
           "rope_theta": hf["rope_theta"], "rope_scaling": None, "yarn": yarn,
           "norm_eps": hf["rms_norm_eps"], "tie_embeddings": hf.get("tie_word_embeddings", False),
           "q_lora_rank": rq, "kv_lora_rank": rkv, "qk_nope_head_dim": dn, "qk_rope_head_dim": dr,
           "v_head_dim": hf["v_head_dim"],
           "num_experts": experts, "top_k": hf.get("num_experts_per_tok"),
           "expert_ffn": hf.get("moe_intermediate_size"), "score": "sigmoid",
           "normalize_top_k": hf.get("norm_topk_prob"), "gate_scale": hf.get("routed_scaling_factor"),
           "route_groups": hf.get("n_group"), "route_groups_topk": hf.get("topk_group"),
           "expert_bias": {}}
    interleaved = hf.get("rope_interleave", True)

    def turned(w, block):
        return interleaved_to_halves(w, block, dr) if interleaved else w

    P["wte"] = t("model.embed_tokens.weight")
    for layer in range(L):
        m, k = "model.layers.%d." % layer, "layers.%d." % layer
        attn, mlp = m + "self_attn.", m + "mlp."
        P[k + "norm1.weight"] = t(m + "input_layernorm.weight")
        kv_down = turned(t(attn + "kv_a_proj_with_mqa.weight"), rkv + dr)
        if rq:
            P[k + "attn.down.weight"] = torch.cat([t(attn + "q_a_proj.weight"), kv_down])
            P[k + "attn.q_norm.weight"] = t(attn + "q_a_layernorm.weight")
            P[k + "attn.q_up.weight"] = turned(t(attn + "q_b_proj.weight"), dn + dr)
        else:
            P[k + "attn.down.weight"] = kv_down
            P[k + "attn.q.weight"] = turned(t(attn + "q_proj.weight"), dn + dr)
        P[k + "attn.kv_norm.weight"] = t(attn + "kv_a_layernorm.weight")
        P[k + "attn.kv_up.weight"] = t(attn + "kv_b_proj.weight")
        P[k + "attn.proj.weight"] = t(attn + "o_proj.weight")
        P[k + "norm2.weight"] = t(m + "post_attention_layernorm.weight")
        if layer < first_sparse:
            P[k + "mlp.fc.weight"] = torch.cat([t(mlp + "gate_proj.weight"), t(mlp + "up_proj.weight")])
            P[k + "mlp.proj.weight"] = t(mlp + "down_proj.weight")
            continue
        names = [mlp + "experts.%d." % e for e in range(experts)]
        P[k + "moe.router.weight"] = t(mlp + "gate.weight")
        cfg["expert_bias"][str(layer)] = t(mlp + "gate.e_score_correction_bias").tolist()
        P[k + "moe.experts.fc.weight"] = torch.cat(
            [torch.cat([t(w + "gate_proj.weight"), t(w + "up_proj.weight")]) for w in names])
        P[k + "moe.experts.proj.weight"] = torch.cat([t(w + "down_proj.weight") for w in names])
        shared = mlp + "shared_experts."
        P[k + "moe.shared.fc.weight"] = torch.cat([t(shared + "gate_proj.weight"), t(shared + "up_proj.weight")])
        P[k + "moe.shared.proj.weight"] = t(shared + "down_proj.weight")
    P["final_norm.weight"] = t("model.norm.weight")
    return cfg


def params_from_hf(model_dir):
    """cfg and P (this script's names) from a Hugging Face folder that `kiln export` wrote,
    read the way transformers reads GPT2LMHeadModel, LlamaForCausalLM (and Qwen2's, Qwen3's
    and Mistral's classes, which share its names), MixtralForCausalLM, Qwen3MoeForCausalLM and
    DeepseekV3ForCausalLM (deepseek_v3_from_hf):
    GPT-2's Conv1D
    computes x @ W + b with W stored [in, out], so F.linear's weight is W^T, and c_attn's
    output is q, k, v of n_embd each; Llama's q/k/v_proj and gate/up_proj are separate
    F.linear weights, stacked here into the fused forms forward() takes, and so are Mixtral's
    per-expert w1, w3 and w2."""
    with open(os.path.join(model_dir, "config.json")) as f:
        hf = json.load(f)
    tensors = read_safetensors(os.path.join(model_dir, "model.safetensors"))

    def t(name):
        return torch.from_numpy(tensors.pop(name)).float()

    P = {}
    if hf["model_type"] == "gpt2":
        C, H = hf["n_embd"], hf["n_head"]
        cfg = {"arch": "gpt2", "n_layer": hf["n_layer"], "n_head": H, "n_kv_head": H,
               "head_dim": C // H, "d_model": C, "d_ff": hf["n_inner"] or 4 * C,
               "vocab_size": hf["vocab_size"], "seq_len": hf["n_positions"],
               "norm_eps": hf["layer_norm_epsilon"],
               "tie_embeddings": hf.get("tie_word_embeddings", True)}
        assert hf["activation_function"] in ("gelu_new", "gelu_pytorch_tanh")
        P["wte"], P["wpe"] = t("transformer.wte.weight"), t("transformer.wpe.weight")
        for layer in range(cfg["n_layer"]):
            h, k = "transformer.h.%d." % layer, "layers.%d." % layer
            for ours, theirs in (("norm1", "ln_1"), ("norm2", "ln_2")):
                P[k + ours + ".weight"] = t(h + theirs + ".weight")
                P[k + ours + ".bias"] = t(h + theirs + ".bias")
            for ours, theirs in (("attn.qkv", "attn.c_attn"), ("attn.proj", "attn.c_proj"),
                                 ("mlp.fc", "mlp.c_fc"), ("mlp.proj", "mlp.c_proj")):
                P[k + ours + ".weight"] = t(h + theirs + ".weight").t().contiguous()
                P[k + ours + ".bias"] = t(h + theirs + ".bias")
        P["final_norm.weight"], P["final_norm.bias"] = t("transformer.ln_f.weight"), t("transformer.ln_f.bias")
    elif hf["model_type"] == "deepseek_v3":
        cfg = deepseek_v3_from_hf(hf, t, P)
    else:
        assert hf["model_type"] in ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe") \
            and hf["hidden_act"] == "silu"
        qwen3_moe = hf["model_type"] == "qwen3_moe"
        C, H = hf["hidden_size"], hf["num_attention_heads"]
        cfg = {"arch": "llama", "n_layer": hf["num_hidden_layers"], "n_head": H,
               "n_kv_head": hf.get("num_key_value_heads", H), "head_dim": hf.get("head_dim") or C // H,
               "d_model": C, "qk_norm": hf["model_type"] in ("qwen3", "qwen3_moe"),
               "sliding_window": hf.get("sliding_window"),
               "d_ff": hf["intermediate_size"], "vocab_size": hf["vocab_size"],
               "seq_len": hf["max_position_embeddings"], "rope_theta": hf["rope_theta"],
               "rope_scaling": hf.get("rope_scaling"), "norm_eps": hf["rms_norm_eps"],
               "tie_embeddings": hf.get("tie_word_embeddings", False),
               "num_experts": hf.get("num_experts" if qwen3_moe else "num_local_experts"),
               "top_k": hf.get("num_experts_per_tok"),
               "expert_ffn": hf["moe_intermediate_size" if qwen3_moe else "intermediate_size"],
               "normalize_top_k": hf.get("norm_topk_prob", False) if qwen3_moe else True}
        P["wte"] = t("model.embed_tokens.weight")
        for layer in range(cfg["n_layer"]):
            m, k = "model.layers.%d." % layer, "layers.%d." % layer
            attn, mlp = m + "self_attn.", m + "mlp."
            P[k + "norm1.weight"] = t(m + "input_layernorm.weight")
            P[k + "attn.qkv.weight"] = torch.cat(
                [t(attn + "q_proj.weight"), t(attn + "k_proj.weight"), t(attn + "v_proj.weight")])
            if hf["model_type"] == "qwen2":  # Qwen2: biases on q, k and v (o_proj has none)
                P[k + "attn.qkv.bias"] = torch.cat(
                    [t(attn + "q_proj.bias"), t(attn + "k_proj.bias"), t(attn + "v_proj.bias")])
            if cfg["qk_norm"]:  # Qwen3: each head's RMSNorm weights, [head_dim]
                P[k + "attn.q_norm.weight"] = t(attn + "q_norm.weight")
                P[k + "attn.k_norm.weight"] = t(attn + "k_norm.weight")
            P[k + "attn.proj.weight"] = t(attn + "o_proj.weight")
            P[k + "norm2.weight"] = t(m + "post_attention_layernorm.weight")
            # Qwen3-MoE's sparse layers: those not in mlp_only_layers, every decoder_sparse_step-th
            # counting from 1; each expert's gate_proj, up_proj and down_proj under mlp.experts.
            sparse = qwen3_moe and layer not in hf.get("mlp_only_layers", []) \
                and (layer + 1) % hf.get("decoder_sparse_step", 1) == 0
            if hf["model_type"] == "mixtral" or sparse:
                moe = mlp if sparse else m + "block_sparse_moe."
                names = ("gate_proj", "up_proj", "down_proj") if sparse else ("w1", "w3", "w2")
                experts = [moe + "experts.%d." % e for e in range(cfg["num_experts"])]
                P[k + "moe.router.weight"] = t(moe + "gate.weight")
                P[k + "moe.experts.fc.weight"] = torch.cat(
                    [torch.cat([t(w + names[0] + ".weight"), t(w + names[1] + ".weight")]) for w in experts])
                P[k + "moe.experts.proj.weight"] = torch.cat([t(w + names[2] + ".weight") for w in experts])
                continue
            P[k + "mlp.fc.weight"] = torch.cat([t(mlp + "gate_proj.weight"), t(mlp + "up_proj.weight")])
            P[k + "mlp.proj.weight"] = t(mlp + "down_proj.weight")
        P["final_norm.weight"] = t("model.norm.weight")
    if not cfg["tie_embeddings"]:
        P["lm_head.weight"] = t("lm_head.weight")
    assert not tensors, "tensors left unread: %s" % sorted(tensors)
    return cfg, P


def hf_main(model_dir, out_dir):
    """Loss and logits of an exported model on DIR's tokens.bin and targets.bin ([batch,
    seq_len] int32, manifest.json giving both): DIR/hf_result.json and DIR/hf_logits.bin."""
    with open(os.path.join(out_dir, "manifest.json")) as f:
        shape = json.load(f)
    torch.set_num_threads(1)
    B, T = shape["batch"], shape["seq_len"]
    tokens = load(os.path.join(out_dir, "tokens.bin"), "<i4", (B, T)).long()
    targets = load(os.path.join(out_dir, "targets.bin"), "<i4", (B, T)).long()
    targets[targets < 0] = -1
    cfg, P = params_from_hf(model_dir)
    with torch.no_grad():
        logits = forward(cfg, P, tokens)
        loss = mean_loss(logits, targets)
    save(os.path.join(out_dir, "hf_logits.bin"), logits.reshape(B * T, -1))
    with open(os.path.join(out_dir, "hf_result.json"), "w") as f:
        json.dump({"loss": loss.item()}, f, indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "--hf":
        hf_main(sys.argv[2], sys.argv[3])
    else:
        main()
