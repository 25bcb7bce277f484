// What kvremap knows of SGLang: identity, flags, defaults, its reserve and prefill estimate, profile key.
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

// Citations are file:line under python/sglang/srt/ in SGLang main of August 2026 (ed152d6c482e of
// /work/shared/engines/ENGINES-2026.md, and 1f5eeb6c5786 of 2026-08-21).
//
// How SGLang sizes its KV pool: after the weights, KV = free memory (the minimum over ranks) - its
// reserve, the reserve being (1 - --mem-fraction-static) x its free memory before the weights
// (model_executor/model_runner_kv_cache_mixin.py:104-117); it serves activations from that reserve.

// --port when not given (server_args.py:974).
inline constexpr std::uint16_t kSglangDefaultPort = 30000;
// The flag that sets the share of the device SGLang keeps for weights and KV.
inline constexpr std::string_view kSglangShareFlag = "--mem-fraction-static";
// SGLang's refusal when its reserve leaves no memory for the KV pool
// (model_executor/pool_configurator.py:63, "Not enough memory").
inline constexpr std::string_view kSglangRefusalWithoutKv =
    "not enough memory for the KV pool (profiling): the share's reserve is above what was free after the weights";

// A word of a command line that names SGLang: the program `sglang` (`sglang serve`) or a module
// `sglang.…` (`-m sglang.launch_server`).
bool sglang_named_by(std::string_view arg);

// SGLang's process titles: "sglang::scheduler_TP0" (managers/scheduler.py:4248).
bool sglang_titled(std::string_view title);

// Whether the line starts SGLang's server: `sglang serve` (python/sglang/cli/serve.py) or
// `-m sglang.launch_server`. Anything else (`sglang.bench_offline_throughput`, a script) is offline.
bool sglang_runs_server(std::span<const std::string> argv);

// Reads SGLang's flags from `argv` (either spelling, `--disaggregation_mode` is `--disaggregation-mode`)
// into `profile`:
// - graphs: decode graphs are what SGLang captures by default; prefill graphs are subject to its
//   per-platform auto-disable (server_args.py:3100-3130), so without decode graphs no capture can be
//   relied on: none under --disable-cuda-graph (the deprecated alias of both backends disabled,
//   server_args.py:6201), --disable-decode-cuda-graph (:1431), --cuda-graph-backend-decode disabled,
//   --enable-mis (multi-item scoring turns both phases off, :3384), or --cuda-graph-config (a per-phase
//   configuration kvremap does not read);
// - prefill/decode disaggregation: --disaggregation-mode prefill|decode, "null" its default (:2254-2257);
//   the KV cache is registered for transfer right after its allocation (Mooncake's `batch_register`);
// - where the server listens: --port, kSglangDefaultPort where not given; offline: nowhere. SGLang
//   starts uvicorn after its schedulers report ready (entrypoints/http_server.py:2509-2523);
// - the memory flags: --mem-fraction-static, --chunked-prefill-size (an int; -1 or 0: chunking off)
//   and --max-prefill-tokens (human_readable_int, utils/common.py:2816: an int, or SI/IEC suffixed).
void read_sglang_flags(std::span<const std::string> argv, EngineProfile& profile);

// The environment variables that change what SGLang allocates, in the order profile keys list them:
// PyTorch's caching-allocator configuration (PYTORCH_CUDA_ALLOC_CONF, PYTORCH_ALLOC_CONF) and the Mooncake
// memory pool for the KV cache (SGLANG_MOONCAKE_CUSTOM_MEM_POOL, mem_cache/memory_pool.py:1447-1451).
std::span<const std::string_view> sglang_memory_environment_variables();

// The package directories of SGLang's native modules (`sgl_kernel/…`, `sglang/…`).
std::span<const std::string_view> sglang_module_packages();

// The flags dropped from the profile key, as SGLang's parser declares them (server_args.py,
// ServerArgs.add_cli_args): where the server listens, what it logs, the share of memory it asks for, and
// flags that change no memory (ports and addresses are often random per launch in scripts).
std::span<const FlagSpec> sglang_flags_ignored_by_profiles();

// The model in a profile key's arguments written one way: `--model` is an alias of `--model-path`
// (server_args.py:384,410 at 1f5eeb6).
void canonical_sglang_model(std::vector<std::string>& key_args);

// Where the model's name or path stands in canonical key arguments: the value of `--model-path`.
std::optional<std::size_t> sglang_model_value_index(std::span<const std::string> key_args);

// The reserve SGLang keeps beside weights and KV on a device of `device_total` bytes: (1 -
// --mem-fraction-static) x the device's total memory (SGLang takes its free memory before the weights,
// a little less: kvremap keeps a little more), or without the flag what was free at its sizing query
// (`sized_from_free`) less its KV pool (`kv_bytes`).
std::uint64_t sglang_reserve_bytes(const EngineProfile& engine, std::uint64_t device_total,
                                   std::uint64_t sized_from_free, std::uint64_t kv_bytes);

// SGLang's own estimate of the activation memory a prefill needs, as it reserves it when it chooses
// --mem-fraction-static itself (python/sglang/srt/server_args.py, SGLang main 2026-08-21,
// `_handle_gpu_memory_settings`, lines 3557-3571): 1.5 MiB per token of the largest prefill batch, at
// least 2048 tokens. The batch is --chunked-prefill-size when chunking is on (a positive value); with
// chunking off (-1, or 0) it is --max-prefill-tokens (default 16384, line 659-668). Without the flag, the
// chunk size follows the device's memory (lines 3431-3488): 2048 below 35 GiB, 4096 below 60 GiB, 8192
// below 160 GiB, 16384 from there. SGLang's figure is in MiB of its device-memory reading, which is
// the driver's total in MiB.
struct SglangPrefillEstimate {
  std::uint64_t tokens = 0;  // the prefill batch the estimate is for (before the 2048-token minimum)
  std::uint64_t bytes = 0;
  std::string basis;  // "--chunked-prefill-size 8192, its default on a 79.19 GiB device"
};
SglangPrefillEstimate sglang_prefill_estimate(const EngineProfile& engine, std::uint64_t device_total);

// SGLang's default --chunked-prefill-size for a device of `device_total` bytes.
std::uint64_t sglang_default_chunked_prefill(std::uint64_t device_total);

inline constexpr std::uint64_t kSglangMinEstimateTokens = 2048;
inline constexpr std::uint64_t kSglangDefaultMaxPrefillTokens = 16384;
// 1.5 MiB per token.
inline constexpr std::uint64_t kSglangActivationBytesPerToken = 3 * (std::uint64_t{1} << 19);

// How the serving headroom names SGLang's parts: its reserve, and its prefill estimate on `basis`.
inline constexpr std::string_view kSglangReserveSource = "SGLang's activation reserve";
std::string sglang_prefill_estimate_source(std::string_view basis);

// --mem-fraction-static moved by `shift_bytes` of a device of `device_total` bytes, to four decimals,
// rounded towards less KV: the flag that gives a start sized like a shifted one, without kvremap. Empty
// without the flag or the device's size, or where nothing would be left.
std::string sglang_same_start_flags(const EngineProfile& engine, std::int64_t shift_bytes, std::uint64_t device_total);

// The flag that shrinks SGLang's KV cache as `shrink` says: --mem-fraction-static lowered from
// `mem_fraction_static`, or by how much where the value is not known.
std::string sglang_shrink_flags(const KvShrink& shrink, std::optional<double> mem_fraction_static);

}  // namespace kvremap::policy
