// SGLang's identity, flags, defaults, reserve and prefill estimate as kvremap reads them (see sglang_model.h).
#include "policy/sglang_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "policy/printable.h"
#include "policy/units.h"

namespace kvremap::policy {
namespace {

// Why SGLang captures no decode graphs, or empty when it does.
std::string eager_reason(std::span<const std::string> flags) {
  if (flag_on(flags, "--disable-cuda-graph")) return "--disable-cuda-graph";
  if (flag_on(flags, "--disable-decode-cuda-graph")) return "--disable-decode-cuda-graph";
  if (auto backend = flag_value(flags, "--cuda-graph-backend-decode"); backend && upper(*backend) == "DISABLED")
    return "--cuda-graph-backend-decode=disabled";
  if (flag_on(flags, "--enable-mis")) return "--enable-mis";
  if (flag_value(flags, "--cuda-graph-config"))
    return "--cuda-graph-config (a per-phase configuration kvremap does not read)";
  return "";
}

// SGLang: python/sglang/srt/server_args.py (ServerArgs.add_cli_args).
constexpr std::array kIgnoredByProfiles{
    FlagSpec{"--host", Takes::one_value},
    FlagSpec{"--port", Takes::one_value},
    FlagSpec{"--api-key", Takes::one_value},
    FlagSpec{"--served-model-name", Takes::one_value},
    FlagSpec{"--log-level", Takes::one_value},
    FlagSpec{"--log-level-http", Takes::one_value},
    FlagSpec{"--log-requests", Takes::nothing},
    FlagSpec{"--log-requests-level", Takes::one_value},
    FlagSpec{"--mem-fraction-static", Takes::one_value},
    // Flags that change no memory; ports and addresses are often random per launch in scripts
    // (ENGINES-2026.md finding 12).
    FlagSpec{"--nccl-port", Takes::one_value},
    FlagSpec{"--dist-init-addr", Takes::one_value},
    FlagSpec{"--admin-api-key", Takes::one_value},
    FlagSpec{"--chat-template", Takes::one_value},
    FlagSpec{"--watchdog-timeout", Takes::one_value},
    FlagSpec{"--random-seed", Takes::one_value},
    FlagSpec{"--enable-metrics", Takes::nothing},
    FlagSpec{"--crash-dump-folder", Takes::one_value},
    FlagSpec{"--decode-log-interval", Takes::one_value},
};

// How far a share must drop when its current value is unknown, rounded up to two decimals.
double share_drop(std::uint64_t shrink, std::uint64_t total) {
  return std::ceil(static_cast<double>(shrink) / static_cast<double>(total) * 100.0 - 1e-9) / 100.0;
}

}  // namespace

bool sglang_named_by(std::string_view arg) { return names_program(arg, "sglang"); }

bool sglang_titled(std::string_view title) { return title.starts_with("sglang::"); }

bool sglang_runs_server(std::span<const std::string> argv) {
  static constexpr std::string_view kServerModules[] = {"sglang.launch_server"};
  return starts_command(argv, "sglang", "serve", kServerModules);
}

void read_sglang_flags(std::span<const std::string> argv, EngineProfile& p) {
  const std::vector<std::string> flags = dashed_flags(argv);
  if (auto mode = flag_value(flags, "--disaggregation-mode"); mode && *mode != "null")
    p.kv_connector = "--disaggregation-mode " + printable(*mode);
  if (sglang_runs_server(argv)) p.serving_port = port_value(flag_value(flags, "--port"), kSglangDefaultPort);
  if (auto v = flag_value(flags, "--mem-fraction-static")) p.mem_fraction_static = parse_fraction(*v);
  if (auto v = flag_value(flags, "--chunked-prefill-size")) p.chunked_prefill_size = signed_count(*v);
  if (auto v = flag_value(flags, "--max-prefill-tokens")) p.max_prefill_tokens = human_readable_count(*v);
  p.eager_reason = eager_reason(flags);
}

std::span<const std::string_view> sglang_memory_environment_variables() {
  static constexpr std::string_view kVariables[] = {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF",
                                                    "SGLANG_MOONCAKE_CUSTOM_MEM_POOL"};
  return kVariables;
}

std::span<const std::string_view> sglang_module_packages() {
  static constexpr std::string_view kPackages[] = {"/sgl_kernel/", "/sglang/"};
  return kPackages;
}

std::span<const FlagSpec> sglang_flags_ignored_by_profiles() { return kIgnoredByProfiles; }

void canonical_sglang_model(std::vector<std::string>& key_args) {
  for (std::size_t i = 1; i < key_args.size(); ++i)
    if (key_args[i] == "--model") key_args[i] = "--model-path";
}

std::optional<std::size_t> sglang_model_value_index(std::span<const std::string> key_args) {
  for (std::size_t i = 1; i + 1 < key_args.size(); ++i)
    if (key_args[i] == "--model-path") return i + 1;
  return std::nullopt;
}

std::uint64_t sglang_reserve_bytes(const EngineProfile& engine, std::uint64_t device_total,
                                   std::uint64_t sized_from_free, std::uint64_t kv_bytes) {
  if (engine.mem_fraction_static)
    return static_cast<std::uint64_t>(static_cast<double>(device_total) * (1.0 - *engine.mem_fraction_static));
  return sized_from_free > kv_bytes ? sized_from_free - kv_bytes : 0;
}

std::uint64_t sglang_default_chunked_prefill(std::uint64_t device_total) {
  constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
  if (device_total < 35 * kGiB) return 2048;
  if (device_total < 60 * kGiB) return 4096;
  if (device_total < 160 * kGiB) return 8192;
  return 16384;
}

SglangPrefillEstimate sglang_prefill_estimate(const EngineProfile& engine, std::uint64_t device_total) {
  SglangPrefillEstimate e;
  const std::int64_t chunk = engine.chunked_prefill_size.value_or(-2);
  if (chunk > 0) {
    e.tokens = static_cast<std::uint64_t>(chunk);
    e.basis = "--chunked-prefill-size " + std::to_string(chunk);
  } else if (!engine.chunked_prefill_size) {
    e.tokens = sglang_default_chunked_prefill(device_total);
    e.basis = "--chunked-prefill-size " + std::to_string(e.tokens) + ", its default on a " +
              format_bytes(device_total) + " device";
  } else {
    e.tokens = engine.max_prefill_tokens.value_or(kSglangDefaultMaxPrefillTokens);
    e.basis = "--max-prefill-tokens " + std::to_string(e.tokens) + ", chunked prefill off";
  }
  const std::uint64_t tokens = std::max(e.tokens, kSglangMinEstimateTokens);
  // Token counts beyond 2^40 are no engine's; the product then stays within 64 bits.
  e.bytes = std::min<std::uint64_t>(tokens, std::uint64_t{1} << 40) * kSglangActivationBytesPerToken;
  return e;
}

std::string sglang_prefill_estimate_source(std::string_view basis) {
  return "SGLang's prefill estimate (1.5 MiB per token of " + std::string(basis) + ")";
}

std::string sglang_same_start_flags(const EngineProfile& engine, std::int64_t shift_bytes, std::uint64_t device_total) {
  if (device_total == 0 || !engine.mem_fraction_static) return "";
  // SGLang reads the share with two decimals in its docs but takes any float; four keep a shift of a
  // few MiB on an 80 GiB device visible.
  const double moved = lowered_share(*engine.mem_fraction_static, static_cast<double>(shift_bytes), device_total, 4);
  return moved > 0 ? std::string(kSglangShareFlag) + " " + share_text(moved, 4) : "";
}

std::string sglang_shrink_flags(const KvShrink& shrink, std::optional<double> mem_fraction_static) {
  if (shrink.device_total_bytes == 0) return "--mem-fraction-static lower";
  if (mem_fraction_static)
    return "--mem-fraction-static " +
           share_text(lowered_share(*mem_fraction_static, static_cast<double>(shrink.shrink_bytes),
                                    shrink.device_total_bytes, 2),
                      2);
  return "--mem-fraction-static " + share_text(share_drop(shrink.shrink_bytes, shrink.device_total_bytes), 2) +
         " lower";
}

}  // namespace kvremap::policy
