#!/usr/bin/env bash
# The test command: installs dependencies, builds everything and runs the whole CTest suite.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/build.sh"
ctest --test-dir "$build" --output-on-failure -j "${JOBS:-2}" --timeout 600
