#!/usr/bin/env bash
# The test command: installs dependencies, builds everything and runs the whole CTest suite.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KVREMAP_BUILD_DIR:-$root/build}
"$root/scripts/build.sh"
ctest --test-dir "$build" --output-on-failure -j "${KVREMAP_JOBS:-2}" --timeout 600
