#!/usr/bin/env bash
# Installs the Debian packages kvremap builds against (idempotent); without root, prints the command instead.
set -euo pipefail

packages=(
  cmake make g++ pkg-config binutils
  dpkg-dev lintian  # the Debian package: dpkg-shlibdeps finds its dependencies, lintian checks it (scripts/package.sh)
  ccache  # compiler cache (CMakeLists.txt): rebuilds of sources already built on the machine are hits
  libunwind-dev libtbb-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev valgrind clang libclang-rt-dev
  python3-numba  # a real third-party driver-API client for the simulator's tests (tests/integration/numba_client.py)
  python3-setproctitle  # renames processes as vLLM and SGLang do (tests/integration/engine_tree.py)
  python3-setuptools python3-wheel python3-pip python3-venv  # the Python helper's wheel, built offline, tested in a venv
  python3-prometheus-client  # a strict parser of KVREMAP_METRICS_FILE (tests/integration/test_metrics.cpp)
  chromium  # the browser test of `kvremap plot` (headless)
  libcairo2-dev  # `kvremap plot -o x.png` draws with cairo (tools/plot/png.cpp)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    echo "install-deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    echo "install-deps: installing ${missing[*]} (sudo)"
    sudo DEBIAN_FRONTEND=noninteractive apt-get update -qq
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "install-deps: missing Debian packages; run as root:" >&2
    echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

# The CUDA toolkit (headers and nvcc) is NVIDIA's package, not Debian's: it must already be there.
cuda_root=${CUDAToolkit_ROOT:-/usr/local/cuda}
if [[ ! -f "$cuda_root/include/cuda.h" || ! -x "$cuda_root/bin/nvcc" ]]; then
  echo "install-deps: the CUDA toolkit was not found at $cuda_root (need include/cuda.h and bin/nvcc);" >&2
  echo "  install NVIDIA's cuda-toolkit package or set CUDAToolkit_ROOT" >&2
  exit 1
fi
