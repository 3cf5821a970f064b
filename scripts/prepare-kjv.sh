#!/usr/bin/env bash
# Prepares the King James Bible (Debian's bible-kjv) as a byte-level corpus in data/kjv.bin +
# data/kjv.idx, once: each chapter becomes one document. Used by the demo and the benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -f data/kjv.idx ] || [ ! -f data/kjv.bin ]; then
  mkdir -p data
  echo "preparing the King James Bible in data/kjv (first run only)"
  # `bible` prints each chapter as a heading block and a verse block; join the two so
  # every chapter becomes one document.
  bible Gen1:1-Rev22:21 |
    awk 'BEGIN { RS = "" } NR % 2 == 1 { heading = $0; next } { print heading "\n" $0 "\n" }' \
      > data/kjv.txt
  build/kiln data prepare --input data/kjv.txt --tokenizer byte --document-boundary blank-line --append-eod \
    --output data/kjv
fi
