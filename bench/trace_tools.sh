#!/usr/bin/env bash
# Throughput and peak memory of `kvremap report`, `report --json`, `plot` and `validate` on one large
# synthetic trace (tools/trace/make_synthetic_trace.py); prints a Markdown table for docs/benchmarks.md.
# Usage: bench/trace_tools.sh [MEGABYTES (default 1074, 1 GiB)] [BUILD_DIR (default build)].
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
megabytes=${1:-1074}
build=$(cd "${2:-$root/build}" && pwd)
kvremap=$build/bin/kvremap
[[ -x $kvremap ]] || { echo "trace_tools: $kvremap missing: run scripts/build.sh first" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "trace_tools: /usr/bin/time is needed (Debian package time)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "trace_tools: python3 is needed to write the trace" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trace=$work/big.json
python3 "$root/tools/trace/make_synthetic_trace.py" "$trace" "$megabytes"
size=$(stat -c %s "$trace")
events=$(($(wc -l <"$trace") - 2))
echo "trace: $size bytes ($((size >> 20)) MiB), $events events"
echo
echo "| command | time | throughput | peak resident memory | of the trace's size |"
echo "|---|---|---|---|---|"
for command in "report" "report --json" "plot -o $work/plot.html" "validate"; do
  # Word splitting of $command is intended: a subcommand and its options.
  # shellcheck disable=SC2086
  /usr/bin/time -v "$kvremap" $command "$trace" >/dev/null 2>"$work/time.txt" || {
    echo "trace_tools: kvremap $command failed:" >&2
    cat "$work/time.txt" >&2
    exit 1
  }
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$work/time.txt")
  rss_kib=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time.txt")
  seconds=$(awk -F: '{ s = 0; for (i = 1; i <= NF; ++i) s = s * 60 + $i; print s }' <<<"$wall")
  awk -v name="${command%% -o*}" -v s="$seconds" -v rss="$rss_kib" -v size="$size" 'BEGIN {
    printf "| `%s` | %.1f s | %.0f MB/s | %.0f MiB | %.2f |\n", name, s, size / 1e6 / s, rss / 1024, rss * 1024 / size }'
done
