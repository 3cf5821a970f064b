#!/usr/bin/env bash
# The demo: prepare the King James Bible (Debian's bible-kjv) with a BPE tokenizer learned
# from it on first use, then train the tiny model on it with the embedded defaults and print
# a sample, serving the dashboard while it trains (its URL is printed first; KILN_DEMO_LISTEN
# picks another address than 127.0.0.1:8080). Extra arguments go to `kiln train` (e.g.
# --set train.steps=200).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/prepare-kjv.sh
exec build/kiln train --serve "${KILN_DEMO_LISTEN:-127.0.0.1:8080}" "$@"
