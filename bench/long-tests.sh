#!/usr/bin/env bash
# The labelled long suite in full: the tests CTest labels `long` (kill points over a whole start-up,
# repeated exits from a worker thread) with KVREMAP_LONG_TESTS=1, which gives them their full loops;
# `.ci/run` runs the same tests in their short form. Add the sanitized build directories to run them
# there as well (their loops shrink by the build's slowdown).
# Usage: bench/long-tests.sh [BUILD_DIR ...] (default build). Exits non-zero when any test fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dirs=("$@")
[[ ${#dirs[@]} -gt 0 ]] || dirs=("$root/build")
for dir in "${dirs[@]}"; do
  [[ -f $dir/CTestTestfile.cmake ]] || { echo "long-tests: $dir is not a build directory: run scripts/build.sh first" >&2; exit 2; }
  start=$(date +%s)
  KVREMAP_LONG_TESTS=1 ctest --test-dir "$dir" --output-on-failure -L long
  echo "long-tests: $dir passed in $(($(date +%s) - start)) s"
done
