#!/usr/bin/env bash
# The test command: installs dependencies, builds everything, runs the whole CTest suite, fuzzes every
# parser for a bounded time (scripts/fuzz.sh; FUZZ_SECONDS per target, default 20), then runs the suite
# again under AddressSanitizer + UBSan and the concurrency tests under ThreadSanitizer
# (scripts/sanitize.sh; SANITIZERS="asan tsan" by default, empty to skip while developing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/build.sh"
ctest --test-dir "$build" --output-on-failure -j "${JOBS:-2}" --timeout 600
FUZZ_SECONDS="${FUZZ_SECONDS:-20}" "$root/scripts/fuzz.sh"
"$root/scripts/sanitize.sh"
