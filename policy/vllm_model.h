// What kvremap knows of vLLM (V1 runner and Model Runner V2): identity, flags, defaults, sizing, profile key.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/command_line.h"
#include "policy/engine.h"
#include "policy/memory_share.h"

namespace kvremap::policy {

// Citations are file:line under vllm/ in vLLM main: those with a bare line at be06873198cd (2026-08-19,
// /work/shared/engines/ENGINES-2026.md), those marked "017e9f4" at 017e9f4448b7 (2026-08-17).
//
// The two model runners. Model Runner V2 (v1/worker/gpu/model_runner.py) is the default; V1's
// (v1/worker/gpu_model_runner.py) runs where VLLM_USE_V2_MODEL_RUNNER=0 or the configuration falls back
// to it (017e9f4: envs.py:2023-2025, config/vllm.py:615-618, the worker's choice at
// v1/worker/gpu_worker.py:424-430). Both size the KV cache the same way: `requested = ceil(total x
// --gpu-memory-utilization)`, refused when the first memory query finds less free (017e9f4:
// v1/worker/utils.py:444-464); after the weights a profiling forward pass, then the sizing snapshot;
// KV = requested - what the process holds then - the profiled activation peak. Both then estimate
// graph memory while profiling (profile_cudagraph_memory, 017e9f4: v1/worker/gpu_model_runner.py:6780
// for V1, v1/worker/gpu/model_runner.py:843 for V2; applied unless
// VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0, v1/worker/gpu_worker.py:527-539). Where they differ for
// kvremap: V1 allocates a minimal KV cache for that estimate and frees it before the real one
// (gpu_model_runner.py:6628-6651,6701-6734), which phase inference follows through (policy/phases.h);
// V2 captures FULL graphs on PyTorch's process-wide capture stream (v1/worker/gpu/cudagraph_utils.py:321-365).
// Neither difference shows on the command line: the runner is part of the profile key through its variable.

// --gpu-memory-utilization when the command line does not give one (config/cache.py:80).
inline constexpr double kVllmDefaultUtilization = 0.92;
// --port when not given (017e9f4: entrypoints/openai/cli_args.py:248).
inline constexpr std::uint16_t kVllmDefaultPort = 8000;
// The flag that sets the share of the device vLLM sizes its KV cache within.
inline constexpr std::string_view kVllmShareFlag = "--gpu-memory-utilization";
// vLLM's error when a share leaves no memory for KV after profiling (017e9f4: v1/core/kv_cache_utils.py:739).
inline constexpr std::string_view kVllmRefusalWithoutKv =
    "no available memory for the cache blocks (profiling): the share is below what profiling measured";

// A word of a command line that names vLLM: the program `vllm` (`vllm serve`, a path ending in `/vllm`)
// or a module `vllm.…` (`-m vllm.entrypoints.openai.api_server`).
bool vllm_named_by(std::string_view arg);

// vLLM's process titles, set with setproctitle before any CUDA call: "VLLM::EngineCore"
// (v1/engine/core.py:1288), "VLLM::Worker" and "VLLM::Worker_TP0" (v1/executor/multiproc_executor.py:1058,1086).
bool vllm_titled(std::string_view title);

// Whether the line starts vLLM's server: `vllm serve` (entrypoints/cli/serve.py; also
// `-m vllm.entrypoints.cli.main serve`), `-m vllm.entrypoints.openai.api_server` or
// `-m vllm.entrypoints.api_server`. Anything else (`vllm bench`, `vllm chat`, a script) is offline.
bool vllm_runs_server(std::span<const std::string> argv);

// Reads vLLM's flags from `argv` (either spelling: `--enforce_eager` is `--enforce-eager`,
// utils/argparse_utils.py:314-334) into `profile`:
// - graphs: none under --enforce-eager (017e9f4: engine/arg_utils.py:875), cudagraph_mode NONE in any of the
//   compilation-config spellings, a compilation mode other than VLLM_COMPILE (config/vllm.py:1425-1436),
//   -O0 / --optimization-level 0 (017e9f4: utils/argparse_utils.py:322-334), or --config (flags in a
//   YAML file kvremap does not read, utils/argparse_utils.py:477);
// - the KV connector: --kv-transfer-config, its JSON or dotted keys (engine/arg_utils.py:1636); the
//   connector registers the KV cache right after its allocation (gpu_model_runner.py:7807-7812,
//   `register_kv_caches`);
// - where the server listens: --uds PATH (host and port then ignored, 017e9f4:
//   entrypoints/openai/cli_args.py:261), else --port, kVllmDefaultPort where not given; offline: nowhere.
//   vLLM binds early but listens when uvicorn serves, after the engine core is ready
//   (entrypoints/openai/api_server.py:629-655);
// - the memory flags: --gpu-memory-utilization (017e9f4: engine/arg_utils.py:1211), --kv-cache-memory-bytes
//   (017e9f4: :1214) and its argparse prefix --kv-cache-memory.
void read_vllm_flags(std::span<const std::string> argv, EngineProfile& profile);

// The environment variables that change what vLLM allocates, in the order profile keys list them:
// PyTorch's caching-allocator configuration (PYTORCH_CUDA_ALLOC_CONF and its device-neutral spelling
// PYTORCH_ALLOC_CONF), the model runner (VLLM_USE_V2_MODEL_RUNNER), the graph-memory estimate while
// profiling (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS) and the attention backend
// (VLLM_ATTENTION_BACKEND: workspaces and which graphs it captures).
std::span<const std::string_view> vllm_memory_environment_variables();

// The package directories of vLLM's native modules (`vllm/_C.abi3.so`, `vllm/vllm_flash_attn/…`).
std::span<const std::string_view> vllm_module_packages();

// The flags dropped from the profile key, as vLLM's parser declares them (entrypoints/openai/cli_args.py
// FrontendArgs, engine/arg_utils.py EngineArgs): where the server listens, what it logs, the share of
// memory it asks for, and front-end and sampling flags that change no memory.
std::span<const FlagSpec> vllm_flags_ignored_by_profiles();

// The model in a profile key's arguments (program basename first, `--flag=value` already split) written
// one way: `vllm serve MODEL` and `vllm serve --model MODEL` are one start — the positional model takes
// precedence over --model (entrypoints/cli/serve.py:51-53 at 017e9f4) — so under `serve` the model is the
// positional word after the subcommand and every --model is removed. Other lines (`-m
// vllm.entrypoints.openai.api_server --model MODEL`) have no positional model and stay as they are.
void canonical_vllm_model(std::vector<std::string>& key_args);

// Where the model's name or path stands in canonical key arguments: the positional word after `serve`,
// else the value of `--model`; nothing without one.
std::optional<std::size_t> vllm_model_value_index(std::span<const std::string> key_args);

// The share of the device that sizes the KV cache: --gpu-memory-utilization, kVllmDefaultUtilization
// where not given; nothing when --kv-cache-memory gives the size, or for another engine.
std::optional<double> vllm_memory_share(const EngineProfile& engine);

// Why the KV size does not come from a memory query (--kv-cache-memory given), for the sizing line;
// nothing otherwise, and for another engine.
std::optional<std::string> vllm_sizing_not_applicable(const EngineProfile& engine);

// Why kvremap deferred nothing where --kv-cache-memory gave the KV size: vLLM then takes no memory
// snapshot after its weights (v1/worker/gpu_worker.py:489-510, profile_run only), so no sizing query
// opens a KV window. Nothing otherwise, and for another engine.
std::optional<std::string> vllm_nothing_deferred_reason(const EngineProfile& engine);

// The flags that give a start the `kv_bytes` of KV a shifted start got, without kvremap.
std::string vllm_same_start_flags(std::uint64_t kv_bytes);

// The flags that shrink vLLM's KV cache as `shrink` says: --gpu-memory-utilization lowered (from
// `utilization`, or the default), or --kv-cache-memory for a start without kvremap. Under kvremap the
// utilisation only, since --kv-cache-memory defers nothing.
std::string vllm_shrink_flags(const KvShrink& shrink, std::optional<double> utilization, bool kv_size_given);

// Whether vLLM refuses to start (ValueError, before any KV) when its first memory query finds
// `first_query_free` bytes free and its share asks for `requested_bytes` (017e9f4: v1/worker/utils.py:444-464).
bool vllm_refuses_at_start(std::uint64_t first_query_free, std::uint64_t requested_bytes);

// "--gpu-memory-utilization 0.95" / "--gpu-memory-utilization=0.95" in a command line joined by spaces.
std::optional<double> gpu_memory_utilization_from(std::string_view cmdline);

}  // namespace kvremap::policy
