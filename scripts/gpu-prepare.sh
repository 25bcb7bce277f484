#!/usr/bin/env bash
# Builds what the GPU checks need against the real CUDA runtime into build-gpu/, with the shared
# libraries the GPU machine may lack copied to build-gpu/deplibs (it reaches no package registry).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build-gpu
"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$out" -DKVREMAP_EXAMPLES_REAL_CUDA=ON -DKVREMAP_BUILD_TESTS=OFF >/dev/null
cmake --build "$out" -j "${JOBS:-2}" --target kvremap kvremap_cli remap_demo
mkdir -p "$out/deplibs"
for binary in "$out/lib/libkvremap.so" "$out/bin/kvremap" "$out/bin/remap_demo"; do
  ldd "$binary" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
      *) cp -L "$lib" "$out/deplibs/" ;;
    esac
  done
done
# The pass-through benchmark of issue 3 runs on the simulated driver, from the regular build: the
# binary and the simulator go along in build-gpu/simbench. There the binary's RPATH (this machine's
# build tree) names nothing, and LD_LIBRARY_PATH finds the simulator.
"$root/scripts/build.sh" --target bench_overhead >/dev/null
build=${BUILD_DIR:-$root/build}
mkdir -p "$out/simbench"
cp "$build/bin/bench_overhead" "$out/simbench/"
cp -P "$build"/simcuda/lib*.so* "$out/simbench/"
echo "gpu-prepare: $out ready; carry build-gpu to the GPU machine and run scripts/gpu-check.sh there"
ls "$out/deplibs"
