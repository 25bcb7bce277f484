#!/usr/bin/env bash
# The demo command: builds the remap demo and runs it on the simulated driver (no GPU needed).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KVREMAP_BUILD_DIR:-$root/build}
"$root/scripts/build.sh" --target remap_demo
echo "demo: running examples/remap_demo on a simulated 80 GiB H100 (tests/simcuda)"
SIMCUDA_DEVICE_MEMORY=${SIMCUDA_DEVICE_MEMORY:-80GiB} "$build/bin/remap_demo" "$@"
