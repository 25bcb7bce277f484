#!/usr/bin/env bash
# SIGKILLs the seed start-up (examples/vllm_like as `vllm`, KVREMAP_MODE=defer, utilisation 0.95) at
# random points and checks every trace it leaves behind with `kvremap validate`.
# Usage: bench/kill_loop.sh [RUNS (default 200)] [BUILD_DIR (default build)]. Exits 1 if any trace fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-200}
build=$(cd "${2:-$root/build}" && pwd)
scenario=$root/examples/vllm_like/scenarios/seed-maverick-h100-tp8.json
for f in "$build/bin/vllm_like" "$build/bin/kvremap" "$build/lib/libkvremap.so"; do
  [[ -e $f ]] || { echo "kill_loop: $f missing: run scripts/build.sh first" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$build/bin/vllm_like" "$work/vllm"  # recognised as vLLM from its name, as `vllm serve` is
mapfile -t simcuda < <("$build/bin/vllm_like" --scenario "$scenario" --print-simcuda-env)
engine=(env "${simcuda[@]}" LD_PRELOAD="$build/lib/libkvremap.so" KVREMAP_MODE=defer
        "$work/vllm" --scenario "$scenario" --gpu-memory-utilization 0.95)

# One whole start-up, timed, to spread the kill points over it (and a little past its end).
start=$(date +%s%N)
KVREMAP_TRACE_DIR=$work KVREMAP_PROFILE_DIR=$work "${engine[@]}" >/dev/null 2>&1
whole_us=$((($(date +%s%N) - start) / 1000))
rm -f "$work"/*.json

killed=0 traces=0 valid=0 events=0
for ((i = 0; i < runs; i++)); do
  dir=$work/run$i
  mkdir "$dir"
  KVREMAP_TRACE_DIR=$dir KVREMAP_PROFILE_DIR=$dir "${engine[@]}" >/dev/null 2>&1 &
  pid=$!
  delay_us=$((RANDOM * 32768 + RANDOM))
  delay_us=$((delay_us % (whole_us * 11 / 10 + 1)))
  sleep "$(printf '%d.%06d' $((delay_us / 1000000)) $((delay_us % 1000000)))"
  kill -KILL "$pid" 2>/dev/null && killed=$((killed + 1)) || true
  wait "$pid" 2>/dev/null || true
  for trace in "$dir"/kvremap-*.json; do
    [[ -e $trace ]] || continue
    traces=$((traces + 1))
    if out=$("$build/bin/kvremap" validate "$trace" 2>&1); then
      valid=$((valid + 1))
      events=$((events + $(grep -c '"ph"' "$trace" || true)))
    else
      echo "kill_loop: run $i, killed after ${delay_us} us: $trace does not validate: $out" >&2
      cp "$trace" "$root/kill_loop_failed_$i.json"
    fi
  done
  rm -rf "$dir"
done
echo "kill_loop: start-up ${whole_us} us; ${runs} runs, ${killed} killed before the end; ${traces} traces, ${valid} validate (${events} events in all)"
[[ $valid -eq $traces ]]
