#!/usr/bin/env bash
# The demo: prepare the King James Bible (Debian's bible-kjv) as a byte-level corpus on
# first use, then train the tiny model on it with the embedded defaults and print a
# sample. Extra arguments go to `kiln train` (e.g. --set train.steps=200).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -f data/kjv.idx ] || [ ! -f data/kjv.bin ]; then
  mkdir -p data
  echo "demo: preparing the King James Bible (first run only)"
  # `bible` prints each chapter as a heading block and a verse block; join the two so
  # every chapter becomes one document.
  bible Gen1:1-Rev22:21 |
    awk 'BEGIN { RS = "" } NR % 2 == 1 { heading = $0; next } { print heading "\n" $0 "\n" }' \
      > data/kjv.txt
  build/kiln data prepare --input data/kjv.txt --tokenizer byte --document-boundary blank-line --append-eod \
    --output data/kjv
fi

exec build/kiln train "$@"
