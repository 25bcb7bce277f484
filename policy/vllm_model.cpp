// vLLM's identity, flags, defaults and sizing pieces as kvremap reads them (see vllm_model.h).
#include "policy/vllm_model.h"

#include <algorithm>
#include <array>
#include <vector>

#include "policy/printable.h"
#include "policy/units.h"

namespace kvremap::policy {
namespace {

// vLLM's cudagraph mode set to NONE anywhere: `--compilation-config '{"cudagraph_mode": "NONE"}'`,
// `-O.cudagraph_mode=NONE`, `-cc.cudagraph_mode NONE`, `--compilation-config.cudagraph_mode=NONE`.
bool cudagraph_mode_none(std::span<const std::string> argv) {
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string a = upper(argv[i]);
    const std::size_t at = a.find("CUDAGRAPH_MODE");
    if (at == std::string::npos) continue;
    std::string rest = a.substr(at + 14);
    if (rest.find_first_not_of("\"': =") == std::string::npos && i + 1 < argv.size()) rest += upper(argv[i + 1]);
    const std::size_t v = rest.find_first_not_of("\"': =");
    if (v != std::string::npos && std::string_view(rest).substr(v).starts_with("NONE")) return true;
  }
  return false;
}

// The value given to a compilation-config key (upper-cased, quotes and `=`/`:` stripped) in any of vLLM's
// spellings: `-cc.KEY=V`, `-cc.KEY V`, `-O.KEY=V`, `--compilation-config.KEY=V` and the JSON
// `--compilation-config '{"KEY": V}'`. The key must start a word: `mode` is not the end of
// `cudagraph_mode`. Last occurrence wins; nullopt when the key is never given.
std::optional<std::string> compilation_value(std::span<const std::string> argv, std::string_view key) {
  std::optional<std::string> value;
  const std::string wanted = upper(key);
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string a = upper(argv[i]);
    for (std::size_t at = a.find(wanted); at != std::string::npos; at = a.find(wanted, at + 1)) {
      if (at > 0 && std::string_view(".\"'{ ,").find(a[at - 1]) == std::string_view::npos) continue;
      std::string rest = a.substr(at + wanted.size());
      if (!rest.empty() && std::string_view("\"': =").find(rest[0]) == std::string_view::npos) continue;
      if (rest.find_first_not_of("\"': =") == std::string::npos && i + 1 < argv.size()) rest += upper(argv[i + 1]);
      const std::size_t begin = rest.find_first_not_of("\"': =");
      if (begin == std::string::npos) continue;
      value = rest.substr(begin, rest.find_first_of("\"',} ", begin) - begin);
    }
  }
  return value;
}

// vLLM sets a piecewise cudagraph mode (its default, FULL_AND_PIECEWISE, is one) to NONE when the
// compilation mode is not VLLM_COMPILE (3), the default (config/vllm.py:1425-1436): `-cc.mode=none`.
// Any other mode is taken to mean no graphs, whatever cudagraph_mode says: only FULL modes would
// survive it, and expecting no graphs is never wrong.
bool mode_not_compile(std::span<const std::string> argv) {
  const std::optional<std::string> mode = compilation_value(argv, "mode");
  return mode && *mode != "VLLM_COMPILE" && *mode != "3";
}

// vLLM's optimisation level 0: no compilation and no CUDA graphs.
bool level_zero(std::span<const std::string> argv) {
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string_view a = argv[i];
    if (a == "-O0" || a == "-O=0" || a == "--optimization-level=0") return true;
    if ((a == "-O" || a == "--optimization-level") && i + 1 < argv.size() && argv[i + 1] == "0") return true;
  }
  return false;
}

// Why vLLM captures no graphs, or empty when it does.
std::string eager_reason(std::span<const std::string> flags) {
  if (flag_on(flags, "--enforce-eager")) return "--enforce-eager";
  if (cudagraph_mode_none(flags)) return "cudagraph_mode NONE";
  if (mode_not_compile(flags))
    return "compilation mode " + printable(*compilation_value(flags, "mode")) + " (cudagraph_mode NONE)";
  if (level_zero(flags)) return "-O0";
  // Flags in a YAML file (utils/argparse_utils.py:477) may turn graphs off: not read, so not trusted.
  if (flag_value(flags, "--config")) return "--config (flags in a file kvremap does not read)";
  return "";
}

// vLLM: vllm/entrypoints/openai/cli_args.py (FrontendArgs) and vllm/engine/arg_utils.py (EngineArgs,
// AsyncEngineArgs). Lists come from `list[str]` fields (nargs="+"), booleans from BooleanOptionalAction.
// `--kv-cache-memory` is the spelling read_vllm_flags also accepts (argparse's prefix of `--kv-cache-memory-bytes`).
constexpr std::array kIgnoredByProfiles{
    FlagSpec{"--host", Takes::one_value},
    FlagSpec{"--port", Takes::one_value},
    FlagSpec{"--uds", Takes::one_value},
    FlagSpec{"--api-key", Takes::values},
    FlagSpec{"--served-model-name", Takes::values},
    FlagSpec{"--uvicorn-log-level", Takes::one_value},
    FlagSpec{"--disable-uvicorn-access-log", Takes::nothing},
    FlagSpec{"--enable-log-requests", Takes::nothing},
    FlagSpec{"--disable-log-requests", Takes::nothing},
    FlagSpec{"--disable-log-stats", Takes::nothing},
    FlagSpec{"--gpu-memory-utilization", Takes::one_value},
    FlagSpec{"--kv-cache-memory", Takes::one_value},
    FlagSpec{"--kv-cache-memory-bytes", Takes::one_value},
    // Front-end, logging and sampling flags that change no memory (ENGINES-2026.md finding 12).
    FlagSpec{"--chat-template", Takes::one_value},
    FlagSpec{"--tool-call-parser", Takes::one_value},
    FlagSpec{"--reasoning-parser", Takes::one_value},
    FlagSpec{"--ssl-keyfile", Takes::one_value},
    FlagSpec{"--ssl-certfile", Takes::one_value},
    FlagSpec{"--ssl-ca-certs", Takes::one_value},
    FlagSpec{"--ssl-cert-reqs", Takes::one_value},
    FlagSpec{"--allowed-origins", Takes::one_value},
    FlagSpec{"--allowed-methods", Takes::one_value},
    FlagSpec{"--allowed-headers", Takes::one_value},
    FlagSpec{"--root-path", Takes::one_value},
    FlagSpec{"--middleware", Takes::one_value},
    FlagSpec{"--max-log-len", Takes::one_value},
    FlagSpec{"--log-config-file", Takes::one_value},
    FlagSpec{"--enable-log-outputs", Takes::nothing},
    FlagSpec{"--seed", Takes::one_value},
    FlagSpec{"--disable-fastapi-docs", Takes::nothing},
};

}  // namespace

bool vllm_named_by(std::string_view arg) { return names_program(arg, "vllm"); }

bool vllm_titled(std::string_view title) { return title.starts_with("VLLM::"); }

bool vllm_runs_server(std::span<const std::string> argv) {
  static constexpr std::string_view kServerModules[] = {"vllm.entrypoints.openai.api_server",
                                                        "vllm.entrypoints.api_server"};
  return starts_command(argv, "vllm", "serve", kServerModules);
}

void read_vllm_flags(std::span<const std::string> argv, EngineProfile& p) {
  const std::vector<std::string> flags = dashed_flags(argv);
  // `--kv-transfer-config '{...}'` or its dotted keys, `--kv-transfer-config.kv_connector=…`
  // (engine/arg_utils.py:1636; FlexibleArgumentParser's dotted config arguments).
  for (const std::string& f : flags)
    if (f == "--kv-transfer-config" || f.starts_with("--kv-transfer-config=") || f.starts_with("--kv-transfer-config."))
      p.kv_connector = "--kv-transfer-config";
  if (!vllm_runs_server(argv))
    ;  // offline: no serving port
  else if (auto uds = flag_value(flags, "--uds"))
    p.serving_socket = std::string(*uds);
  else
    p.serving_port = port_value(flag_value(flags, "--port"), kVllmDefaultPort);
  if (auto v = flag_value(flags, "--gpu-memory-utilization")) p.gpu_memory_utilization = parse_fraction(*v);
  for (std::string_view flag : {"--kv-cache-memory", "--kv-cache-memory-bytes"})
    if (auto v = flag_value(flags, flag)) p.kv_cache_memory = parse_size(*v);
  p.eager_reason = eager_reason(flags);
}

std::span<const std::string_view> vllm_memory_environment_variables() {
  static constexpr std::string_view kVariables[] = {
      "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "VLLM_USE_V2_MODEL_RUNNER",
      "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "VLLM_ATTENTION_BACKEND"};
  return kVariables;
}

std::span<const std::string_view> vllm_module_packages() {
  static constexpr std::string_view kPackages[] = {"/vllm/"};
  return kPackages;
}

std::span<const FlagSpec> vllm_flags_ignored_by_profiles() { return kIgnoredByProfiles; }

void canonical_vllm_model(std::vector<std::string>& key_args) {
  // `vllm serve` (and `-m vllm.entrypoints.cli.main serve`): the subcommand, then an optional positional model.
  const auto serve = std::find(key_args.begin(), key_args.end(), "serve");
  if (serve == key_args.end()) return;
  const std::size_t at = static_cast<std::size_t>(serve - key_args.begin()) + 1;
  std::optional<std::string> model;
  if (at < key_args.size() && !key_args[at].starts_with("-")) model = key_args[at];
  for (std::size_t i = at; i + 1 < key_args.size();) {
    if (key_args[i] != "--model") {
      ++i;
      continue;
    }
    if (!model) {
      model = key_args[i + 1];
      key_args.insert(key_args.begin() + static_cast<std::ptrdiff_t>(at), *model);
      i += 1;
    }
    key_args.erase(key_args.begin() + static_cast<std::ptrdiff_t>(i),
                   key_args.begin() + static_cast<std::ptrdiff_t>(i) + 2);
  }
}

std::optional<std::size_t> vllm_model_value_index(std::span<const std::string> key_args) {
  const auto serve = std::find(key_args.begin(), key_args.end(), "serve");
  if (serve != key_args.end() && serve + 1 != key_args.end() && !(serve + 1)->starts_with("-"))
    return static_cast<std::size_t>(serve - key_args.begin()) + 1;
  for (std::size_t i = 1; i + 1 < key_args.size(); ++i)
    if (key_args[i] == "--model") return i + 1;
  return std::nullopt;
}

std::optional<double> vllm_memory_share(const EngineProfile& engine) {
  if (engine.kind != EngineKind::vllm || engine.kv_cache_memory) return std::nullopt;
  return engine.gpu_memory_utilization.value_or(kVllmDefaultUtilization);
}

std::optional<std::string> vllm_sizing_not_applicable(const EngineProfile& engine) {
  if (engine.kind == EngineKind::vllm && engine.kv_cache_memory)
    return std::string("the engine's KV cache size is given (--kv-cache-memory), not sized from a memory query");
  return std::nullopt;
}

std::optional<std::string> vllm_nothing_deferred_reason(const EngineProfile& engine) {
  if (engine.kind == EngineKind::vllm && engine.kv_cache_memory)
    return std::string(
        "the engine's KV cache size is given (--kv-cache-memory): vLLM then takes no memory query after its "
        "weights (gpu_worker.py:489-510), so no sizing query opens a KV window; size it with "
        "--gpu-memory-utilization instead (learned sizing then fits it to the device)");
  return std::nullopt;
}

std::string vllm_same_start_flags(std::uint64_t kv_bytes) { return "--kv-cache-memory " + std::to_string(kv_bytes); }

std::string vllm_shrink_flags(const KvShrink& shrink, std::optional<double> utilization, bool kv_size_given) {
  const std::string kv_flag = "--kv-cache-memory " + std::to_string(shrink.kv_fit_bytes);
  if (shrink.under_kvremap && kv_size_given)
    return "--gpu-memory-utilization in place of --kv-cache-memory (with it vLLM takes no memory query after its "
           "weights, and kvremap defers nothing)";
  // With --kv-cache-memory given, the utilisation does not size the KV cache.
  if (kv_size_given || shrink.device_total_bytes == 0)
    return shrink.under_kvremap ? "--gpu-memory-utilization lower" : kv_flag;
  const std::string alternative = shrink.under_kvremap ? "" : " or " + kv_flag;
  const auto lowered = [&](double share) {
    return share_text(lowered_share(share, static_cast<double>(shrink.shrink_bytes), shrink.device_total_bytes, 2), 2);
  };
  if (utilization) return "--gpu-memory-utilization " + lowered(*utilization) + alternative;
  return "--gpu-memory-utilization " + lowered(kVllmDefaultUtilization) + " (from the default " +
         share_text(kVllmDefaultUtilization, 2) + ")" + alternative;
}

bool vllm_refuses_at_start(std::uint64_t first_query_free, std::uint64_t requested_bytes) {
  return first_query_free < requested_bytes;
}

std::optional<double> gpu_memory_utilization_from(std::string_view cmdline) {
  std::size_t at = cmdline.find(kVllmShareFlag);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = cmdline.substr(at + kVllmShareFlag.size());
  if (rest.empty() || (rest.front() != '=' && rest.front() != ' ')) return std::nullopt;
  rest.remove_prefix(1);
  const std::size_t end = rest.find(' ');
  auto value = parse_fraction(rest.substr(0, end));
  if (!value || *value <= 0) return std::nullopt;
  return value;
}

}  // namespace kvremap::policy
