#!/usr/bin/env bash
# The test command: installs dependencies, builds everything, runs the whole CTest suite, fuzzes every
# parser for a bounded time (scripts/fuzz.sh; FUZZ_SECONDS per target, default 20), then runs the suite
# again under AddressSanitizer + UBSan and the concurrency tests under ThreadSanitizer
# (scripts/sanitize.sh; SANITIZERS="asan tsan" by default, empty to skip while developing).
# Tests labelled `long` run in their short form here; bench/long-tests.sh runs them in full.
# Prints each stage's wall time (docs/benchmarks.md records them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
stage_start=$(date +%s)
stage_done() { echo "test: $1 took $(($(date +%s) - stage_start)) s"; stage_start=$(date +%s); }
"$root/scripts/build.sh"
stage_done build
ctest --test-dir "$build" --output-on-failure -j "${JOBS:-2}" --timeout 600
stage_done suite
FUZZ_SECONDS="${FUZZ_SECONDS:-20}" "$root/scripts/fuzz.sh"
stage_done fuzzing
"$root/scripts/sanitize.sh"
stage_done sanitizers
