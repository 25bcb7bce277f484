#!/usr/bin/env bash
# The demo command: builds kvremap and the remap demo, runs the demo under LD_PRELOAD=libkvremap.so on
# the simulated driver (no GPU needed), then summarises the memory trace it left.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/build.sh" --target remap_demo kvremap kvremap_cli
traces=$(mktemp -d "${TMPDIR:-/tmp}/kvremap-demo.XXXXXX")
echo "demo: running examples/remap_demo on a simulated 80 GiB H100 under LD_PRELOAD=libkvremap.so"
SIMCUDA_DEVICE_MEMORY=${SIMCUDA_DEVICE_MEMORY:-80GiB} KVREMAP_TRACE_DIR="$traces" \
  LD_PRELOAD="$build/lib/libkvremap.so" "$build/bin/remap_demo" "$@"
echo
echo "demo: the trace it wrote ($traces), summarised by 'kvremap report':"
"$build/bin/kvremap" report "$traces"/kvremap-*.json
"$build/bin/kvremap" validate "$traces"/kvremap-*.json
