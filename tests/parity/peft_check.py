#!/usr/bin/python3
"""A PEFT LoRA folder that `kiln export --adapter` wrote, loaded by PEFT's own rules on top
of its base, with no part of kiln's importer: `peft` itself is not installable here, so this
reads the folder as PeftModel.from_pretrained(base, folder) does and fails where it would.

Run by tests/peft_adapter_parity_test.cpp as `peft_check.py BASE ADAPTER DIR`: BASE is a
Hugging Face Llama-family folder (`kiln export` of the base), ADAPTER the PEFT folder, DIR
holds manifest.json ({"batch", "seq_len"}) and tokens.bin (int32 [batch, seq_len]). It checks

  adapter_config.json  peft_type LORA, task_type CAUSAL_LM, an integer r > 0, lora_alpha,
                       lora_dropout in [0, 1), a list of target_modules, bias "none",
                       use_rslora, use_dora and fan_in_fan_out false (the scale is then
                       lora_alpha / r), and a base_model_name_or_path key (null: the caller
                       names the base);
  the tensors          each key base_model.model.<module>.lora_A.weight or .lora_B.weight
                       (PEFT saves them without the adapter's name), <module> a module of the
                       base (its <module>.weight is in BASE's weights) whose last name is one
                       of target_modules, A [r, in] and B [out, r] for that weight's
                       [out, in]; both factors of every such module of the base (PEFT adapts
                       every module the targets name), nothing else;

and writes DIR/peft_logits.bin (fp32 [batch * seq_len, vocab]) of the base plus every
adapter as PEFT's LoraLayer computes it in evaluation (dropout off):
  y = base_layer(x) + (lora_alpha / r) * lora_B(lora_A(x)),
through torch_reference.py's forward of the base's family. Any failed check exits 1 with
the reason.
"""
import json
import os
import sys

import torch

from safetensors_io import read_safetensors
from torch_reference import forward, load, params_from_hf, save

# torch_reference's name of each Llama projection PEFT can adapt: its fused layer and part.
REFERENCE_ADAPTER = {"q_proj": "attn.qkv.q", "k_proj": "attn.qkv.k", "v_proj": "attn.qkv.v",
                     "o_proj": "attn.proj.o", "gate_proj": "mlp.fc.gate", "up_proj": "mlp.fc.up",
                     "down_proj": "mlp.proj.down"}


def check(condition, reason):
    if not condition:
        sys.exit("peft check: " + reason)


def read_config(adapter_dir):
    with open(os.path.join(adapter_dir, "adapter_config.json")) as f:
        c = json.load(f)
    check(c.get("peft_type") == "LORA", "peft_type is %r, not LORA" % c.get("peft_type"))
    check(c.get("task_type") == "CAUSAL_LM", "task_type is %r, not CAUSAL_LM" % c.get("task_type"))
    check(isinstance(c.get("r"), int) and c["r"] > 0, "r is %r" % c.get("r"))
    check(isinstance(c.get("lora_alpha"), (int, float)), "lora_alpha is %r" % c.get("lora_alpha"))
    check(isinstance(c.get("lora_dropout"), (int, float)) and 0 <= c["lora_dropout"] < 1,
          "lora_dropout is %r" % c.get("lora_dropout"))
    check(isinstance(c.get("target_modules"), list) and c["target_modules"], "target_modules is %r"
          % c.get("target_modules"))
    check(c.get("bias") == "none", "bias is %r" % c.get("bias"))
    for key in ("use_rslora", "use_dora", "fan_in_fan_out"):
        check(c.get(key) is False, "%s is %r" % (key, c.get(key)))
    check("base_model_name_or_path" in c, "base_model_name_or_path is missing")
    return c


def read_adapters(adapter_dir, config, base_weights):
    """{module path: (A, B)} as PEFT maps the file's keys onto the base's modules."""
    tensors = read_safetensors(os.path.join(adapter_dir, "adapter_model.safetensors"))
    prefix, targets = "base_model.model.", set(config["target_modules"])
    factors = {}
    for key, value in tensors.items():
        check(key.startswith(prefix), "%s lacks PEFT's %s prefix" % (key, prefix))
        module, dot, factor = key[len(prefix):].rpartition(".lora_")
        check(dot and factor in ("A.weight", "B.weight"), "%s is not a lora_A or lora_B weight" % key)
        check(module + ".weight" in base_weights, "%s adapts %s, which the base lacks" % (key, module))
        check(module.rsplit(".", 1)[-1] in targets, "%s adapts %s, which target_modules %s do not name"
              % (key, module, sorted(targets)))
        factors.setdefault(module, {})[factor[0]] = value
    wanted = {name[:-len(".weight")] for name in base_weights
              if name.endswith(".weight") and name[:-len(".weight")].rsplit(".", 1)[-1] in targets}
    check(set(factors) == wanted, "the adapted modules %s are not the base's targeted ones %s"
          % (sorted(factors), sorted(wanted)))
    r = config["r"]
    for module, pair in factors.items():
        check(set(pair) == {"A", "B"}, "%s has only lora_%s" % (module, "".join(pair)))
        out, into = base_weights[module + ".weight"].shape
        check(pair["A"].shape == (r, into), "%s's lora_A is %s, not [%d, %d]" % (module, pair["A"].shape, r, into))
        check(pair["B"].shape == (out, r), "%s's lora_B is %s, not [%d, %d]" % (module, pair["B"].shape, out, r))
    return {module: (pair["A"], pair["B"]) for module, pair in factors.items()}


def main(base_dir, adapter_dir, out_dir):
    config = read_config(adapter_dir)
    base_weights = read_safetensors(os.path.join(base_dir, "model.safetensors"))
    adapters = read_adapters(adapter_dir, config, base_weights)
    cfg, P = params_from_hf(base_dir)
    cfg["lora_scale"] = config["lora_alpha"] / config["r"]
    for module, (a, b) in adapters.items():
        parts = module.split(".")  # model.layers.L.<self_attn|mlp>.<projection>
        check(len(parts) == 5 and parts[:2] == ["model", "layers"] and parts[4] in REFERENCE_ADAPTER,
              "%s is no Llama projection" % module)
        name = "layers.%s.%s.lora_" % (parts[2], REFERENCE_ADAPTER[parts[4]])
        P[name + "a"], P[name + "b"] = torch.from_numpy(a).float(), torch.from_numpy(b).float()
    with open(os.path.join(out_dir, "manifest.json")) as f:
        shape = json.load(f)
    torch.set_num_threads(1)
    B, T = shape["batch"], shape["seq_len"]
    tokens = load(os.path.join(out_dir, "tokens.bin"), "<i4", (B, T)).long()
    with torch.no_grad():
        logits = forward(cfg, P, tokens)
    save(os.path.join(out_dir, "peft_logits.bin"), logits.reshape(B * T, -1))
    print("peft check: %d adapted modules, r %d, scale %g" % (len(adapters), config["r"], cfg["lora_scale"]))


if __name__ == "__main__":
    main(*sys.argv[1:4])
