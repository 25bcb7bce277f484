#!/usr/bin/env bash
# The GPU checks of issues 2 and 3 (and issue 3's overhead benchmark, on the simulated driver), run
# on a machine with an NVIDIA GPU from the repository root after scripts/gpu-prepare.sh built
# build-gpu/ elsewhere. Results go to $OUT (default ./gpu-out).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-gpu
out=${OUT:-$root/gpu-out}
mkdir -p "$out/traces"
export LD_LIBRARY_PATH="$build/deplibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvcc --version | tail -1
} > "$out/machine.txt" 2>&1

# Issue 2: granularities, VMM latencies for 2 MiB and 1 GiB handles, host-located handles, and a graph
# captured before a remap replaying into the new backing.
timeout 240 "$build/bin/remap_demo" --granules 4 --latency > "$out/remap_demo.txt" 2>&1
echo "remap_demo exit $?" >> "$out/remap_demo.txt"

# Issue 3: PyTorch under LD_PRELOAD; the trace's bytes against torch.cuda.memory_stats().
KVREMAP_TRACE_DIR="$out/traces" LD_PRELOAD="$build/lib/libkvremap.so" \
  timeout 240 python3 "$root/tests/gpu/torch_check.py" > "$out/torch_check.txt" 2>&1
echo "torch_check exit $?" >> "$out/torch_check.txt"
for trace in "$out"/traces/kvremap-*.json; do
  "$build/bin/kvremap" report "$trace" >> "$out/report.txt" 2>&1
  "$build/bin/kvremap" validate "$trace" >> "$out/report.txt" 2>&1
done
# Issue 3, section 6: the pass-through overhead on a second machine (the development VM's figures
# move by tens of ns with its neighbours' load). 20 rounds: about a minute and a half.
LD_LIBRARY_PATH="$build/simbench:$LD_LIBRARY_PATH" \
  timeout 200 "$build/simbench/bench_overhead" "$build/lib/libkvremap.so" 20000 200000 16 5 20 \
  > "$out/bench_overhead.txt" 2>&1
echo "bench_overhead exit $?" >> "$out/bench_overhead.txt"
cat "$out/machine.txt" "$out/remap_demo.txt" "$out/torch_check.txt" "$out/bench_overhead.txt"
