#!/usr/bin/env bash
# How long a newcomer waits on this machine, from a fresh clone of this checkout's HEAD:
#   bench/fresh-clone.sh demo   `make demo` until its first progress line (step 25), then stops it
#   bench/fresh-clone.sh test   `make test`: set-up, the build and the tests timed apart
# It prints the machine, date and commit first, then one line per phase with its seconds and
# the tail of what failed. The clone goes to a temporary folder, removed at the end; nothing
# is cached between runs (no ccache), as on a newcomer's machine.
set -euo pipefail
what="${1:-}"
case "$what" in demo|test) ;; *) echo "usage: bench/fresh-clone.sh demo|test" >&2; exit 2 ;; esac
source_dir="$(cd "$(dirname "$0")/.." && pwd)"
commit="$(git -C "$source_dir" rev-parse HEAD)"
work="$(mktemp -d)"
trap 'pkill -P $$ >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(lscpu | sed -n 's/^Model name: *//p')"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  commit: $commit  command: bench/fresh-clone.sh $what"
git clone -q "$source_dir" "$work/kiln"
git -C "$work/kiln" checkout -q "$commit"
cd "$work/kiln"
seconds_since() { echo $(( $(date +%s) - $1 )); }
start=$(date +%s)

if [ "$what" = demo ]; then
  log="$work/demo.log"
  # In a session of its own, so that stopping the demo's process group leaves this script.
  setsid make demo >"$log" 2>&1 &
  demo=$!
  until grep -Eq '^step +[0-9]+/' "$log"; do
    if ! kill -0 "$demo" 2>/dev/null; then tail -n 20 "$log"; echo "demo: ended before its first step"; exit 1; fi
    sleep 1
  done
  echo "clone to the first progress line: $(seconds_since "$start") s"
  kill -- -"$demo" 2>/dev/null || kill "$demo"
  wait "$demo" 2>/dev/null || true
  echo "--- make demo's output up to it ---"
  cat "$log"
  exit 0
fi

phase() {  # name, command...
  local name="$1" begin
  shift
  begin=$(date +%s)
  if ! "$@" >"$work/$name.log" 2>&1; then
    tail -n 40 "$work/$name.log"
    echo "$name: failed after $(seconds_since "$begin") s"
    exit 1
  fi
  echo "$name: $(seconds_since "$begin") s"
}
phase setup make setup
phase build make build
phase tests bash -c 'cd build && ctest --output-on-failure -j "$(nproc)"'
grep -E "tests passed|tests failed" "$work/tests.log"
echo "make test in all: $(seconds_since "$start") s"
