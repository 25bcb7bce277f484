// Which engine runs in this process and what its own flags say: read from command lines, nothing else.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/command_line.h"

namespace kvremap::policy {

enum class EngineKind : std::uint8_t { vllm, sglang, other };
std::string_view to_string(EngineKind kind);

// What kvremap knows of the engine before its start-up decides anything: read from its command line by
// the engine's model (policy/vllm_model.h, policy/sglang_model.h), which says which flag gives each field.
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
  // SGLang's prefill batch flags, for its activation estimate: --chunked-prefill-size (-1 or 0: chunking
  // off) and --max-prefill-tokens.
  std::optional<std::int64_t> chunked_prefill_size;
  std::optional<std::uint64_t> max_prefill_tokens;
  // The flag that hands the KV cache to a KV connector or to prefill/decode disaggregation, printable;
  // empty without one. The engine registers its KV cache with the connector right after allocating it,
  // by legacy CUDA IPC, which VMM memory refuses, or for RDMA: KV then stays out of the arena.
  std::string kv_connector;
  // Where the engine's server accepts requests: it listens there only once its start-up is over. 0 and
  // empty where unknown, and for a start-up that runs no server.
  std::uint16_t serving_port = 0;
  std::string serving_socket;
};

// The engine an engine's process title names, as setproctitle leaves /proc/<pid>/cmdline (the title,
// then NULs); nullopt for any other line. A title carries none of the engine's flags.
std::optional<EngineKind> title_kind(std::span<const std::string> argv);

// The engine one command line names: by the program or one of the first few words (a model path later on
// the line does not count), or by a process title; `other` for any other line.
EngineKind named_engine(std::span<const std::string> argv);

// The engine and its flags from one command line: the engine is the one the line names (named_engine).
// Flags take both `--flag v` and `--flag=v`. A process title names the engine but none of its flags:
// graphs are then not expected.
EngineProfile profile_engine(std::span<const std::string> argv);

// KVREMAP_ENGINE: `auto` keeps the detected kind; `vllm`/`sglang`/`other` replace it, and the engine's
// own flags are read again with that kind's rules.
EngineProfile with_kind(std::span<const std::string> argv, EngineKind kind);

// The environment variables that change what `kind` allocates, in the order profile keys list them
// (PyTorch's caching-allocator configuration for both engines, then each engine's own). Empty for `other`.
std::span<const std::string_view> memory_environment_variables(EngineKind kind);

// How the profile key names a native module loaded in the engine's process when it is one of the engine's
// own or PyTorch's CUDA library (`torch/lib/libtorch_cuda.so`), or nullopt: the path from the package
// directory on, so that the same build installed elsewhere is the same start. Never a module under a cache
// directory (`/.cache/`, compile caches: their builds change from one start to the next).
std::optional<std::string> engine_module_label(EngineKind kind, std::string_view path);

}  // namespace kvremap::policy
