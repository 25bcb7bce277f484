// Engine recognition from command lines: which engine's model reads the flags, and what they say.
#include "policy/engine.h"

#include <algorithm>

#include "policy/printable.h"
#include "policy/sglang_model.h"
#include "policy/vllm_model.h"

namespace kvremap::policy {
namespace {

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
  switch (p.kind) {
    case EngineKind::vllm:
      read_vllm_flags(argv, p);
      break;
    case EngineKind::sglang:
      read_sglang_flags(argv, p);
      break;
    case EngineKind::other:
      p.eager_reason = "not a recognised engine (vLLM, SGLang)";
      break;
  }
  p.graphs_expected = p.eager_reason.empty();
}

}  // namespace

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

std::optional<EngineKind> title_kind(std::span<const std::string> argv) {
  if (!is_process_title(argv)) return std::nullopt;
  if (vllm_titled(argv.front())) return EngineKind::vllm;
  if (sglang_titled(argv.front())) return EngineKind::sglang;
  return std::nullopt;
}

EngineKind named_engine(std::span<const std::string> argv) {
  if (auto titled = title_kind(argv)) return *titled;
  // Only the program and its first few words name the engine (`python3 -m vllm.entrypoints…`,
  // `vllm serve`, `sglang serve`); a model path such as `org/vllm-tuned` later must not.
  const std::size_t n = std::min<std::size_t>(argv.size(), 4);
  for (std::size_t i = 0; i < n; ++i) {
    if (vllm_named_by(argv[i])) return EngineKind::vllm;
    if (sglang_named_by(argv[i])) return EngineKind::sglang;
  }
  return EngineKind::other;
}

EngineProfile profile_engine(std::span<const std::string> argv) { return with_kind(argv, named_engine(argv)); }

EngineProfile with_kind(std::span<const std::string> argv, EngineKind kind) {
  EngineProfile p;
  p.kind = kind;
  read_flags(argv, p);
  return p;
}

std::span<const std::string_view> memory_environment_variables(EngineKind kind) {
  switch (kind) {
    case EngineKind::vllm:
      return vllm_memory_environment_variables();
    case EngineKind::sglang:
      return sglang_memory_environment_variables();
    case EngineKind::other:
      break;
  }
  return {};
}

std::optional<std::string> engine_module_label(EngineKind kind, std::string_view path) {
  if (kind == EngineKind::other || !path.ends_with(".so") || path.find("/.cache/") != std::string_view::npos ||
      path.find("compile_cache") != std::string_view::npos)
    return std::nullopt;
  static constexpr std::string_view kTorch = "/torch/lib/libtorch_cuda.so";
  if (path.ends_with(kTorch)) return std::string(kTorch.substr(1));
  const std::span<const std::string_view> packages =
      kind == EngineKind::vllm ? vllm_module_packages() : sglang_module_packages();
  for (std::string_view package : packages) {
    const std::size_t at = path.rfind(package);
    if (at == std::string_view::npos) continue;
    const std::string_view inside = path.substr(at + 1);
    // The package's own modules: at most two directories below it (`vllm/vllm_flash_attn/_C.abi3.so`).
    if (std::count(inside.begin(), inside.end(), '/') <= 3) return std::string(inside);
  }
  return std::nullopt;
}

}  // namespace kvremap::policy
