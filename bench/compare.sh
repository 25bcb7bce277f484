#!/usr/bin/env bash
# Compares builds of libkvremap.so by the in-process traced-pair overhead, in alternating children.
# Usage: bench/compare.sh ROUNDS SPEC [SPEC...]   SPEC: path/to/libkvremap.so, or VAR=value,...@path
# Each round runs one bench_overhead child per SPEC (the order rotated from round to round), each
# printing the median over 500 100-pair batches of hooked minus direct (see docs/benchmarks.md, the
# in-process row), with the simulated driver's mmap/munmap per pair. Prints, per SPEC, the mean of its
# children's medians ± 95% interval and, against the first SPEC, the mean of the per-round differences.
# Children vary by tens of ns from one to the next, so use 40 rounds or more to see 10–20 ns.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bench=${BENCH_OVERHEAD:-$root/build/bin/bench_overhead}
usage() { echo "usage: bench/compare.sh ROUNDS SPEC [SPEC...]  (SPEC: lib.so or VAR=value,...@lib.so)" >&2; exit 2; }
[[ $# -ge 2 && $1 =~ ^[1-9][0-9]*$ ]] || usage
rounds=$1
shift
specs=("$@")
[[ -x $bench ]] || { echo "compare.sh: no $bench (run scripts/build.sh)" >&2; exit 1; }
# The children run in a scratch directory: libraries are named to them by absolute path.
for k in "${!specs[@]}"; do
  spec=${specs[$k]}
  lib=${spec#*@}
  [[ -f $lib ]] || { echo "compare.sh: no library '$lib' in SPEC '$spec'" >&2; exit 1; }
  lib=$(realpath "$lib")
  if [[ $spec == *@* ]]; then specs[$k]="${spec%@*}@$lib"; else specs[$k]=$lib; fi
done
command -v python3 >/dev/null || { echo "compare.sh: python3 is needed for the summary" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for ((r = 0; r < rounds; r++)); do
  for ((j = 0; j < ${#specs[@]}; j++)); do
    i=$(((j + r) % ${#specs[@]}))
    spec=${specs[$i]} settings=() lib=${specs[$i]}
    if [[ $spec == *@* ]]; then
      IFS=, read -r -a settings <<<"${spec%@*}"
      lib=${spec#*@}
    fi
    mkdir -p "$work/trace"
    status=0
    line=$(cd "$work/trace" && env OVERHEAD_BENCH_CHILD=1 OVERHEAD_BENCH_PAIRED=1 SIMCUDA_HOST_BACKING=1 \
      KVREMAP_TRACE_DIR="$work/trace" "${settings[@]}" LD_PRELOAD="$lib" "$bench" 20000 1 1 5 2>"$work/stderr") ||
      status=$?
    # ld.so only warns when it cannot preload: such a child measured nothing.
    if grep -q "cannot be preloaded" "$work/stderr"; then
      echo "compare.sh: '$lib' was not preloaded: $(head -n1 "$work/stderr")" >&2
      exit 1
    fi
    rm -rf "$work/trace"
    median=$(awk '{print $4}' <<<"$line")
    [[ $status -eq 0 && -n $median && $median != nan ]] ||
      { echo "compare.sh: the child for '$spec' failed (exit $status): $(head -n1 "$work/stderr")" >&2; exit 1; }
    echo "$r $i $median" >>"$work/medians"
  done
done

python3 - "$work/medians" "${specs[@]}" <<'PY'
import math, sys
path, specs = sys.argv[1], sys.argv[2:]
by_spec = [dict() for _ in specs]
for line in open(path):
    r, i, median = line.split()
    by_spec[int(i)][int(r)] = float(median)
def mean_ci(xs):
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
    return m, 1.96 * sd / math.sqrt(len(xs))
for i, spec in enumerate(specs):
    m, ci = mean_ci(list(by_spec[i].values()))
    line = f"{spec}: {m:+.1f} ± {ci:.1f} ns per pair ({len(by_spec[i])} children)"
    if i:
        d = [by_spec[i][r] - by_spec[0][r] for r in by_spec[i]]
        dm, dci = mean_ci(d)
        line += f"; against the first: {dm:+.1f} ± {dci:.1f} ns, lower in {sum(x < 0 for x in d)}/{len(d)} rounds"
    print(line)
PY
