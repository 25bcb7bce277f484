// Which engine runs in this process and what its own flags say: read from command lines, nothing else.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvremap::policy {

enum class EngineKind : std::uint8_t { vllm, sglang, other };
std::string_view to_string(EngineKind kind);

// What kvremap knows of the engine before its start-up decides anything.
// vLLM's --gpu-memory-utilization when the command line does not give one (config/cache.py:80).
inline constexpr double kVllmDefaultUtilization = 0.92;

struct EngineProfile {
  EngineKind kind = EngineKind::other;
  // Captures follow the KV burst: a recognised engine in graph mode. Only then may start-up launches
  // run on deferred KV before the first capture (see commit_trigger.h).
  bool graphs_expected = false;
  // Why graphs are not expected, for the one info line: "--enforce-eager", "--disable-cuda-graph",
  // "cudagraph_mode NONE", "-O0", "not a recognised engine (vLLM, SGLang)". Empty when expected.
  std::string eager_reason;
  // The engine's memory-share flags as given, for the fix-it hints.
  std::optional<double> gpu_memory_utilization;  // vLLM --gpu-memory-utilization
  std::optional<double> mem_fraction_static;     // SGLang --mem-fraction-static
  std::optional<std::uint64_t> kv_cache_memory;  // vLLM --kv-cache-memory(-bytes)
  // SGLang's prefill batch flags, for its activation estimate (policy/sglang_model.h): --chunked-prefill-size
  // (-1 or 0: chunking off) and --max-prefill-tokens (an int, or SI/IEC suffixed: 16k, 16Ki).
  std::optional<std::int64_t> chunked_prefill_size;
  std::optional<std::uint64_t> max_prefill_tokens;
  // The flag that hands the KV cache to a KV connector or to prefill/decode disaggregation (vLLM
  // `--kv-transfer-config`, SGLang `--disaggregation-mode prefill|decode`), printable; empty without one.
  // The engine registers its KV cache with the connector right after allocating it (vLLM
  // gpu_model_runner.py:7807-7812, `register_kv_caches`; SGLang's Mooncake `batch_register`), by legacy
  // CUDA IPC (LMCache), which VMM memory refuses, or for RDMA: KV then stays out of the arena.
  std::string kv_connector;
  // Where the engine's server accepts requests: it listens there only once its start-up is over (vLLM
  // binds early but listens when uvicorn serves, after the engine core is ready:
  // entrypoints/openai/api_server.py:629-655; SGLang starts uvicorn after its schedulers report ready:
  // entrypoints/http_server.py:2509-2523). vLLM `--port` (default 8000, entrypoints/openai/cli_args.py:248)
  // or `--uds PATH`; SGLang `--port` (default 30000, server_args.py:974). 0 and empty where unknown.
  std::uint16_t serving_port = 0;
  std::string serving_socket;
};

// Splits /proc/<pid>/cmdline's NUL-separated contents into arguments.
std::vector<std::string> split_cmdline(std::string_view raw);

// True for a Python multiprocessing child (spawn or forkserver), whose own command line says nothing
// of the engine: the profile is then read from the nearest ancestor's.
bool is_multiprocessing_child(std::span<const std::string> argv);

// Flag names as the engines' parsers read them: vLLM's FlexibleArgumentParser takes `--enforce_eager`
// for `--enforce-eager` (utils/argparse_utils.py:314-334). Underscores in a `--` argument become dashes
// up to its `=` or the `.` of a dotted config key; values are kept as given.
std::vector<std::string> dashed_flags(std::span<const std::string> argv);

// The engine an engine's process title names, as setproctitle leaves /proc/<pid>/cmdline (the title,
// then NULs): vLLM's "VLLM::EngineCore" and "VLLM::Worker_TP0" (v1/engine/core.py,
// v1/executor/multiproc_executor.py), SGLang's "sglang::scheduler_TP0" (managers/scheduler.py).
// nullopt for any other line. A title carries none of the engine's flags.
std::optional<EngineKind> title_kind(std::span<const std::string> argv);

// The engine and its flags from one command line. vLLM: an argument `vllm` (`vllm serve`), a path
// ending in `/vllm`, or a module `vllm.…` (`-m vllm.entrypoints.openai.api_server`). SGLang: an
// argument `sglang` or a module `sglang.…` (`-m sglang.launch_server`). Flags take both `--flag v`
// and `--flag=v`. A process title names the engine but none of its flags: graphs are then not expected.
EngineProfile profile_engine(std::span<const std::string> argv);

// The environment variables that change what `kind` allocates, in the order profile keys list them:
// PyTorch's caching-allocator configuration (PYTORCH_CUDA_ALLOC_CONF and its device-neutral spelling
// PYTORCH_ALLOC_CONF: expandable segments, split sizes, garbage-collection threshold) for both engines;
// vLLM's model runner (VLLM_USE_V2_MODEL_RUNNER), graph-memory estimate while profiling
// (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS) and attention backend (VLLM_ATTENTION_BACKEND: workspaces and
// which graphs it captures); SGLang's Mooncake memory pool for the KV cache
// (SGLANG_MOONCAKE_CUSTOM_MEM_POOL, mem_cache/memory_pool.py:1447-1451). Empty for `other`.
std::span<const std::string_view> memory_environment_variables(EngineKind kind);

// How the profile key names a native module loaded in the engine's process when it is one of the engine's
// own or PyTorch's, or nullopt: the path from the package directory on, so that the same build installed
// elsewhere is the same start. vLLM's extensions (`vllm/_C.abi3.so`, `vllm/vllm_flash_attn/…`), SGLang's
// (`sgl_kernel/…`, `sglang/…`) and PyTorch's CUDA library (`torch/lib/libtorch_cuda.so`); never a module
// under a cache directory (`/.cache/`, compile caches: their builds change from one start to the next).
std::optional<std::string> engine_module_label(EngineKind kind, std::string_view path);

// The file `--config FILE` (or `--config=FILE`) names: vLLM reads flags from it
// (utils/argparse_utils.py:477), SGLang too (server_args.py:6123). nullopt without one.
std::optional<std::string> config_file(std::span<const std::string> argv);

// KVREMAP_ENGINE: `auto` keeps the detected kind; `vllm`/`sglang`/`other` replace it, and the engine's
// own flags are read again with that kind's rules.
EngineProfile with_kind(std::span<const std::string> argv, EngineKind kind);

}  // namespace kvremap::policy
