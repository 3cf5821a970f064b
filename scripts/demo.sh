#!/usr/bin/env bash
# The demo: prepare the King James Bible (Debian's bible-kjv) with a BPE tokenizer learned
# from it on first use, then train the tiny model on it with the embedded defaults and print
# a sample. Extra arguments go to `kiln train` (e.g. --set train.steps=200).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/prepare-kjv.sh
exec build/kiln train "$@"
