#!/usr/bin/env bash
# The docs' Experts panel screenshot (docs/images/experts.png) from a real run: trains
# configs/moe-tiny.json on the Bible text (scripts/prepare-kjv.sh) on the CPU, logging every 5
# steps, into a store of its own, serves it and shoots the run page's Experts panel.
# A few minutes on two cores. Needs a build (make build); BUILD_DIR picks another than build/.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
work="$(mktemp -d)"
trap 'kill "${server:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

scripts/prepare-kjv.sh
"$build/kiln" train --config configs/moe-tiny.json --store "$work/runs.db" --name moe-tiny \
  --set train.log_interval=5 --set train.checkpoint_interval=0 --set train.eval_interval=0 \
  --set train.sample_tokens=0 > "$work/train.log"
grep "^step" "$work/train.log" | tail -n 1

"$build/kiln" serve --store "$work/runs.db" --listen 127.0.0.1:0 > "$work/serve.log" &
server=$!
url=""
for _ in $(seq 50); do
  url="$(sed -n 's/^kiln: serving .* at \(http[^ ]*\) .*/\1/p' "$work/serve.log")"
  [ -n "$url" ] && break
  sleep 0.2
done
[ -n "$url" ] || { echo "screenshot-moe-tiny: the dashboard did not start: $(cat "$work/serve.log")" >&2; exit 1; }
node tests/browser/shoot_experts.mjs "$url" moe-tiny docs/images/experts.png
echo "screenshot-moe-tiny: docs/images/experts.png"
