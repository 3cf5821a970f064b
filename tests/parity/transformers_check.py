#!/usr/bin/python3
"""kiln's Hugging Face export, loaded by `transformers`, predicts what kiln predicts.

For a GPT-2, a Llama-style model, a Mixtral, a Qwen3-MoE and a DeepseekV3, this trains a tiny
model with `kiln train` (on the CPU, 300 steps of a generated corpus in a few seconds: enough
to learn its sentence, so the continuation has something to agree on), exports it with
`kiln export --format hf`, and then asks both sides the same two questions:

  loss        `kiln eval` over a probe dataset of one document (every target of its
              seq_len-long chunks); transformers' model over the same chunks, read from the
              dataset's own .idx and .bin files. They must agree within 1e-5 relative: the
              bound tests/hf_export_parity_test.cpp holds the export to against a PyTorch
              model written from kiln's description (measured there: 3e-8 to 1e-7), fp32
              sums in another order being all that differs.
  generation  `kiln generate --temperature 0` (greedy) from a prompt; transformers' argmax
              at each position from the same prompt. The tokens must be the same, up to a
              position where transformers' two best logits lie within 1e-4 of each other (a
              tie that fp32 sums in another order may break either way), after which the
              two continuations need not agree.

It prints a line per model and ends with `transformers check: passed` (exit 0) or
`transformers check: FAILED: ...` (exit 1). Where Python has no `torch` or no `transformers`
(Debian packages neither), kiln's side still runs (training, export, eval, generation) and
the script ends with `transformers check: skipped: ...` (exit 0): that is what CI runs
(tests/transformers_check_test.cpp).

Usage: python3 tests/parity/transformers_check.py --kiln build/kiln [--dir DIR]
"""
import argparse
import json
import os
import shlex
import struct
import subprocess
import sys
import tempfile

SEQ_LEN = 32
PROMPT = "Document 7: the"
NEW_TOKENS = SEQ_LEN - len(PROMPT)  # kiln's decoder holds seq_len tokens; no sliding window
EOD = 256  # the byte tokenizer's end of document
LOSS_TOLERANCE = 1e-5
TIE = 1e-4

COMMON = [
    "data.tokenizer=byte", "data.split=100,0,0", "model.vocab_size=257", "model.n_layer=2",
    "model.d_model=32", "model.n_head=2", f"model.seq_len={SEQ_LEN}", "train.global_batch=8",
    "train.micro_batch=4", "train.steps=300", "train.warmup=10", "train.log_interval=100",
    "train.eval_interval=0", "train.sample_tokens=0", "train.checkpoint_interval=300",
    "backend.device=cpu", "backend.threads=1",
]
LLAMA = ["model.arch=llama", "model.n_kv_head=1", "model.d_ff=48"]
MODELS = {
    "gpt2": [],
    "llama": LLAMA,
    "mixtral": LLAMA + ["moe.num_experts=4", "moe.top_k=2", "moe.ffn_hidden=24"],
    # Qwen3-MoE: normalised heads, layer 0 dense, the gates not normalised (norm_topk_prob).
    "qwen3_moe": LLAMA + ["model.qk_norm=true", "moe.num_experts=4", "moe.top_k=2", "moe.ffn_hidden=24",
                          "moe.dense_layers=1", "moe.normalize_top_k=false"],
    # DeepseekV3: latent attention (its rotary rows interleaved in the export), layer 0 dense,
    # sigmoid experts in 2 groups (each scored by its best 2 = top_k / topk_group, as both
    # compute it), a shared expert, scaled gates, and a selection bias that aux-loss-free
    # balancing moves a little (the export's e_score_correction_bias).
    "deepseek_v3": ["model.arch=llama", "model.d_ff=48", "model.attention=mla", "model.q_lora_rank=16",
                    "model.kv_lora_rank=16", "model.qk_nope_head_dim=16", "model.qk_rope_head_dim=8",
                    "model.v_head_dim=16", "model.norm_eps=1e-6", "moe.num_experts=8", "moe.top_k=2",
                    "moe.ffn_hidden=16", "moe.shared_experts=1", "moe.dense_layers=1", "moe.score=sigmoid",
                    "moe.route_groups=2", "moe.route_groups_topk=1", "moe.gate_scale=2.5",
                    "moe.bias_update_rate=0.0001"],
}


class Failed(Exception):
    pass


def run(kiln, *args):
    """Runs kiln; returns its stdout as bytes (the model's text is raw bytes on a pipe)."""
    command = [kiln, *args]
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if done.returncode != 0:
        raise Failed(f"{shlex.join(command)} exited {done.returncode}: "
                     f"{done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def prepare(kiln, text, prefix):
    with open(prefix + ".txt", "w") as f:
        f.write(text)
    run(kiln, "data", "prepare", "--input", prefix + ".txt", "--tokenizer", "byte",
        "--document-boundary", "blank-line", "--append-eod", "--output", prefix)


def first_document(prefix):
    """The token ids of a Megatron indexed dataset's first sequence (.idx and .bin)."""
    with open(prefix + ".idx", "rb") as f:
        index = f.read()
    if index[:9] != b"MMIDIDX\x00\x00":
        raise Failed(f"{prefix}.idx is not a Megatron index")
    code = index[17]
    kinds = {1: "B", 2: "b", 3: "h", 4: "i", 5: "q", 8: "H"}
    if code not in kinds:
        raise Failed(f"{prefix}.idx: token dtype code {code}")
    count, = struct.unpack_from("<Q", index, 18)
    size, = struct.unpack_from("<i", index, 34)
    pointer, = struct.unpack_from("<q", index, 34 + 4 * count)
    with open(prefix + ".bin", "rb") as f:
        data = f.read()
    return list(struct.unpack_from(f"<{size}{kinds[code]}", data, pointer)) if size else []


def kiln_side(kiln, work, arch, probe):
    """Trains, exports and asks kiln; returns the export's folder, kiln's loss and targets,
    and kiln's greedy continuation (token ids)."""
    sets = []
    for setting in COMMON + MODELS[arch] + [
            f'data.paths=["{work}/corpus"]', f"train.checkpoint_dir={work}/checkpoints"]:
        sets += ["--set", setting]
    run(kiln, "train", "--no-store", "--name", arch, *sets)
    checkpoint = f"{work}/checkpoints/{arch}"
    hf = f"{work}/hf-{arch}"
    run(kiln, "export", "--checkpoint", checkpoint, "--format", "hf", "--output", hf)
    result = json.loads(run(kiln, "eval", "--checkpoint", checkpoint, "--data", probe, "--split",
                            "train", "--micro-batch", "1", "--device", "cpu"))
    text = run(kiln, "generate", "--checkpoint", checkpoint, "--prompt", PROMPT, "--temperature",
               "0", "--max-tokens", str(NEW_TOKENS), "--device", "cpu")
    prompt = PROMPT.encode()
    if not text.startswith(prompt) or not text.endswith(b"\n"):
        raise Failed(f"{arch}: kiln generate printed {text!r}, not the prompt, its continuation "
                     f"and a newline")
    return hf, result["loss"], result["tokens"], list(text[len(prompt):-1])


def transformers_side(hf, tokens, torch, transformers):
    """transformers' loss over the probe's chunks of SEQ_LEN targets, and the model."""
    # float32 as it loads (a load in the config's dtype and a cast after would round the
    # weights); transformers 5 names the argument dtype, 4 torch_dtype.
    dtype = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    model = transformers.AutoModelForCausalLM.from_pretrained(hf, **{dtype: torch.float32})
    model.eval()
    chunks = (len(tokens) - 1) // SEQ_LEN
    total, count = 0.0, 0
    with torch.no_grad():
        for c in range(chunks):
            window = torch.tensor([tokens[c * SEQ_LEN: c * SEQ_LEN + SEQ_LEN + 1]])
            logits = model(window[:, :-1]).logits.double()
            total += torch.nn.functional.cross_entropy(
                logits[0], window[0, 1:], reduction="sum").item()
            count += SEQ_LEN
    return model, total / count, count


def compare_greedy(model, kiln_ids, torch):
    """How many of kiln's tokens transformers' argmax repeats; raises where it differs
    without a tie."""
    ids = list(PROMPT.encode())
    with torch.no_grad():
        for j, want in enumerate(kiln_ids + [EOD]):
            logits = model(torch.tensor([ids])).logits[0, -1].double()
            top = torch.topk(logits, 2)
            best = int(top.indices[0])
            if j == len(kiln_ids):
                # kiln stopped early only at the end of a document; else it used every token.
                if len(kiln_ids) < NEW_TOKENS and best != EOD:
                    raise Failed(f"kiln's continuation ended at token {j}, transformers' goes on "
                                 f"with {best}")
                return j
            if best != want:
                gap = float(top.values[0] - top.values[1])
                if gap < TIE and int(top.indices[1]) == want:
                    return j  # a tie: the continuations may part here
                raise Failed(f"greedy token {j}: kiln {want}, transformers {best} (logit gap "
                             f"{gap:.3g})")
            ids.append(best)
    return len(kiln_ids)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kiln", required=True, help="the kiln binary")
    parser.add_argument("--dir", help="where to work (default: a new temporary folder)")
    args = parser.parse_args()
    kiln = os.path.abspath(args.kiln)
    work = os.path.abspath(args.dir or tempfile.mkdtemp(prefix="kiln_transformers_"))
    os.makedirs(work, exist_ok=True)
    try:
        prepare(kiln, "".join(f"Document {d}: the quick brown fox jumps over the lazy dog.\n\n"
                              for d in range(200)), f"{work}/corpus")
        # The probe: one document, the text and its end-of-document id; its samples are the
        # chunks [c * SEQ_LEN, (c + 1) * SEQ_LEN] of it, in some order (the mean takes none).
        probe = f"{work}/probe"
        prepare(kiln, "the lazy dog jumps over the quick brown fox; " * 3, probe)
        tokens = first_document(probe)
        sides = {}
        for arch in MODELS:
            hf, loss, targets, greedy = kiln_side(kiln, work, arch, probe)
            print(f"transformers check: {arch}: kiln eval loss {loss:.6f} over {targets} targets, "
                  f"greedy continuation of {len(greedy)} tokens {bytes(t for t in greedy if t < 256)!r}",
                  flush=True)
            sides[arch] = (hf, loss, targets, greedy)

        try:
            import torch
            import transformers
        except ImportError as e:
            print(f"transformers check: skipped: {sys.executable} cannot import {e.name} "
                  f"({e}); kiln's side ran and the exports are in {work}")
            return 0
        torch.manual_seed(0)
        for arch, (hf, loss, targets, greedy) in sides.items():
            model, ref_loss, count = transformers_side(hf, tokens, torch, transformers)
            if count != targets:
                raise Failed(f"{arch}: kiln eval took {targets} targets, the probe holds {count}")
            error = abs(loss - ref_loss) / abs(ref_loss)
            if error > LOSS_TOLERANCE:
                raise Failed(f"{arch}: loss kiln {loss:.8f}, transformers {ref_loss:.8f} (relative "
                             f"{error:.2e}, bound {LOSS_TOLERANCE:g})")
            agreed = compare_greedy(model, greedy, torch)
            print(f"transformers check: {arch}: transformers {transformers.__version__} loss "
                  f"{ref_loss:.6f} (relative difference {error:.1e}); greedy tokens agree for "
                  f"{agreed} of {len(greedy)}", flush=True)
        print(f"transformers check: passed ({', '.join(sides)})")
        return 0
    except Failed as e:
        print(f"transformers check: FAILED: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
