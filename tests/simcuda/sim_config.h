// SIMCUDA_* settings: one table gives each knob's name, default, meaning and parser.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace simcuda {

struct Fault {
  std::string function;    // export name as counted by simcuda_call_count
  std::uint64_t nth = 1;   // 1-based call number
  bool and_later = false;  // "N+": this call and every later one
  CUresult error = CUDA_ERROR_UNKNOWN;
};

struct Config {
  int device_count = 1;
  std::uint64_t device_memory = 80ULL << 30;
  std::uint64_t granularity = 2ULL << 20;
  std::uint64_t recommended_granularity = 2ULL << 20;
  bool vmm = true;
  bool host_vmm = true;
  bool host_numa_vmm = true;
  std::uint64_t host_memory = 512ULL << 30;
  bool host_backing = true;  // cuMemAlloc family: host pages behind each allocation
  std::uint64_t context_bytes = 0;
  std::uint64_t graph_exec_bytes = 2ULL << 20;
  std::uint64_t graph_node_bytes = 0;
  std::uint64_t module_bytes = 2ULL << 20;
  int driver_version = 13000;
  std::string device_name = "NVIDIA H100 80GB HBM3 (simcuda)";
  std::vector<Fault> faults;
  std::unordered_map<std::string, std::uint64_t> latency_ns;
};

// Builds a Config from NAME=VALUE settings (unset names keep their defaults). Returns an empty
// string, or one line naming the first bad or unknown setting and what it accepts.
std::string parse_config(const std::vector<std::pair<std::string, std::string>>& settings, Config& out);

// Every SIMCUDA_* variable in the environment.
std::vector<std::pair<std::string, std::string>> environment_settings();

// Splits "A=1 B=2" (any whitespace) into pairs; returns false on a token without '='.
bool split_settings(std::string_view text, std::vector<std::pair<std::string, std::string>>& out, std::string& error);

// Error code by name ("CUDA_ERROR_OUT_OF_MEMORY") or number ("2").
bool parse_cuda_error(std::string_view text, CUresult& out);

// The settings table as Markdown: name | default | meaning.
const std::string& settings_markdown();

}  // namespace simcuda
