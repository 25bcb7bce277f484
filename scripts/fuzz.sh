#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with Clang into build-fuzz/ and fuzzes each for a bounded time on a copy of its corpus.
# Env: FUZZ_SECONDS (per target, default 20), FUZZ_TARGETS (default: all), FUZZ_BUILD_DIR (default build-fuzz), JOBS (default 2).
# Exits non-zero when any target crashes, leaks, times out or runs out of memory, printing the reproducer's path.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-20}
targets=${FUZZ_TARGETS:-"options units engine profile trace scenario"}

for tool in clang clang++; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "fuzz: $tool not found: apt-get install clang libclang-rt-dev" >&2
    exit 1
  fi
done

CC=clang CXX=clang++ cmake -S "$root/tests/fuzz" -B "$build" -DKVREMAP_FUZZ_SANITIZERS=address,undefined >/dev/null
cmake --build "$build" -j "${JOBS:-2}"

work="$build/runs"
failed=()
for t in $targets; do
  corpus="$work/$t/corpus"
  artifacts="$work/$t/artifacts"
  rm -rf "$work/$t"
  mkdir -p "$corpus" "$artifacts"
  cp -r "$root/tests/fuzz/corpus/$t/." "$corpus/"
  echo "fuzz: $t for ${seconds}s"
  if (cd "$artifacts" && "$build/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
        -artifact_prefix="$artifacts/" -print_final_stats=1 "$corpus" >"$work/$t/log" 2>&1); then
    grep -E '^(Done|stat::number_of_executed_units)' "$work/$t/log" | sed "s/^/fuzz: $t: /" || true
  else
    echo "fuzz: $t FAILED (log: $work/$t/log)" >&2
    grep -E 'ERROR:|SUMMARY:|fuzz contract broken' "$work/$t/log" | head -5 | sed "s/^/fuzz: $t: /" >&2 || true
    for reproducer in "$artifacts"/*; do
      [[ -e $reproducer ]] && echo "fuzz: $t reproducer: $reproducer (rerun: $build/fuzz_$t $reproducer)" >&2
    done
    failed+=("$t")
  fi
done

if ((${#failed[@]})); then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: all targets ran ${seconds}s without a finding"
