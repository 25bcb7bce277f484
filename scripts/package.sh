#!/usr/bin/env bash
# Builds the Debian package: kvremap_<version>_amd64.deb in build-package/ (or $BUILD_DIR), from a build
# of only what is installed (the tests off), then shows lintian's findings (packaging/lintian-expected
# lists the ones that stay, with their reasons). Installs missing dependencies first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}  # compiler-cache hits across checkouts (CMakeLists.txt)
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
build=${BUILD_DIR:-$root/build-package}
"$root/scripts/install-deps.sh"
cuda_root=${CUDAToolkit_ROOT:-/usr/local/cuda}
cmake -S "$root" -B "$build" -DKVREMAP_BUILD_TESTS=OFF -DCUDAToolkit_ROOT="$cuda_root" >/dev/null
cmake --build "$build" -j "${JOBS:-2}" --target kvremap kvremap_cli kvremap_man kvremap_changelog
(cd "$build" && cpack -G DEB >/dev/null)
deb=$(ls "$build"/kvremap_*_amd64.deb)
echo "package: $deb"
dpkg-deb -f "$deb" Package Version Depends
lintian --display-info "$deb" || true
