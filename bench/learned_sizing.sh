#!/usr/bin/env bash
# Learned sizing on the simulated scenarios: stock at its highest safe share and at 0.95 (vLLM) / 0.9
# (SGLang), kvremap's first start, its second start sized from the profile, `fit` at the engine's usual
# share, and the oracle (the KV the device held beside the headroom at the first start's commit).
# Then the serving-memory convergence: several starts of one command with one profile directory (the
# headroom each kept and why, where its KV went, serving allocations carried on host memory, outcome).
# Prints one Markdown table per case for docs/benchmarks.md.
# Usage: bench/learned_sizing.sh [BUILD_DIR (default build)].
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
for f in "$build/bin/vllm_like" "$build/lib/libkvremap.so"; do
  [[ -e $f ]] || { echo "learned_sizing: $f missing: run scripts/build.sh first" >&2; exit 2; }
done
command -v python3 >/dev/null || { echo "learned_sizing: python3 is needed to read the traces" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$build/bin/vllm_like" "$work/vllm"
ln -s "$build/bin/vllm_like" "$work/sglang"

# kv_figures TRACE_DIR: "device_GiB host_GiB oracle_GiB" from the kv committed / kv commit plan events.
kv_figures() {
  python3 - "$1" <<'PY'
import glob, json, sys
dev = host = oracle = None
for path in glob.glob(sys.argv[1] + "/kvremap-*.json"):
    for line in open(path):
        line = line.strip().lstrip(",").rstrip(",")
        if '"cat":"kv"' not in line:
            continue
        e = json.loads(line)
        a = e.get("args", {})
        if e["name"] == "kv committed":
            dev, host = a["device_bytes"], a["host_bytes"]
        elif e["name"] == "kv commit plan":
            oracle = a["device_free_bytes"] - a["headroom_bytes"]
g = lambda b: "-" if b is None else "%.2f" % (b / 2**30)
print(g(dev), g(host), g(oracle))
PY
}

# row LABEL PROGRAM PROFILE_DIR ENV... -- ARGS...: runs one start, prints a table row.
stock_time=""
row() {
  local label=$1 program=$2 profiles=$3; shift 3
  local env=() args=()
  while [[ $1 != -- ]]; do env+=("$1"); shift; done
  shift
  args=("$@")
  local traces=$work/traces-$RANDOM$RANDOM
  mkdir -p "$traces"
  local start end status=0 out
  start=$(date +%s%N)
  # SGLang's replica starts as its server (`sglang serve`), vLLM's as an offline start-up.
  local lead=()
  [[ $program != sglang ]] || lead=(serve)
  out=$(env "${simcuda[@]}" KVREMAP_TRACE_DIR="$traces" KVREMAP_PROFILE_DIR="$profiles" "${env[@]}" \
        "$work/$program" "${lead[@]}" --scenario "$scenario" "${args[@]}" 2>&1) || status=$?
  end=$(date +%s%N)
  local ms=$(((end - start) / 1000000))
  [[ -n $stock_time ]] || stock_time=$ms
  local outcome
  if [[ $status == 0 ]]; then outcome=starts; else outcome="exit $status"; fi
  local kv_line; kv_line=$(grep -o 'started, KV [0-9.]* GiB' <<<"$out" | grep -o '[0-9.]* GiB' || true)
  read -r dev host oracle < <(kv_figures "$traces")
  if [[ $dev == - && -n $kv_line ]]; then dev=${kv_line% GiB}; host=0.00; fi
  printf '| %s | %s | %s | %s | %s | %d ms (%.2fx) |\n' "$label" "$dev" "$host" "$outcome" "$oracle" "$ms" \
    "$(awk -v a="$ms" -v b="$stock_time" 'BEGIN { printf "%.2f", a / b }')"
}

header() {
  echo
  echo "$1"
  echo
  echo "| Start | KV on device (GiB) | KV on host (GiB) | Outcome | Oracle (GiB) | Start-up time (vs first row) |"
  echo "|---|---|---|---|---|---|"
  stock_time=""
}

pre=(LD_PRELOAD="$build/lib/libkvremap.so")
for scenario in "$root"/examples/vllm_like/scenarios/seed-maverick-h100-tp8.json \
                "$root"/examples/vllm_like/scenarios/seed-maverick-h100-tp8-graph-estimate.json; do
  mapfile -t simcuda < <("$build/bin/vllm_like" --scenario "$scenario" --print-simcuda-env)
  header "vLLM-like, $(basename "$scenario" .json):"
  row "stock 0.8" vllm "$work/none" KVREMAP_MODE=observe -- --gpu-memory-utilization 0.8
  row "stock 0.95" vllm "$work/none" KVREMAP_MODE=observe -- --gpu-memory-utilization 0.95
  p=$work/profiles-$RANDOM
  row "kvremap 0.95, first start" vllm "$p" "${pre[@]}" -- --gpu-memory-utilization 0.95
  row "kvremap 0.95, second start" vllm "$p" "${pre[@]}" -- --gpu-memory-utilization 0.95
  p=$work/profiles-$RANDOM
  row "kvremap 0.9, first start" vllm "$p" "${pre[@]}" -- --gpu-memory-utilization 0.9
  row "kvremap 0.9 fit, second start" vllm "$p" "${pre[@]}" KVREMAP_SIZING=fit -- --gpu-memory-utilization 0.9
done

scenario=$root/examples/vllm_like/scenarios/seed-maverick-h100-tp8.json
mapfile -t simcuda < <("$build/bin/vllm_like" --scenario "$scenario" --print-simcuda-env)
header "SGLang-like, seed-maverick-h100-tp8:"
row "stock 0.85" sglang "$work/none" KVREMAP_MODE=observe -- --engine sglang --mem-fraction-static 0.85
row "stock 0.9" sglang "$work/none" KVREMAP_MODE=observe -- --engine sglang --mem-fraction-static 0.9
p=$work/profiles-$RANDOM
row "kvremap 0.9, first start" sglang "$p" "${pre[@]}" -- --engine sglang --mem-fraction-static 0.9
row "kvremap 0.9, second start" sglang "$p" "${pre[@]}" -- --engine sglang --mem-fraction-static 0.9
p=$work/profiles-$RANDOM
row "kvremap 0.85, first start" sglang "$p" "${pre[@]}" -- --engine sglang --mem-fraction-static 0.85
row "kvremap 0.85 fit, second start" sglang "$p" "${pre[@]}" KVREMAP_SIZING=fit -- --engine sglang --mem-fraction-static 0.85

# ---- Serving memory (issue 30): starts of one command with one profile directory -------------------

# serving_figures TRACE_DIR: "headroom_GiB|source|device_GiB|host_GiB|overflow_GiB" of one start.
serving_figures() {
  python3 - "$1" <<'PY'
import glob, json, sys
f = {"headroom": None, "source": "-", "dev": None, "host": None, "overflow": 0}
for path in glob.glob(sys.argv[1] + "/kvremap-*.json"):
    for line in open(path):
        line = line.strip().lstrip(",").rstrip(",")
        if '"cat":"kv"' not in line:
            continue
        e = json.loads(line)
        a = e.get("args", {})
        if e["name"] == "kv commit plan":
            f["headroom"], f["source"] = a["headroom_bytes"], a["headroom_source"]
        elif e["name"] == "kv committed":
            f["dev"], f["host"] = a["device_bytes"], a["host_bytes"]
        elif e["name"] == "kv serving overflow":
            f["overflow"] = max(f["overflow"], a["host_bytes"])
g = lambda b: "-" if b is None else "%.2f" % (b / 2**30)
print("|".join([g(f["headroom"]), f["source"], g(f["dev"]), g(f["host"]), g(f["overflow"])]))
PY
}

# serving_row LABEL PROGRAM PROFILE_DIR -- ARGS...: one start under kvremap, one table row.
serving_row() {
  local label=$1 program=$2 profiles=$3; shift 4
  local traces=$work/traces-$RANDOM$RANDOM lead=() status=0 out
  mkdir -p "$traces"
  [[ $program != sglang ]] || lead=(serve)
  out=$(env "${simcuda[@]}" "${pre[@]}" KVREMAP_TRACE_DIR="$traces" KVREMAP_PROFILE_DIR="$profiles" \
        "$work/$program" "${lead[@]}" --scenario "$scenario" "$@" 2>&1) || status=$?
  local outcome=serves
  if [[ $status != 0 ]]; then
    outcome="exit $status"
    grep -q "phase serving failed" <<<"$out" && outcome="exit $status in serving"
  fi
  IFS='|' read -r headroom source dev host overflow < <(serving_figures "$traces")
  printf '| %s | %s (%s) | %s | %s | %s | %s |\n' "$label" "$headroom" "$source" "$dev" "$host" "$overflow" "$outcome"
}

serving_header() {
  echo
  echo "$1"
  echo
  echo "| Start | Headroom kept (GiB, source) | KV on device (GiB) | KV on host (GiB) | Serving allocations on host (GiB) | Outcome |"
  echo "|---|---|---|---|---|---|"
}

scenario=$root/examples/vllm_like/scenarios/seed-maverick-h100-tp8.json
mapfile -t simcuda < <("$build/bin/vllm_like" --scenario "$scenario" --print-simcuda-env)
serving_header "SGLang-like at --mem-fraction-static 0.93 (stock: exit 5 in capture), three starts, one profile directory:"
p=$work/profiles-$RANDOM
for n in 1 2 3; do
  serving_row "kvremap, start $n" sglang "$p" -- --engine sglang --mem-fraction-static 0.93
done

# A serving prefill of 6 GiB where profiling ran 3 GiB (vLLM) and SGLang's estimate for 2048-token chunks
# is 3 GiB: more than either first start keeps.
scenario=$work/serving-6gib.json
sed 's/"steps": 3/"steps": 3, "activation_peak": "6GiB"/' "$root/examples/vllm_like/scenarios/seed-maverick-h100-tp8.json" \
  >"$scenario"
serving_header "Serving prefill of 6 GiB, beyond the first start's headroom, two starts each, one profile directory:"
p=$work/profiles-$RANDOM
for n in 1 2; do serving_row "vLLM-like 0.95, start $n" vllm "$p" -- --gpu-memory-utilization 0.95; done
p=$work/profiles-$RANDOM
for n in 1 2; do
  serving_row "SGLang-like 0.93 --chunked-prefill-size 2048, start $n" sglang "$p" -- --engine sglang \
    --mem-fraction-static 0.93 --chunked-prefill-size 2048
done
