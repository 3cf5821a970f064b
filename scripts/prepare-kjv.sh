#!/usr/bin/env bash
# Prepares the demo corpus once: the King James Bible (Debian's bible-kjv) as text, a
# byte-level BPE tokenizer of 2048 ids trained on it (data/kjv-tokenizer), and the text
# tokenized with it in Megatron's indexed format (data/kjv-bpe.bin + .idx), each chapter one
# document. Used by the demo and the benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -f data/kjv.txt ]; then
  mkdir -p data
  echo "preparing the King James Bible in data/ (first run only)"
  # `bible` prints each chapter as a heading block and a verse block; join the two so
  # every chapter becomes one document.
  bible Gen1:1-Rev22:21 |
    awk 'BEGIN { RS = "" } NR % 2 == 1 { heading = $0; next } { print heading "\n" $0 "\n" }' \
      > data/kjv.txt.tmp
  mv data/kjv.txt.tmp data/kjv.txt
fi
if [ ! -f data/kjv-tokenizer/merges.txt ]; then
  "${BUILD_DIR:-build}"/kiln tokenizer train --input data/kjv.txt --vocab-size 2048 --output data/kjv-tokenizer
fi
if [ ! -f data/kjv-bpe.idx ] || [ ! -f data/kjv-bpe.bin ]; then
  "${BUILD_DIR:-build}"/kiln data prepare --input data/kjv.txt --tokenizer data/kjv-tokenizer \
    --document-boundary blank-line --append-eod --output data/kjv-bpe
fi
