#!/usr/bin/env bash
# The demo command: builds kvremap and the examples, then on the simulated driver (no GPU needed)
# 1) runs the remap demo under LD_PRELOAD=libkvremap.so and summarises its trace, and
# 2) runs the seed scenario (one rank of Llama-4 Maverick FP8 TP=8 on an H100) three ways — stock at
#    0.95 (out of memory after sizing the KV cache), stock at 0.8, and kvremap at 0.95 — as a table
#    (the KV on host memory read from kvremap's trace: the end of every KV tensor, where it did not fit).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/build.sh" --target remap_demo vllm_like kvremap kvremap_cli
traces=$(mktemp -d "${TMPDIR:-/tmp}/kvremap-demo.XXXXXX")

echo "demo: examples/remap_demo on a simulated 80 GiB H100 under LD_PRELOAD=libkvremap.so"
SIMCUDA_DEVICE_MEMORY=80GiB KVREMAP_TRACE_DIR="$traces" LD_PRELOAD="$build/lib/libkvremap.so" \
  "$build/bin/remap_demo" "$@" | tail -1
"$build/bin/kvremap" report "$traces"/kvremap-*.json | sed -n '/^device 0/,/all live/p'
rm -f "$traces"/kvremap-*.json

scenario=$root/examples/vllm_like/scenarios/seed-maverick-h100-tp8.json
# The example imitates `vllm serve`; run under that name, kvremap recognises the engine from its
# command line as it recognises vLLM itself (and expects the CUDA-graph captures vLLM makes).
mkdir -p "$traces/bin"
ln -s "$build/bin/vllm_like" "$traces/bin/vllm"
engine=$traces/bin/vllm
# The simulated device the scenario describes (79.19 GiB, 0.5 GiB context, graph-exec cost).
while IFS= read -r line; do export "${line?}"; done < <("$build/bin/vllm_like" --scenario "$scenario" --print-simcuda-env)

# Host bytes of the "kv committed" event in the newest trace of $traces, in GiB; "-" without one.
kv_on_host() {
  local file bytes
  file=$(ls -t "$traces"/kvremap-*.json 2>/dev/null | head -1)
  bytes=$([[ -n $file ]] && grep '"name":"kv committed"' "$file" | grep -o '"host_bytes":[0-9]*' | head -1 | cut -d: -f2)
  if [[ -n $bytes ]]; then awk -v b="$bytes" 'BEGIN { printf "%.2f GiB\n", b / 1073741824 }'; else echo "-"; fi
}

run() {  # label utilization [env...]; prints one table row
  local label=$1 util=$2 out status kv outcome peak host
  shift 2
  set +e
  out=$(env "$@" "$engine" --scenario "$scenario" --gpu-memory-utilization "$util" 2>&1)
  status=$?
  set -e
  kv=$(grep -o 'Available KV cache memory: [0-9.]* GiB' <<<"$out" | grep -o '[0-9.]* GiB' || echo "-")
  if [[ $status -eq 0 ]]; then outcome="started"; else outcome="OOM ($(grep -o 'phase [a-zA-Z-]* *([a-z]*)\|phase [a-zA-Z-]*' <<<"$out" | tail -1))"; fi
  peak=$(grep -o 'autotune peak [0-9.]* GiB' <<<"$out" | grep -o '[0-9.]* GiB' || echo "-")
  host=-
  [[ " $* " == *" LD_PRELOAD="* ]] && host=$(kv_on_host)
  printf '  %-22s %-30s %-12s %-14s %-10s\n' "$label" "$outcome" "$kv" "$peak" "$host"
  [[ $label == "stock 0.8" ]] && stock08=${kv% GiB}
  [[ $label == "kvremap 0.95" ]] && kvremap095=${kv% GiB}
  return 0
}
echo
echo "demo: the seed scenario ($scenario)"
printf '  %-22s %-30s %-12s %-14s %-10s\n' "run" "outcome" "KV cache" "post-KV peak" "KV on host"
run "stock 0.95" 0.95
run "stock 0.8" 0.8
# Profiles in the demo's own directory: the first kvremap start writes one, the second is sized from it.
run "kvremap 0.95" 0.95 LD_PRELOAD="$build/lib/libkvremap.so" KVREMAP_TRACE_DIR="$traces" KVREMAP_PROFILE_DIR="$traces/profiles"
first_trace=$(ls -t "$traces"/kvremap-*.json | head -1)
run "kvremap 0.95, again" 0.95 LD_PRELOAD="$build/lib/libkvremap.so" KVREMAP_TRACE_DIR="$traces" KVREMAP_PROFILE_DIR="$traces/profiles"
awk -v a="$kvremap095" -v b="$stock08" 'BEGIN { if (b > 0) printf "  KV cache with kvremap at 0.95 vs stock at 0.8: %.2fx\n", a / b }'
echo "  kvremap's trace of that run:"
report=$("$build/bin/kvremap" report "$first_trace")
sed '/^kv cache, device/,$d' <<<"$report" | grep -E "kv |phases:|->|capture " | sed 's/^/  /'
sed -n '/^kv cache, device/,/^  committed/p' <<<"$report" | sed 's/^/  /'
