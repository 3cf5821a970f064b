#!/usr/bin/env bash
# Downloads (here, where Debian's archive is reachable) the -dev packages a GPU machine
# without apt needs to build kiln, and unpacks them under .gpu-deps/root; copy or carry
# that folder to the GPU machine and run scripts/gpu-check there.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(libcli11-dev libfmt-dev libfmt9 nlohmann-json3-dev libgtest-dev libbenchmark-dev
          libpcre2-dev libpcre2-8-0 libsqlite3-dev libsqlite3-0 libssl-dev
          libbenchmark1debian libopenblas-openmp-dev libopenblas0-openmp libgomp1 libgfortran5)
rm -rf .gpu-deps && mkdir -p .gpu-deps/debs .gpu-deps/root
(cd .gpu-deps/debs && apt-get download "${packages[@]}" >/dev/null)
for deb in .gpu-deps/debs/*.deb; do dpkg -x "$deb" .gpu-deps/root; done
echo "gpu-deps: ${#packages[@]} packages unpacked under .gpu-deps/root"
