// Reads expandable_segments (and the backend that rules it out) from PyTorch's allocator settings string.
#include "policy/allocator_config.h"

#include <vector>

namespace kvremap::policy {
namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The comma-separated settings, each split at its first ':' (a setting without one has an empty value).
std::vector<std::pair<std::string_view, std::string_view>> settings_of(std::string_view text) {
  std::vector<std::pair<std::string_view, std::string_view>> out;
  // Values may hold commas inside brackets (roundup_power2_divisions:[256:1,512:2]): split outside them.
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size()) {
      if (text[i] == '[') ++depth;
      if (text[i] == ']' && depth > 0) --depth;
      if (text[i] != ',' || depth > 0) continue;
    }
    const std::string_view item = trimmed(text.substr(start, i - start));
    start = i + 1;
    if (item.empty()) continue;
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos) {
      out.emplace_back(item, std::string_view());
    } else {
      out.emplace_back(trimmed(item.substr(0, colon)), trimmed(item.substr(colon + 1)));
    }
  }
  return out;
}

}  // namespace

AllocatorConfig parse_allocator_config(std::string_view variable, std::string_view settings) {
  AllocatorConfig c;
  c.variable = std::string(variable);
  bool expandable = false, async_backend = false;
  for (const auto& [key, value] : settings_of(settings)) {
    if (key == "expandable_segments") {
      if (value == "True" || value == "true") {
        expandable = true;
      } else if (value == "False" || value == "false") {
        expandable = false;
      } else if (c.problem.empty()) {
        c.problem = std::string(variable) + ": expandable_segments takes True or False, got '" + std::string(value) +
                    "' (PyTorch refuses it at its first CUDA allocation)";
      }
    } else if (key == "backend") {
      async_backend = value == "cudaMallocAsync";
    }
  }
  c.expandable_segments = expandable && !async_backend;
  return c;
}

AllocatorConfig allocator_config(const std::optional<std::string>& pytorch_alloc_conf,
                                 const std::optional<std::string>& pytorch_cuda_alloc_conf) {
  if (pytorch_alloc_conf) return parse_allocator_config("PYTORCH_ALLOC_CONF", *pytorch_alloc_conf);
  if (pytorch_cuda_alloc_conf) return parse_allocator_config("PYTORCH_CUDA_ALLOC_CONF", *pytorch_cuda_alloc_conf);
  return {};
}

}  // namespace kvremap::policy
