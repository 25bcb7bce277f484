#!/usr/bin/env bash
# The GPU checks, run on a machine with an NVIDIA GPU from the repository root after
# scripts/gpu-prepare.sh built build-gpu/ elsewhere. Results go to $OUT (default ./gpu-out).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-gpu
out=${OUT:-$root/gpu-out}
mkdir -p "$out/traces" "$out/traces-stock" "$out/traces-defer" "$out/traces-host"
export LD_LIBRARY_PATH="$build/deplibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvcc --version | tail -1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} > "$out/machine.txt" 2>&1

# VMM: granularities, latencies for 2 MiB and 1 GiB handles, host-located handles, and a graph
# captured before a remap replaying into the new backing.
timeout 90 "$build/bin/remap_demo" --granules 4 --latency > "$out/remap_demo.txt" 2>&1
echo "remap_demo exit $?" >> "$out/remap_demo.txt"

# Observe mode under PyTorch: the trace's bytes against torch.cuda.memory_stats().
KVREMAP_TRACE_DIR="$out/traces" LD_PRELOAD="$build/lib/libkvremap.so" \
  timeout 90 python3 "$root/tests/gpu/torch_check.py" > "$out/torch_check.txt" 2>&1
echo "torch_check exit $?" >> "$out/torch_check.txt"

# The commit invariant on a vLLM-shaped PyTorch start-up whose first request is an eager prefill:
# stock (observe mode, for its out-of-memory in the autotune step), then defer mode. The script is
# not `vllm serve`, so KVREMAP_ENGINE names the engine it imitates.
KVREMAP_TRACE_DIR="$out/traces-stock" LD_PRELOAD="$build/lib/libkvremap.so" \
  timeout 120 python3 "$root/tests/gpu/kv_defer_check.py" > "$out/kv_stock.txt" 2>&1
echo "kv_defer_check stock exit $?" >> "$out/kv_stock.txt"
KVREMAP_TRACE_DIR="$out/traces-defer" KVREMAP_MODE=defer KVREMAP_ENGINE=vllm KVREMAP_LOG_LEVEL=info \
  LD_PRELOAD="$build/lib/libkvremap.so" timeout 150 python3 "$root/tests/gpu/kv_defer_check.py" \
  > "$out/kv_defer.txt" 2>&1
echo "kv_defer_check defer exit $?" >> "$out/kv_defer.txt"
# The same with a headroom that leaves the KV cache short by about 30 GiB: the host tail at the end
# of every tensor (device and host handles side by side, a chunk split at the boundary) holds the
# graph's KV writes and the zero-fill.
KVREMAP_TRACE_DIR="$out/traces-host" KVREMAP_MODE=defer KVREMAP_ENGINE=vllm KVREMAP_LOG_LEVEL=info \
  KVREMAP_HEADROOM=70GiB LD_PRELOAD="$build/lib/libkvremap.so" timeout 150 python3 \
  "$root/tests/gpu/kv_defer_check.py" > "$out/kv_host_tail.txt" 2>&1
echo "kv_defer_check host tail exit $?" >> "$out/kv_host_tail.txt"

for trace in "$out"/traces*/kvremap-*.json; do
  echo "== $trace" >> "$out/report.txt"
  "$build/bin/kvremap" report "$trace" >> "$out/report.txt" 2>&1
  "$build/bin/kvremap" validate "$trace" >> "$out/report.txt" 2>&1
done

# The pass-through overhead on a second machine (8 rounds, on the simulated driver; SKIP_BENCH=1 skips it).
[[ -n "${SKIP_BENCH:-}" ]] || LD_LIBRARY_PATH="$build/simbench:$LD_LIBRARY_PATH" \
  timeout 60 "$build/simbench/bench_overhead" "$build/lib/libkvremap.so" 20000 200000 16 5 8 \
  > "$out/bench_overhead.txt" 2>&1
echo "bench_overhead exit $?" >> "$out/bench_overhead.txt"
tail -n 30 "$out/machine.txt" "$out/torch_check.txt" "$out/kv_stock.txt" "$out/kv_defer.txt" "$out/kv_host_tail.txt"
