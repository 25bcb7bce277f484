#!/usr/bin/env bash
# Instructions kvremap adds per cudaMalloc+cudaFree pair, per thread role, counted by callgrind (load-independent).
# Usage: bench/instructions.sh [BUILD_DIR]   (extra KVREMAP_* settings pass through the environment)
# Runs bench_overhead's child workload under callgrind with 3000 and 9000 pairs, without and with
# LD_PRELOAD=libkvremap.so, and divides the difference of the two runs by the 6000 extra pairs, so
# start-up work cancels out. Roles: the main thread and a worker thread (each runs the pairs), and
# kvremap's background trace writer. An engine thread that finds its record ring full formats its
# own records; under callgrind's slow scheduling that happens now and then, so that work
# (ring_with_room) is counted apart and reported on its own line instead of as hook cost.
set -euo pipefail
build=$(cd "${1:-$(dirname "$0")/../build}" && pwd)  # absolute: the runs below change directory
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
command -v callgrind_annotate >/dev/null || { echo "instructions.sh: callgrind_annotate is needed (valgrind package)" >&2; exit 1; }
[[ -x $build/bin/bench_overhead && -f $build/lib/libkvremap.so ]] ||
  { echo "instructions.sh: no bench_overhead/libkvremap.so under $build (run scripts/build.sh)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# count VARIANT PAIRS: prints "role instructions self_formatting" per thread of one run.
count() {
  local variant=$1 pairs=$2 preload=()
  [[ $variant == with ]] && preload=(LD_PRELOAD="$build/lib/libkvremap.so")
  (cd "$work" && env SIMCUDA_DEVICE_MEMORY=80GiB OVERHEAD_BENCH_CHILD=1 KVREMAP_TRACE_DIR="$work" "${preload[@]}" \
    valgrind --tool=callgrind --separate-threads=yes --fair-sched=yes --callgrind-out-file="$work/cg.$variant.$pairs.%p" \
    "$build/bin/bench_overhead" "$pairs" 10 1 1 >/dev/null 2>&1)
  local f role total own
  for f in "$work"/cg."$variant"."$pairs".*-*; do
    if grep -q writer_loop "$f"; then role=writer; elif grep -q "fn=.*_M_run" "$f"; then role=worker; else role=main; fi
    total=$(awk '/^totals:/ {print $2}' "$f")
    # (awk reads to the end: stopping early would kill callgrind_annotate with SIGPIPE under pipefail)
    own=$(callgrind_annotate --inclusive=yes "$f" 2>/dev/null |
      awk '!found && /trace_detail::ring_with_room/ {gsub(",", "", $1); own = $1; found = 1} END {print own + 0}')
    echo "$role $total ${own:-0}"
  done
}

declare -A total own
for variant in without with; do
  for pairs in 3000 9000; do
    while read -r role t o; do
      total[$variant.$pairs.$role]=$t
      own[$variant.$pairs.$role]=$o
    done < <(count "$variant" "$pairs")
  done
done

# Engine threads: per pair. The writer formats the records of both the main and the worker thread
# (two records per pair each), so its figure is per record: the difference over 4 * 6000 records.
delta() { echo $(( ( ${1:-0} - ${2:-0} ) / $3 )); }
printf '%-8s %-11s %10s %10s %10s %24s\n' role unit without with added "self-formatting (with)"
for role in main worker writer; do
  div=6000 unit=pair
  [[ $role == writer ]] && div=24000 unit=record
  w=$(delta "${total[without.9000.$role]:-0}" "${total[without.3000.$role]:-0}" $div)
  s=$(delta "${own[with.9000.$role]:-0}" "${own[with.3000.$role]:-0}" $div)
  k=$(( $(delta "${total[with.9000.$role]:-0}" "${total[with.3000.$role]:-0}" $div) - s ))
  printf '%-8s %-11s %10s %10s %+10d %24s\n' "$role" "per $unit" "$w" "$k" "$((k - w))" "$s"
done
