#!/usr/bin/env bash
# Downloads (here, where Debian's archive is reachable) the -dev packages a GPU machine
# without apt needs to build kiln and run its GPU suite, unpacks them under .gpu-deps/root,
# and packs that folder into .gpu-deps.tar.xz (about 18 MB); copy or carry either to the GPU
# machine and run scripts/gpu-check there, which unpacks the archive when the folder is not
# there.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(libcli11-dev libfmt-dev libfmt9 nlohmann-json3-dev libgtest-dev libbenchmark-dev
          libpcre2-dev libpcre2-8-0 libutf8proc-dev libutf8proc2 libsqlite3-dev libsqlite3-0 libssl-dev
          libbenchmark1debian libopenblas-openmp-dev libopenblas0-openmp libgomp1 libgfortran5
          # Open MPI and what it loads: the GPU layout suite launches ranks with mpirun.
          openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libpmix2 libhwloc15
          libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1
          ibverbs-providers librdmacm1 libpsm2-2 libpsm-infinipath1 libnl-3-200 libnl-route-3-200
          libnuma1 libmunge2 libatomic1)
rm -rf .gpu-deps && mkdir -p .gpu-deps/debs .gpu-deps/root
(cd .gpu-deps/debs && apt-get download "${packages[@]}" >/dev/null)
for deb in .gpu-deps/debs/*.deb; do dpkg -x "$deb" .gpu-deps/root; done
# The build links these shared: their static archives (OpenBLAS's alone is 56 MB) would only
# weigh down the folder that travels to the GPU machine, as would the downloaded packages.
rm -f .gpu-deps/root/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblasp-*.a \
      .gpu-deps/root/usr/lib/x86_64-linux-gnu/{libcrypto,libssl,libsqlite3}.a
rm -rf .gpu-deps/debs
# Debian names its Open MPI commands through alternatives, which dpkg -x does not make: the
# plain names, for PATH (scripts/gpu-check sets OPAL_PREFIX so they find their files).
mkdir -p .gpu-deps/bin
for pair in mpirun:orterun mpiexec:orterun mpicxx:mpicxx.openmpi mpicc:mpicc.openmpi; do
  ln -sf "../root/usr/bin/${pair#*:}" ".gpu-deps/bin/${pair%%:*}"
done
tar -cJf .gpu-deps.tar.xz .gpu-deps
echo "gpu-deps: ${#packages[@]} packages unpacked under .gpu-deps/root and packed in .gpu-deps.tar.xz"
