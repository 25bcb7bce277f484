// Engine recognition from command lines: the engine kind, whether it captures graphs, its memory flags.
#include "policy/engine.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <utility>

#include "policy/printable.h"
#include "policy/units.h"

namespace kvremap::policy {
namespace {

// A program or module name: `vllm`, `/usr/bin/vllm`, `vllm.entrypoints.openai.api_server`.
bool names(std::string_view arg, std::string_view engine) {
  return arg == engine || arg.ends_with("/" + std::string(engine)) || arg.starts_with(std::string(engine) + ".");
}

// The value of an argument written `--flag=value`, or nullopt for any other argument.
std::optional<std::string_view> inline_value(std::string_view arg, std::string_view flag) {
  if (!arg.starts_with(flag) || arg.size() <= flag.size() || arg[flag.size()] != '=') return std::nullopt;
  return arg.substr(flag.size() + 1);
}

EngineKind detect_kind(std::span<const std::string> argv) {
  if (auto titled = title_kind(argv)) return *titled;
  // Only the program and its first few words name the engine (`python3 -m vllm.entrypoints…`,
  // `vllm serve`, `sglang serve`); a model path such as `org/vllm-tuned` later must not.
  const std::size_t n = std::min<std::size_t>(argv.size(), 4);
  for (std::size_t i = 0; i < n; ++i) {
    if (names(argv[i], "vllm")) return EngineKind::vllm;
    if (names(argv[i], "sglang")) return EngineKind::sglang;
  }
  return EngineKind::other;
}

// Whether the line starts the engine's server, the only start-ups that listen on a serving port: vLLM's
// `vllm serve` (entrypoints/cli/serve.py; also `-m vllm.entrypoints.cli.main serve`) and
// `-m vllm.entrypoints.openai.api_server`; SGLang's `sglang serve` and `-m sglang.launch_server`. Anything
// else — `vllm bench`, `sglang.bench_offline_throughput`, a script run as an engine (KVREMAP_ENGINE) —
// is offline: it has no port whose opening could end its start-up.
bool runs_server(std::span<const std::string> argv, EngineKind kind) {
  const std::string_view engine = kind == EngineKind::vllm ? "vllm" : "sglang";
  const std::size_t n = std::min<std::size_t>(argv.size(), 5);
  bool named = false;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string_view a = argv[i];
    if (kind == EngineKind::vllm && (a == "vllm.entrypoints.openai.api_server" || a == "vllm.entrypoints.api_server"))
      return true;
    if (kind == EngineKind::sglang && a == "sglang.launch_server") return true;
    if (named && a == "serve") return true;
    if (names(a, engine)) named = true;
  }
  return false;
}

// The value of `--flag v` or `--flag=v`, last occurrence wins (as argparse does).
std::optional<std::string_view> flag_value(std::span<const std::string> argv, std::string_view flag) {
  std::optional<std::string_view> value;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string_view a = argv[i];
    if (a == flag && i + 1 < argv.size())
      value = argv[i + 1];
    else if (auto v = inline_value(a, flag))
      value = v;
  }
  return value;
}

// A boolean flag given as `--flag`, `--flag=true` or `--flag true`; `--no-flag`/`=false` turn it off.
bool flag_on(std::span<const std::string> argv, std::string_view flag) {
  bool on = false;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string_view a = argv[i];
    if (a == flag) {
      on = true;
      if (i + 1 < argv.size())
        if (auto b = parse_bool(argv[i + 1])) on = *b;
    } else if (auto v = inline_value(a, flag)) {
      on = parse_bool(*v).value_or(true);
    } else if (a == "--no-" + std::string(flag.substr(2))) {
      on = false;
    }
  }
  return on;
}

std::string upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}

// vLLM's cudagraph mode set to NONE anywhere: `--compilation-config '{"cudagraph_mode": "NONE"}'`,
// `-O.cudagraph_mode=NONE`, `-cc.cudagraph_mode NONE`, `--compilation-config.cudagraph_mode=NONE`.
bool vllm_cudagraph_mode_none(std::span<const std::string> argv) {
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
bool vllm_mode_not_compile(std::span<const std::string> argv) {
  const std::optional<std::string> mode = compilation_value(argv, "mode");
  return mode && *mode != "VLLM_COMPILE" && *mode != "3";
}

// vLLM's optimisation level 0: no compilation and no CUDA graphs.
bool vllm_level_zero(std::span<const std::string> argv) {
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string_view a = argv[i];
    if (a == "-O0" || a == "-O=0" || a == "--optimization-level=0") return true;
    if ((a == "-O" || a == "--optimization-level") && i + 1 < argv.size() && argv[i + 1] == "0") return true;
  }
  return false;
}

// A TCP port as the engines' parsers take it (an int in 1..65535), or 0.
std::uint16_t port_value(std::optional<std::string_view> text, std::uint16_t fallback) {
  if (!text) return fallback;
  const std::optional<std::uint64_t> value = parse_count(*text);
  return value && *value > 0 && *value <= 65535 ? static_cast<std::uint16_t>(*value) : 0;
}

// An int as Python's int() reads it, possibly negative (SGLang's --chunked-prefill-size takes -1).
std::optional<std::int64_t> signed_count(std::string_view text) {
  const bool negative = text.starts_with('-');
  const std::optional<std::uint64_t> magnitude = parse_count(negative ? text.substr(1) : text);
  if (!magnitude || *magnitude > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
  return negative ? -static_cast<std::int64_t>(*magnitude) : static_cast<std::int64_t>(*magnitude);
}

// SGLang's human_readable_int (utils/common.py:2816): an int, or an integer with an SI (k, M, G, T) or
// IEC (Ki, Mi, Gi, Ti) suffix, case-sensitive. SI decimals ("25.6k") are not read: nullopt, as for
// anything else, and the estimate then takes SGLang's default.
std::optional<std::uint64_t> human_readable_count(std::string_view text) {
  static constexpr std::pair<std::string_view, std::uint64_t> kSuffixes[] = {
      {"Ki", std::uint64_t{1} << 10}, {"Mi", std::uint64_t{1} << 20}, {"Gi", std::uint64_t{1} << 30},
      {"Ti", std::uint64_t{1} << 40}, {"k", 1000},                     {"M", 1000000},
      {"G", 1000000000},              {"T", 1000000000000}};
  for (const auto& [suffix, multiplier] : kSuffixes) {
    if (!text.ends_with(suffix)) continue;
    const std::optional<std::uint64_t> n = parse_count(text.substr(0, text.size() - suffix.size()));
    if (!n || *n > UINT64_MAX / multiplier) return std::nullopt;
    return *n * multiplier;
  }
  return parse_count(text);
}

void read_flags(std::span<const std::string> argv, EngineProfile& p) {
  p.graphs_expected = false;
  p.eager_reason.clear();
  p.kv_connector.clear();
  p.serving_port = 0;
  p.serving_socket.clear();
  if (title_kind(argv) && p.kind != EngineKind::other) {
    // Flags decide whether the engine captures graphs; without them, nothing may rest on graphs.
    p.eager_reason = "only the process title " + printable(argv.front()) + " was readable, none of the engine's flags";
    return;
  }
  const std::vector<std::string> flags = dashed_flags(argv);
  switch (p.kind) {
    case EngineKind::vllm:
      // `--kv-transfer-config '{...}'` or its dotted keys, `--kv-transfer-config.kv_connector=…`
      // (engine/arg_utils.py:1636; FlexibleArgumentParser's dotted config arguments).
      for (const std::string& f : flags)
        if (f == "--kv-transfer-config" || f.starts_with("--kv-transfer-config=") ||
            f.starts_with("--kv-transfer-config."))
          p.kv_connector = "--kv-transfer-config";
      if (!runs_server(argv, p.kind))
        ;  // offline: no serving port
      else if (auto uds = flag_value(flags, "--uds"))
        p.serving_socket = std::string(*uds);
      else
        p.serving_port = port_value(flag_value(flags, "--port"), 8000);
      if (auto v = flag_value(flags, "--gpu-memory-utilization")) p.gpu_memory_utilization = parse_fraction(*v);
      for (std::string_view flag : {"--kv-cache-memory", "--kv-cache-memory-bytes"})
        if (auto v = flag_value(flags, flag)) p.kv_cache_memory = parse_size(*v);
      if (flag_on(flags, "--enforce-eager"))
        p.eager_reason = "--enforce-eager";
      else if (vllm_cudagraph_mode_none(flags))
        p.eager_reason = "cudagraph_mode NONE";
      else if (vllm_mode_not_compile(flags))
        p.eager_reason = "compilation mode " + printable(*compilation_value(flags, "mode")) + " (cudagraph_mode NONE)";
      else if (vllm_level_zero(flags))
        p.eager_reason = "-O0";
      else if (flag_value(flags, "--config"))
        // Flags in a YAML file (utils/argparse_utils.py:477) may turn graphs off: not read, so not trusted.
        p.eager_reason = "--config (flags in a file kvremap does not read)";
      break;
    case EngineKind::sglang:
      // "null" (the default), "prefill" or "decode" (server_args.py:2254-2257).
      if (auto mode = flag_value(flags, "--disaggregation-mode"); mode && *mode != "null")
        p.kv_connector = "--disaggregation-mode " + printable(*mode);
      if (runs_server(argv, p.kind)) p.serving_port = port_value(flag_value(flags, "--port"), 30000);
      if (auto v = flag_value(flags, "--mem-fraction-static")) p.mem_fraction_static = parse_fraction(*v);
      if (auto v = flag_value(flags, "--chunked-prefill-size")) p.chunked_prefill_size = signed_count(*v);
      if (auto v = flag_value(flags, "--max-prefill-tokens")) p.max_prefill_tokens = human_readable_count(*v);
      // Decode graphs are what SGLang captures by default; prefill graphs are subject to its per-platform
      // auto-disable (server_args.py:3100-3130), so without decode graphs no capture can be relied on.
      // --disable-cuda-graph is the deprecated alias of both backends disabled (server_args.py:6201).
      if (flag_on(flags, "--disable-cuda-graph"))
        p.eager_reason = "--disable-cuda-graph";
      else if (flag_on(flags, "--disable-decode-cuda-graph"))
        p.eager_reason = "--disable-decode-cuda-graph";
      else if (auto backend = flag_value(flags, "--cuda-graph-backend-decode");
               backend && upper(*backend) == "DISABLED")
        p.eager_reason = "--cuda-graph-backend-decode=disabled";
      else if (flag_on(flags, "--enable-mis"))
        // Multi-item scoring turns both graph phases off (server_args.py, _handle_multi_item_scoring).
        p.eager_reason = "--enable-mis";
      else if (flag_value(flags, "--cuda-graph-config"))
        p.eager_reason = "--cuda-graph-config (a per-phase configuration kvremap does not read)";
      break;
    case EngineKind::other:
      p.eager_reason = "not a recognised engine (vLLM, SGLang)";
      break;
  }
  p.graphs_expected = p.eager_reason.empty();
}

}  // namespace

std::span<const std::string_view> memory_environment_variables(EngineKind kind) {
  static constexpr std::string_view kVllm[] = {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF",
                                               "VLLM_USE_V2_MODEL_RUNNER", "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS",
                                               "VLLM_ATTENTION_BACKEND"};
  static constexpr std::string_view kSglang[] = {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF",
                                                 "SGLANG_MOONCAKE_CUSTOM_MEM_POOL"};
  switch (kind) {
    case EngineKind::vllm:
      return kVllm;
    case EngineKind::sglang:
      return kSglang;
    case EngineKind::other:
      break;
  }
  return {};
}

std::string_view to_string(EngineKind kind) {
  switch (kind) {
    case EngineKind::vllm:
      return "vllm";
    case EngineKind::sglang:
      return "sglang";
    case EngineKind::other:
      return "other";
  }
  return "other";
}

std::vector<std::string> dashed_flags(std::span<const std::string> argv) {
  std::vector<std::string> out(argv.begin(), argv.end());
  for (std::string& a : out) {
    if (!a.starts_with("--")) continue;
    const std::size_t end = std::min({a.find('='), a.find('.'), a.size()});
    std::replace(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(end), '_', '-');
  }
  return out;
}

std::optional<EngineKind> title_kind(std::span<const std::string> argv) {
  if (argv.empty()) return std::nullopt;
  // The title alone: every later argument is empty (the rest of the argument area, zeroed).
  if (std::any_of(argv.begin() + 1, argv.end(), [](const std::string& a) { return !a.empty(); })) return std::nullopt;
  if (argv.front().starts_with("VLLM::")) return EngineKind::vllm;
  if (argv.front().starts_with("sglang::")) return EngineKind::sglang;
  return std::nullopt;
}

std::vector<std::string> split_cmdline(std::string_view raw) {
  std::vector<std::string> argv;
  std::size_t start = 0;
  while (start < raw.size()) {
    std::size_t end = raw.find('\0', start);
    if (end == std::string_view::npos) end = raw.size();
    argv.emplace_back(raw.substr(start, end - start));
    start = end + 1;
  }
  return argv;
}

bool is_multiprocessing_child(std::span<const std::string> argv) {
  return std::any_of(argv.begin(), argv.end(), [](const std::string& a) {
    return a == "--multiprocessing-fork" || a.find("from multiprocessing.spawn import") != std::string::npos ||
           a.find("from multiprocessing.forkserver import") != std::string::npos;
  });
}

std::optional<std::string> engine_module_label(EngineKind kind, std::string_view path) {
  if (!path.ends_with(".so") || path.find("/.cache/") != std::string_view::npos ||
      path.find("compile_cache") != std::string_view::npos)
    return std::nullopt;
  static constexpr std::string_view kTorch = "/torch/lib/libtorch_cuda.so";
  if (kind != EngineKind::other && path.ends_with(kTorch)) return std::string(kTorch.substr(1));
  std::vector<std::string_view> packages;
  if (kind == EngineKind::vllm) packages = {"/vllm/"};
  if (kind == EngineKind::sglang) packages = {"/sgl_kernel/", "/sglang/"};
  for (std::string_view package : packages) {
    const std::size_t at = path.rfind(package);
    if (at == std::string_view::npos) continue;
    const std::string_view inside = path.substr(at + 1);
    // The package's own modules: at most two directories below it (`vllm/vllm_flash_attn/_C.abi3.so`).
    if (std::count(inside.begin(), inside.end(), '/') <= 3) return std::string(inside);
  }
  return std::nullopt;
}

std::optional<std::string> config_file(std::span<const std::string> argv) {
  const std::vector<std::string> flags = dashed_flags(argv);
  if (auto file = flag_value(flags, "--config"); file && !file->empty()) return std::string(*file);
  return std::nullopt;
}

EngineProfile profile_engine(std::span<const std::string> argv) { return with_kind(argv, detect_kind(argv)); }

EngineProfile with_kind(std::span<const std::string> argv, EngineKind kind) {
  EngineProfile p;
  p.kind = kind;
  read_flags(argv, p);
  return p;
}

}  // namespace kvremap::policy
