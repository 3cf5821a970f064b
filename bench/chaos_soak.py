#!/usr/bin/python3
"""The chaos test's longer soak: many faults over several hosts on this machine.

  /usr/bin/python3 bench/chaos_soak.py [--build DIR] [--steps N] [--faults K] [--seed S]

Needs root (the stand-in hosts of scripts/netns-hosts) and `make build`. The chaos test
(MultiHostRestart.ChaosTest..., docs/resilience.md#the-chaos-test) meets three faults in 200
steps; this meets K (default 8) in N steps (default 1000): the same tiny tp2 x dp2 model over 2
stand-in hosts of 2 ranks, a checkpoint every 10 steps, `kiln train --hostfile --max-restarts K`,
and faults drawn from the test's three (both ranks of host 1 killed, host 1's link cut and
mended in the pause before the restart, rank 3 frozen with SIGSTOP) at random steps, each
after the restart before it trains again. Rank 0 works 40 ms longer a step (KILN_FAULTS
slow@0:40) so that a step lasts about as long whatever the machine's load.

For each fault it prints the step it landed at, the seconds until the launcher named the failure
("kiln: the run failed (...)"), and until the run trained again; at the end, whether the run
completed with the same weights, byte for byte, as the same run that met no fault, the goodput
the launcher printed, and the restart events the store holds. Exits 1 when the run did not
complete or its weights differ.
"""
import argparse
import hashlib
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEP = re.compile(r"^step +(\d+)/", re.M)
AGAIN = "training again at step"
FAILED = "kiln: the run failed ("
FAULTS = ["kill a host", "cut a host", "freeze a rank"]


def die(message):
    sys.exit("chaos_soak: " + message)


def hosts_script(*args):
    subprocess.run([str(ROOT / "scripts" / "netns-hosts"), *args], check=True, capture_output=True)


def prepare_corpus(kiln, folder):
    text = folder / "corpus.txt"
    text.write_text("".join("Document %d: the quick brown fox jumps over the lazy dog.\n\n" % d for d in range(200)))
    subprocess.run([str(kiln), "data", "prepare", "--input", str(text), "--tokenizer", "byte", "--document-boundary",
                    "blank-line", "--append-eod", "--output", str(folder / "corpus")], check=True, capture_output=True)
    return folder / "corpus"


def train_words(kiln, name, hostfile, corpus, folder, steps):
    settings = ['data.paths=["%s"]' % corpus, "data.tokenizer=byte", "data.split=90,10,0", "model.vocab_size=257",
                "model.n_layer=1", "model.d_model=32", "model.n_head=2", "model.seq_len=16", "train.global_batch=8",
                "train.micro_batch=1", "train.steps=%d" % steps, "train.warmup=2", "train.log_interval=1",
                "train.eval_interval=0", "train.sample_tokens=0", "train.checkpoint_interval=10",
                "train.checkpoint_dir=%s" % (folder / "checkpoints"), "backend.threads=1", "parallel.tp=2",
                "parallel.timeout_s=3"]
    words = [str(kiln), "train", "--ranks", "4", "--hostfile", hostfile, "--name", name]
    for setting in settings:
        words += ["--set", setting]
    return words


def weights(folder, run, steps):
    step = folder / "checkpoints" / run / ("step-%08d" % steps)
    digest = hashlib.sha256()
    for path in sorted(step.glob("*.safetensors")):
        digest.update(path.read_bytes())
    return digest.hexdigest() if step.is_dir() else None


def rank_places(store):
    with sqlite3.connect("file:%s?mode=ro" % store, uri=True) as db:
        return db.execute("SELECT r.rank, r.host, r.pid FROM run_ranks r JOIN runs ON runs.id = r.run_id "
                          "WHERE runs.name = 'chaos' ORDER BY r.rank").fetchall()


def wait_for(predicate, seconds, what, log):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(0.1)
    die("no %s within %d s; the launcher's output:\n%s" % (what, seconds, log.read_text()))


def newest_step_after_restart(log, restarts):
    text = log.read_text()
    at = 0
    for _ in range(restarts):
        at = text.find(AGAIN, at) + 1
    steps = [int(s) for s in STEP.findall(text[at:])]
    return max(steps) if steps else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--faults", type=int, default=8)
    parser.add_argument("--seed", type=int, default=None)
    options = parser.parse_args()
    kiln = Path(options.build) / "kiln"
    if os.geteuid() != 0:
        die("needs root, for the stand-in hosts (scripts/netns-hosts)")
    if not kiln.is_file():
        die("no %s; run make build first" % kiln)
    span = options.steps // (options.faults + 1)
    if span < 30:
        die("--steps %d leaves %d steps a fault; give at least 30 a fault" % (options.steps, span))
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**32)
    draw = random.Random(seed)
    faults = [draw.choice(FAULTS) for _ in range(options.faults)]
    # Each past the checkpoint the restart before it goes back to, and before the next span.
    at = [span * i + draw.randint(20, span - 5) for i in range(options.faults)]
    print("chaos soak: seed %d, %d steps, %d faults" % (seed, options.steps, options.faults), flush=True)

    name = "soak%d" % (os.getpid() % 10000)
    hosts_script("up", name, "2")
    try:
        with tempfile.TemporaryDirectory(prefix="kiln-chaos-soak-") as temporary:
            folder = Path(temporary)
            corpus = prepare_corpus(kiln, folder)
            hostfile = "/run/kiln-hosts/%s/hostfile" % name
            launch = [str(ROOT / "scripts" / "netns-hosts"), "launch", name]
            started = time.monotonic()
            calm = subprocess.run(launch + train_words(kiln, "calm", hostfile, corpus, folder, options.steps) +
                                  ["--no-store"], capture_output=True, text=True)
            if calm.returncode != 0:
                die("the run without faults failed:\n" + calm.stdout + calm.stderr)
            print("the run without faults: %.0f s" % (time.monotonic() - started), flush=True)

            store, log = folder / "runs.db", folder / "chaos.log"
            environment = dict(os.environ, KILN_FAULTS="slow@0:40")
            started = time.monotonic()
            with open(log, "w") as out:
                launcher = subprocess.Popen(launch + train_words(kiln, "chaos", hostfile, corpus, folder, options.steps) +
                                            ["--max-restarts", str(options.faults), "--store", str(store)],
                                            stdout=out, stderr=subprocess.STDOUT, env=environment)
            host = "%s-1" % name
            for i, (fault, step) in enumerate(zip(faults, at)):
                wait_for(lambda: log.read_text().count(AGAIN) >= i, 120, "restart %d" % i, log)
                wait_for(lambda: newest_step_after_restart(log, i) >= step, 300, "step %d" % step, log)
                places = rank_places(store)
                on_host = [pid for _, h, pid in places if h == host and pid]
                landed = newest_step_after_restart(log, i)
                struck = time.monotonic()
                if fault == "kill a host":
                    for pid in on_host:
                        os.kill(pid, signal.SIGKILL)
                elif fault == "cut a host":
                    hosts_script("cut", name, host)
                else:
                    os.kill(places[3][2], signal.SIGSTOP)
                named = wait_for(lambda: log.read_text().count(FAILED) >= i + 1, 120, "failure %d named" % (i + 1), log)
                if fault == "cut a host":
                    hosts_script("mend", name, host)
                elif fault == "freeze a rank":
                    os.kill(places[3][2], signal.SIGKILL)
                again = wait_for(lambda: log.read_text().count(AGAIN) >= i + 1, 120, "restart %d" % (i + 1), log)
                print("fault %d: %-13s at step %4d: named in %4.1f s, training again %4.1f s after it" %
                      (i + 1, fault, landed, named - struck, again - struck), flush=True)
            status = launcher.wait()
            output = log.read_text()
            print("the run with %d faults: %.0f s, exit status %d" % (options.faults, time.monotonic() - started, status))
            for line in output.splitlines():
                if line.startswith("kiln: goodput "):
                    print(line)
            with sqlite3.connect("file:%s?mode=ro" % store, uri=True) as db:
                run_status = db.execute("SELECT status FROM runs WHERE name = 'chaos'").fetchone()[0]
                events = db.execute("SELECT e.message FROM events e JOIN runs ON runs.id = e.run_id "
                                    "WHERE runs.name = 'chaos' AND e.kind = 'restart' ORDER BY e.id").fetchall()
            print("store: run %s, %d restart events" % (run_status, len(events)))
            for (message,) in events:
                print("  " + message)
            calm_weights = weights(folder, "calm", options.steps)
            same = calm_weights is not None and weights(folder, "chaos", options.steps) == calm_weights
            print("final weights: %s" % ("the same bytes as the run without faults" if same else "DIFFERENT"))
            return 0 if status == 0 and run_status == "completed" and same else 1
    finally:
        hosts_script("down", name)


if __name__ == "__main__":
    sys.exit(main())
