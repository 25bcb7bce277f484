#!/bin/sh
# Records the conformance clients' output on a real GPU, as golden results to commit in place of expected/.
# Usage (on a machine with an NVIDIA GPU, its driver and the CUDA toolkit):
#   tests/simcuda/conformance/record.sh [OUTPUT_DIR]     (default: ./conformance-recording)
# Builds the clients against the toolkit's libcuda (this folder's CMakeLists.txt as a project of its own: no
# simulator, no kvremap), runs each once and writes OUTPUT_DIR/<client>.txt plus OUTPUT_DIR/MACHINE.txt.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-conformance-recording}
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT

cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release ${CUDAToolkit_ROOT:+-DCUDAToolkit_ROOT=$CUDAToolkit_ROOT} >/dev/null
cmake --build "$build" -j >/dev/null

mkdir -p "$out"
{
  echo "# Recorded $(date -u +%Y-%m-%dT%H:%M:%SZ) by tests/simcuda/conformance/record.sh"
  echo "# GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
  echo "# Driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)"
  echo "# CUDA toolkit: $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  echo "# Commit: $(git -C "$here" rev-parse HEAD 2>/dev/null || echo unknown)"
} > "$out/MACHINE.txt"

status=0
for client in conf_context conf_memory conf_host conf_vmm conf_stream conf_ipc_pools; do
  {
    cat "$out/MACHINE.txt"
    timeout 60 "$build/$client"
  } > "$out/$client.txt" || { echo "record.sh: $client exited with status $? (its output so far is in $out/$client.txt)" >&2; status=1; }
done
echo "record.sh: results in $out; compare them with $here/expected/ (diff -u), then copy them over it"
exit $status
