#!/usr/bin/env python3
"""kiln against PyTorch on one GPU: one training step, same model, same GPU, one command.

  python3 bench/gpu_step.py [--build DIR] [--python PYTHON] [--case NAME ...]
                            [--set section.key=value ...] [--min-time SECONDS]
                            [--records FILE] [--log FILE]

For each case runs DIR/kiln_bench_step (Google Benchmark; default DIR build-gpu, else build)
and then bench/peers/torch_gpu_step.py (the PyTorch peer, under --python, default this
interpreter) on the same GPU, one after the other. Each case's record is appended to the
records file (JSON lines; default bench/results/<UTC date>-<device>-gpu-step.jsonl) as soon as
the case finishes, so a run cut short keeps every case it finished; the raw output of every
command goes to the log (default the same name with .log). A table of all cases ends the run.
Every figure comes from the runs of this command; without an NVIDIA GPU it stops with one line
and writes nothing. Exits 1 when a run failed (its record says why), else 0 whatever the
figures are.
"""
import argparse
import collections
import datetime
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEER = ROOT / "bench" / "peers" / "torch_gpu_step.py"
RESULTS = ROOT / "bench" / "results"

GPU = ["backend.device=cuda", "precision.dtype=bf16"]
# A case: its config and overrides (global batch = micro-batch: one micro-batch a step), the
# issue's target, and the seconds the case takes in scripts/gpu-check at --min-time 3 (kiln's
# side and the peer's, start-up and the peer's compilation included) with where that figure
# comes from. scripts/gpu-check runs the cases in this order, its budget allowing.
Case = collections.namedtuple("Case", "config overrides target seconds seconds_from")
CASES = {
    "gpt2-124m": Case(
        "configs/gpt2-124m.json",
        ["model.seq_len=1024", "train.micro_batch=16", "train.global_batch=16"],
        "vs_pytorch >= 1.2", 75,
        "bench/results/2026-11-23T0813Z-*-kiln-step-*.log (a kiln run of this case, 35 s "
        "apart) and 2026-11-26T0125Z-nvidia-h200-gpu-step.log (the peer's warm-up, 21 s) "
        "plus the peer's start and timed steps"),
    "llama-1b": Case(
        "configs/llama-1b.json",
        ["model.seq_len=2048", "train.micro_batch=4", "train.global_batch=4"],
        "mfu >= 0.55", 105,
        "bench/results/2026-11-26T0133Z-nvidia-h200-bench.log: gpu_step.py --case llama-1b "
        "ran from 227 s to 332 s"),
    "gpt2-1.5b": Case(
        "configs/gpt2-1.5b.json",
        ["model.seq_len=1024", "train.micro_batch=8", "train.global_batch=8"],
        "mfu >= 0.40", 210,
        "bench/results/2026-11-23T0753Z-*-gpu-step.json (the peer's warm-up, 91 s) and "
        "2026-11-26T0125Z-nvidia-h200-bench.log (kiln's side within 130 s of the gpt2-124m "
        "case's start), plus the peer's start and timed steps"),
}


def fail(message):
    sys.exit("gpu_step: " + message)


def run(command, log):
    """Runs command, appends its command line and output to the log; (rc, stdout, stderr)."""
    log.write("$ %s\n" % " ".join(command))
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    log.write(result.stdout + result.stderr + "[exit %d]\n\n" % result.returncode)
    log.flush()
    return result.returncode, result.stdout, result.stderr


def last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def nvidia_smi(query):
    out = subprocess.run(["nvidia-smi", "--query-gpu=" + query, "--format=csv,noheader"],
                         capture_output=True, text=True)
    if out.returncode != 0 or not out.stdout.strip():
        return None
    return out.stdout.strip().splitlines()[0].strip()


def git(*args):
    out = subprocess.run(["git"] + list(args), capture_output=True, text=True, cwd=ROOT)
    return out.stdout.strip() if out.returncode == 0 else ""


def binaries_commit(build, env=None):
    """The commit the binaries in build were built from, as `kiln --version` names it (binaries
    packed here travel to a checkout whose git state is not theirs), else the checkout's."""
    try:
        out = subprocess.run([str(Path(build) / "kiln"), "--version"], capture_output=True,
                             text=True, timeout=30, env=env).stdout
        match = re.search(r"\(commit ([^)]+)\)", out)
        if match and match.group(1) != "unknown":
            return match.group(1)
    except OSError:
        pass
    commit = git("rev-parse", "--short=12", "HEAD")
    return commit + ("-dirty" if commit and git("status", "--porcelain") else "") or "unknown"


def append_record(path, record):
    """One JSON line, written and flushed at once: a cut later loses nothing before it."""
    with open(path, "a") as out:
        out.write(json.dumps(record) + "\n")


def set_args(config, overrides):
    args = ["--config", config]
    for assignment in overrides:
        args += ["--set", assignment]
    return args


def kiln_run(binary, config, overrides, min_time, log):
    rc, out, err = run([str(binary)] + set_args(config, overrides) +
                       ["--benchmark_min_time=%g" % min_time, "--benchmark_format=json"], log)
    if rc != 0:
        return {"error": last_line(err)}
    b = json.loads(out)["benchmarks"][0]
    return {"device": re.sub(r"^cuda:\d+ \((.*)\)$", r"\1", b.get("label", "")),
            "tokens_per_s": b["tok_per_s"], "tflops": b["tflops"], "mfu": b.get("mfu"),
            "hfu": b.get("hfu"), "peak_mem_bytes": int(b["peak_mem_bytes"]),
            "device_mem_bytes": int(b.get("device_mem_bytes", 0)), "ms_per_step": b["real_time"],
            "fwd_ms": b["fwd_ms"], "bwd_ms": b["bwd_ms"], "opt_ms": b["opt_ms"]}


def peer_run(python, binary, config, overrides, min_time, log):
    rc, out, err = run([python, str(PEER)] + set_args(config, overrides) +
                       ["--bench-binary", str(binary), "--min-time", "%g" % min_time, "--json"],
                       log)
    try:
        return json.loads(last_line(out)) if rc == 0 else {"error": last_line(err)}
    except ValueError:
        return {"error": "no JSON result: " + last_line(out)}


def met(target, record):
    name, value = target.split(" >= ") if target else (None, None)
    if not target or record.get("error") or record.get(name) is None:
        return None
    return record[name] >= float(value)


def fmt(value, pattern, scale=1.0):
    return pattern % (value * scale) if isinstance(value, (int, float)) else "-"


def table(records):
    rows = ["| config | device | dtype | kiln tok/s | PyTorch tok/s | kiln/PyTorch | kiln TFLOP/s "
            "| MFU | HFU | PyTorch MFU | peak mem kiln / PyTorch (GiB) | fwd / bwd / opt ms "
            "| target |",
            "| --- | --- | --- |" + " ---: |" * 9 + " --- |"]
    for r in records:
        p = r["pytorch"]
        target = "-" if not r["target"] else "%s %s" % (
            r["target"], {True: "pass", False: "FAIL", None: "n/a"}[r["target_met"]])
        cells = [r["config"], r["device"], r["dtype"],
                 fmt(r.get("tokens_per_s"), "%.0f"), fmt(p.get("tokens_per_s"), "%.0f"),
                 fmt(r.get("vs_pytorch"), "%.2fx"), fmt(r.get("tflops"), "%.1f"),
                 fmt(r.get("mfu"), "%.1f%%", 100), fmt(r.get("hfu"), "%.1f%%", 100),
                 fmt(p.get("mfu"), "%.1f%%", 100),
                 "%s / %s" % (fmt(r.get("peak_mem_bytes"), "%.1f", 2**-30),
                              fmt(p.get("peak_mem_bytes"), "%.1f", 2**-30)),
                 " / ".join(fmt(r.get(k), "%.1f") for k in ("fwd_ms", "bwd_ms", "opt_ms")),
                 target]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=None,
                        help="build folder with kiln_bench_step (default build-gpu, else build)")
    parser.add_argument("--python", default=sys.executable,
                        help="Python with CUDA PyTorch for the peer (default: this one)")
    parser.add_argument("--case", action="append", choices=sorted(CASES),
                        help="run only this case (repeatable; default all)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="extra config override for every case, e.g. train.micro_batch=32")
    parser.add_argument("--min-time", type=float, default=5.0,
                        help="seconds of timed steps per side and case (default 5)")
    parser.add_argument("--records", type=Path,
                        help="append each case's record here, JSON lines (default "
                             "bench/results/<UTC date>-<device>-gpu-step.jsonl)")
    parser.add_argument("--log", type=Path,
                        help="append every command's raw output here (default: the records' "
                             "name with .log)")
    args = parser.parse_args()

    if not shutil.which("nvidia-smi"):
        fail("no GPU: nvidia-smi is not on this machine; this benchmark needs an NVIDIA GPU")
    gpu_name = nvidia_smi("name")
    if not gpu_name:
        fail("no GPU: nvidia-smi finds none")
    build = Path(args.build).resolve() if args.build else next(
        (ROOT / d for d in ("build-gpu", "build") if (ROOT / d / "kiln_bench_step").exists()),
        ROOT / "build-gpu")
    binary = build / "kiln_bench_step"
    if not binary.exists():
        fail("%s is missing: build with CUDA first (scripts/gpu-check does)" % binary)

    # kiln must see the GPU too (a build without CUDA, or CUDA_VISIBLE_DEVICES, may hide it).
    probe = subprocess.run([str(binary), "--set", "backend.device=cuda", "--describe"],
                           capture_output=True, text=True, cwd=ROOT)
    if probe.returncode != 0:
        fail("kiln sees no GPU: " + last_line(probe.stderr))

    driver = nvidia_smi("driver_version")
    now = datetime.datetime.now(datetime.timezone.utc)
    commit = binaries_commit(build)
    command = " ".join([Path(sys.executable).name] + sys.argv)
    slug = re.sub(r"[^a-z0-9-]", "", gpu_name.lower().replace(" ", "-"))
    stem = RESULTS / ("%s-%s-gpu-step" % (now.strftime("%Y-%m-%dT%H%MZ"), slug))
    records_path = (args.records or stem.with_suffix(".jsonl")).resolve()
    log_path = (args.log or records_path.with_suffix(".log")).resolve()
    records_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    print("%s, driver %s, commit %s" % (gpu_name, driver, commit), flush=True)

    records = []
    with open(log_path, "a") as log:
        log.write("device: %s\ndriver: %s\ndate: %s\ncommit: %s\ncommand: %s\n\n" % (
            gpu_name, driver, now.isoformat(timespec="seconds"), commit, command))
        log.flush()
        for name in args.case or list(CASES):
            case = CASES[name]
            overrides = GPU + case.overrides + args.overrides
            print("%s: kiln ..." % name, end=" ", flush=True)
            kiln = kiln_run(binary, case.config, overrides, args.min_time, log)
            if "error" in kiln:
                print("failed: %s" % kiln["error"], flush=True)
                peer = {"error": "not run: kiln failed"}
            else:
                print("%.0f tok/s; PyTorch ..." % kiln["tokens_per_s"], end=" ", flush=True)
                peer = peer_run(args.python, binary, case.config, overrides, args.min_time, log)
                print(peer.get("error") or "%.0f tok/s" % peer["tokens_per_s"], flush=True)
            record = {"kind": "gpu-step", "config": name, "config_file": case.config,
                      "overrides": overrides, "device": kiln.get("device") or gpu_name,
                      "driver": driver,
                      "dtype": next(o.split("=")[1] for o in reversed(overrides)
                                    if o.startswith("precision.dtype=")),
                      **kiln,
                      "vs_pytorch": (kiln["tokens_per_s"] / peer["tokens_per_s"]
                                     if "error" not in kiln and "error" not in peer else None),
                      "pytorch": peer, "target": case.target,
                      "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                          timespec="seconds"),
                      "command": command, "commit": commit}
            record["target_met"] = met(case.target, record)
            append_record(records_path, record)
            records.append(record)

    print("\n" + table(records))
    print("\nrecords in %s, raw output in %s" % (records_path, log_path))
    failed = [r["config"] for r in records if "error" in r or "error" in r["pytorch"]]
    if failed:
        fail("runs failed for %s; see %s" % (", ".join(failed), log_path))


if __name__ == "__main__":
    main()
