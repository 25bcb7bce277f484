#!/usr/bin/env bash
# The sanitizer stage: every target (the preload library, the simulated driver, the test programs) built
# with AddressSanitizer + UndefinedBehaviorSanitizer into build-asan/ running the whole CTest suite, then
# with ThreadSanitizer into build-tsan/ running the tests labelled `concurrency`.
# Env: SANITIZERS (default "asan tsan"), JOBS (default 2), ASAN_BUILD_DIR, TSAN_BUILD_DIR.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}  # compiler-cache hits across checkouts (CMakeLists.txt)
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}  # with -g, ccache would hash the build directory too
werror=OFF
[[ "${CI:-}" == "true" ]] && werror=ON
cuda_root=${CUDAToolkit_ROOT:-/usr/local/cuda}
jobs=${JOBS:-2}

# The tests preload the sanitizer runtime ahead of libkvremap.so (KVREMAP_PRELOAD in CMakeLists.txt).
export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$root/tests/data/lsan.supp:${LSAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
# die_after_fork=0: a forked child that uses CUDA starts kvremap's trace writer thread, as an engine
# worker forked from a threaded parent starts its own threads; TSan refuses that unless told.
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:die_after_fork=0:suppressions=$root/tests/data/tsan.supp:${TSAN_OPTIONS:-}"

configure_and_build() {  # build-dir sanitizers [targets...]
  local dir=$1 sanitizers=$2
  shift 2
  cmake -S "$root" -B "$dir" -DKVREMAP_WERROR="$werror" -DCUDAToolkit_ROOT="$cuda_root" \
    -DKVREMAP_SANITIZE="$sanitizers" >/dev/null
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  local began=$(date +%s)
  cmake --build "$dir" -j "$jobs" "${targets[@]}"
  built=$(($(date +%s) - began))
}

for stage in ${SANITIZERS-asan tsan}; do
  start=$(date +%s)
  case $stage in
    asan)
      dir=${ASAN_BUILD_DIR:-$root/build-asan}
      configure_and_build "$dir" address,undefined
      # The resident-memory bound of the million pairs runs with ASan's quarantine off: the quarantine
      # keeps freed memory on purpose (up to 256 MiB), which is ASan's memory, not kvremap's.
      rss_test='Stress.AMillionPairs'
      ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 900 -E "$rss_test"
      ASAN_OPTIONS="$ASAN_OPTIONS:quarantine_size_mb=0:thread_local_quarantine_size_kb=0" \
        ctest --test-dir "$dir" --output-on-failure --timeout 900 -R "$rss_test"
      ;;
    tsan)
      dir=${TSAN_BUILD_DIR:-$root/build-tsan}
      configure_and_build "$dir" thread test_interposer test_stress test_live_map
      # The million pairs run on one thread: nothing for TSan to find, and 10x slower under it. The
      # file-size limit of 0 is the ASan stage's and the plain suite's: TSan's runtime writes a file
      # of its own while it starts (MapRodata), which that limit forbids before kvremap runs at all.
      ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 900 -L concurrency \
        -E 'Stress.AMillionPairs|Interposer.AFileSizeLimitStopsTracingNeverTheProgram'

      ;;
    *)
      echo "sanitize: unknown stage '$stage' in SANITIZERS (use asan, tsan or both)" >&2
      exit 2
      ;;
  esac
  echo "sanitize: $stage stage passed in $(($(date +%s) - start)) s (build $built s)"
done
