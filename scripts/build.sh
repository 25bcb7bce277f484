#!/usr/bin/env bash
# Configures and builds kvremap into build/ (or $BUILD_DIR); installs missing dependencies first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}  # compiler-cache hits across checkouts (CMakeLists.txt)
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}  # with -g, ccache would hash the build directory too
build=${BUILD_DIR:-$root/build}
"$root/scripts/install-deps.sh"
werror=OFF
[[ "${CI:-}" == "true" ]] && werror=ON
cuda_root=${CUDAToolkit_ROOT:-/usr/local/cuda}
cmake -S "$root" -B "$build" -DKVREMAP_WERROR="$werror" -DCUDAToolkit_ROOT="$cuda_root" >/dev/null
cmake --build "$build" -j "${JOBS:-2}" "$@"
