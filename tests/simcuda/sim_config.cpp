// Parses SIMCUDA_* settings from the environment or simcuda_reset() through one table.
#include "sim_config.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "policy/units.h"
#include "sim_errors.h"

extern char** environ;

namespace simcuda {
namespace {

using kvremap::policy::parse_bool;
using kvremap::policy::parse_count;
using kvremap::policy::parse_size;

struct Setting {
  const char* name;
  const char* default_value;
  const char* meaning;
  // Applies a value; returns what is accepted when the value is bad, empty when it was applied.
  std::function<std::string(Config&, std::string_view)> apply;
};

std::string apply_size(std::uint64_t& field, std::string_view value, bool allow_zero = true) {
  auto bytes = parse_size(value);
  if (!bytes || (!allow_zero && *bytes == 0)) return std::string(kvremap::policy::kSizeSyntax);
  field = *bytes;
  return {};
}

std::string apply_bool(bool& field, std::string_view value) {
  auto b = parse_bool(value);
  if (!b) return std::string(kvremap::policy::kBoolSyntax);
  field = *b;
  return {};
}

bool is_power_of_two(std::uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (!text.empty()) {
    auto at = text.find(separator);
    std::string_view part = text.substr(0, at);
    if (!part.empty()) parts.push_back(part);
    if (at == std::string_view::npos) break;
    text.remove_prefix(at + 1);
  }
  return parts;
}

// "cuMemCreate:3:CUDA_ERROR_OUT_OF_MEMORY,cuMemMap:2+:1"
std::string apply_faults(Config& c, std::string_view value) {
  static const char* accepted =
      "a comma-separated list of FUNCTION:N:ERROR or FUNCTION:N+:ERROR, e.g. cuMemCreate:3:CUDA_ERROR_OUT_OF_MEMORY";
  c.faults.clear();
  for (std::string_view item : split(value, ',')) {
    auto fields = split(item, ':');
    if (fields.size() != 3) return accepted;
    Fault fault;
    fault.function = std::string(fields[0]);
    std::string_view nth = fields[1];
    if (!nth.empty() && nth.back() == '+') {
      fault.and_later = true;
      nth.remove_suffix(1);
    }
    auto n = parse_count(nth);
    if (!n || *n == 0) return accepted;
    fault.nth = *n;
    if (!parse_cuda_error(fields[2], fault.error) || fault.error == CUDA_SUCCESS) return accepted;
    c.faults.push_back(std::move(fault));
  }
  return {};
}

// "cuMemCreate=190,cuMemMap=1.5" (microseconds, fractions allowed)
std::string apply_latency(Config& c, std::string_view value) {
  static const char* accepted = "a comma-separated list of FUNCTION=MICROSECONDS, e.g. cuMemCreate=190,cuMemMap=1.5";
  c.latency_ns.clear();
  for (std::string_view item : split(value, ',')) {
    auto eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) return accepted;
    std::string number(item.substr(eq + 1));
    char* end = nullptr;
    double us = std::strtod(number.c_str(), &end);
    if (number.empty() || *end != '\0' || !(us >= 0) || us > 1e7) return accepted;
    c.latency_ns[std::string(item.substr(0, eq))] = static_cast<std::uint64_t>(us * 1000.0);
  }
  return {};
}

const std::vector<Setting>& table() {
  static const std::vector<Setting> settings = {
      {"SIMCUDA_DEVICE_COUNT", "1", "Number of simulated devices (1-16).",
       [](Config& c, std::string_view v) -> std::string {
         auto n = parse_count(v);
         if (!n || *n < 1 || *n > 16) return "an integer from 1 to 16";
         c.device_count = static_cast<int>(*n);
         return {};
       }},
      {"SIMCUDA_DEVICE_MEMORY", "80GiB", "Capacity of each device, as cuMemGetInfo/cuDeviceTotalMem report it.",
       [](Config& c, std::string_view v) { return apply_size(c.device_memory, v, false); }},
      {"SIMCUDA_GRANULARITY", "2MiB",
       "Minimum VMM granularity (cuMemGetAllocationGranularity MINIMUM); cuMemAlloc charges are rounded up to it.",
       [](Config& c, std::string_view v) -> std::string {
         std::uint64_t g = 0;
         if (!apply_size(g, v).empty() || !is_power_of_two(g) || g < 4096) return "a power of two of at least 4KiB";
         c.granularity = g;
         return {};
       }},
      {"SIMCUDA_RECOMMENDED_GRANULARITY", "2MiB",
       "Recommended VMM granularity (RECOMMENDED); a multiple of the minimum.",
       [](Config& c, std::string_view v) -> std::string {
         std::uint64_t g = 0;
         if (!apply_size(g, v).empty() || !is_power_of_two(g) || g < 4096) return "a power of two of at least 4KiB";
         c.recommended_granularity = g;
         return {};
       }},
      {"SIMCUDA_VMM", "1", "Device supports the VMM API (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED).",
       [](Config& c, std::string_view v) { return apply_bool(c.vmm, v); }},
      {"SIMCUDA_HOST_VMM", "1", "cuMemCreate accepts CU_MEM_LOCATION_TYPE_HOST (attribute 145).",
       [](Config& c, std::string_view v) { return apply_bool(c.host_vmm, v); }},
      {"SIMCUDA_HOST_NUMA_VMM", "1", "cuMemCreate accepts CU_MEM_LOCATION_TYPE_HOST_NUMA(_CURRENT) (attribute 141).",
       [](Config& c, std::string_view v) { return apply_bool(c.host_numa_vmm, v); }},
      {"SIMCUDA_HOST_BACKING", "1",
       "cuMemAlloc family: 1 maps host memory behind each allocation (an mmap and a munmap per pair, as a real "
       "driver makes system calls); 0 hands out addresses of a reserved inaccessible range without a system call "
       "(touching them faults): for benchmarks that measure the calls without the kernel's work.",
       [](Config& c, std::string_view v) { return apply_bool(c.host_backing, v); }},
      {"SIMCUDA_HOST_MEMORY", "512GiB", "Capacity for host-located VMM handles.",
       [](Config& c, std::string_view v) { return apply_size(c.host_memory, v); }},
      {"SIMCUDA_CONTEXT_BYTES", "0",
       "Device memory a primary context holds while retained (a real H100 context: ~0.5GiB).",
       [](Config& c, std::string_view v) { return apply_size(c.context_bytes, v); }},
      {"SIMCUDA_GRAPH_EXEC_BYTES", "2MiB", "Device memory each graph instantiation holds until cuGraphExecDestroy.",
       [](Config& c, std::string_view v) { return apply_size(c.graph_exec_bytes, v); }},
      {"SIMCUDA_GRAPH_NODE_BYTES", "0", "Additional device memory per node of an instantiated graph.",
       [](Config& c, std::string_view v) { return apply_size(c.graph_node_bytes, v); }},
      {"SIMCUDA_MODULE_BYTES", "2MiB",
       "Device memory a loaded module or library holds (a PTX comment `// simcuda-module-bytes: SIZE` overrides it).",
       [](Config& c, std::string_view v) { return apply_size(c.module_bytes, v); }},
      {"SIMCUDA_DRIVER_VERSION", "13000", "What cuDriverGetVersion reports; cuGetProcAddress rejects newer versions.",
       [](Config& c, std::string_view v) -> std::string {
         auto n = parse_count(v);
         if (!n || *n < 11030 || *n > 99990) return "a CUDA version number such as 12080 or 13000";
         c.driver_version = static_cast<int>(*n);
         return {};
       }},
      {"SIMCUDA_DEVICE_NAME", "NVIDIA H100 80GB HBM3 (simcuda)", "What cuDeviceGetName reports.",
       [](Config& c, std::string_view v) -> std::string {
         if (v.empty() || v.size() > 200) return "a non-empty name of at most 200 characters";
         c.device_name = std::string(v);
         return {};
       }},
      {"SIMCUDA_FAIL", "",
       "Fault injection: FUNCTION:N[+]:ERROR,... fails the Nth call (N+: and all later) of FUNCTION.", apply_faults},
      {"SIMCUDA_LATENCY_US", "", "Per-call latency: FUNCTION=MICROSECONDS,... (busy-waits, to model real VMM costs).",
       apply_latency},
  };
  return settings;
}

std::string suggestion(std::string_view name) {
  // The known name sharing the longest prefix: enough to catch a typo such as SIMCUDA_DEVICE_MEM.
  std::string best;
  std::size_t best_len = 0;
  for (const Setting& s : table()) {
    std::string_view known = s.name;
    std::size_t n = 0;
    while (n < known.size() && n < name.size() && known[n] == name[n]) ++n;
    if (n > best_len) {
      best_len = n;
      best = s.name;
    }
  }
  return best_len > std::strlen("SIMCUDA_") ? " (did you mean " + best + "?)" : std::string();
}

}  // namespace

std::string parse_config(const std::vector<std::pair<std::string, std::string>>& settings, Config& out) {
  // The table's defaults first, so the table stays the one source of every default.
  Config config;
  for (const Setting& s : table()) {
    if (*s.default_value == '\0') continue;
    std::string bad = s.apply(config, s.default_value);
    if (!bad.empty()) return std::string("simcuda: internal default of ") + s.name + " is invalid";
  }
  for (const auto& [name, value] : settings) {
    auto it = std::find_if(table().begin(), table().end(), [&](const Setting& s) { return name == s.name; });
    if (it == table().end()) return "simcuda: unknown setting " + name + suggestion(name);
    std::string accepted = it->apply(config, value);
    if (!accepted.empty()) return "simcuda: " + name + "='" + value + "' is invalid: expected " + accepted;
  }
  if (config.recommended_granularity % config.granularity != 0)
    return "simcuda: SIMCUDA_RECOMMENDED_GRANULARITY must be a multiple of SIMCUDA_GRANULARITY";
  out = std::move(config);
  return {};
}

std::vector<std::pair<std::string, std::string>> environment_settings() {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry = *e;
    if (entry.rfind("SIMCUDA_", 0) != 0) continue;
    auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    out.emplace_back(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return out;
}

bool split_settings(std::string_view text, std::vector<std::pair<std::string, std::string>>& out, std::string& error) {
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    std::size_t start = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (start == i) break;
    std::string_view token = text.substr(start, i - start);
    auto eq = token.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      error = "simcuda: setting '" + std::string(token) + "' is not NAME=VALUE";
      return false;
    }
    out.emplace_back(std::string(token.substr(0, eq)), std::string(token.substr(eq + 1)));
  }
  return true;
}

bool parse_cuda_error(std::string_view text, CUresult& out) {
  if (auto n = parse_count(text)) {
    out = static_cast<CUresult>(*n);
    return error_name(out) != nullptr;
  }
  return error_by_name(text, out);
}

const std::string& settings_markdown() {
  static const std::string markdown = [] {
    std::string md = "| Variable | Default | Meaning |\n|---|---|---|\n";
    for (const Setting& s : table()) {
      md += "| `";
      md += s.name;
      md += "` | ";
      md += *s.default_value ? std::string("`") + s.default_value + "`" : std::string("(none)");
      md += " | ";
      md += s.meaning;
      md += " |\n";
    }
    return md;
  }();
  return markdown;
}

}  // namespace simcuda
