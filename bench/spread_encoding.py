#!/usr/bin/python3
"""The metric_spread table's encoding, measured (docs/store.md#schema): one row a wide step as
six columns a per-rank field, against one blob a step (a presence mask, then min, max and sum
as f64 and count and the two ranks as u32 a measured field). Writes --steps rows of --fields
per-rank fields, --measured of them with values (the rest NULL or absent), each way into its
own SQLite file, and prints the payload and the file's bytes a step after VACUUM.

  /usr/bin/python3 bench/spread_encoding.py [--steps 5000] [--fields 13] [--measured 10]
"""
import argparse
import os
import random
import sqlite3
import struct
import tempfile

PARTS = ["min", "max", "sum", "count", "min_rank", "max_rank"]


def spread(field, ranks):
    """A field's spread over `ranks`: memory-like integers for field 0, times for the rest."""
    values = [float(random.randint(10**10, 2 * 10**10)) if field == 0 else random.uniform(1, 1000)
              for _ in range(8)]
    return (min(values), max(values), sum(values), ranks, random.randrange(ranks), random.randrange(ranks))


def measure(kind, steps, fields, measured, folder):
    path = os.path.join(folder, f"spread_{kind}.db")
    db = sqlite3.connect(path)
    key = "run_id INTEGER, step INTEGER, time REAL, ranks INTEGER, top_rank INTEGER"
    if kind == "columns":
        columns = ", ".join(f"f{f}_{p}" for f in range(fields) for p in PARTS)
        db.execute(f"CREATE TABLE t ({key}, {columns}, PRIMARY KEY (run_id, step)) WITHOUT ROWID")
    else:
        db.execute(f"CREATE TABLE t ({key}, spread BLOB, PRIMARY KEY (run_id, step)) WITHOUT ROWID")
    random.seed(1)
    for step in range(steps):
        row = [spread(f, 4096) if f < measured else None for f in range(fields)]
        head = [1, step, 1.7e9 + step, 4096, 4095]
        if kind == "columns":
            values = [v for r in row for v in (r if r else [None] * len(PARTS))]
            db.execute(f"INSERT INTO t VALUES ({', '.join('?' * (len(head) + len(values)))})", head + values)
        else:
            mask = sum(1 << f for f, r in enumerate(row) if r)
            blob = struct.pack("<I", mask) + b"".join(struct.pack("<dddIII", *r) for r in row if r)
            db.execute("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", head + [blob])
    db.commit()
    db.execute("VACUUM")
    payload, = db.execute("SELECT sum(payload) FROM dbstat WHERE name = 't'").fetchone()
    db.close()
    print(f"{kind:8} {payload / steps:6.1f} bytes of payload a step, {os.path.getsize(path) / steps:6.1f} on disk")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--fields", type=int, default=13)
    parser.add_argument("--measured", type=int, default=10)
    args = parser.parse_args()
    print(f"{args.steps} steps, {args.measured} of {args.fields} per-rank fields measured")
    with tempfile.TemporaryDirectory() as folder:
        for kind in ("columns", "blob"):
            measure(kind, args.steps, args.fields, args.measured, folder)


if __name__ == "__main__":
    main()
