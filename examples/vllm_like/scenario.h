// Scenario of a vllm_like run: the memory figures of one engine rank, read from a JSON file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace vllm_like {

// A malformed scenario file: main reports it on one line and exits 2.
struct ScenarioError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct TensorSpec {
  std::string name;
  std::size_t count = 1;
  std::uint64_t bytes = 0;
};

struct Scenario {
  std::string name;
  // Only for --print-simcuda-env: the program itself reads the device through cudaMemGetInfo.
  std::uint64_t device_total = 0;
  std::uint64_t context_bytes = 0;

  std::size_t num_layers = 0;
  std::vector<TensorSpec> global_tensors;     // embeddings, lm_head
  std::vector<TensorSpec> per_layer_tensors;  // allocated num_layers times each

  std::uint64_t activation_peak = 0;   // torch memory the profiling forward holds at its peak
  std::size_t activation_tensors = 1;  // ... split over this many live tensors
  std::uint64_t non_torch_growth = 0;  // NCCL/cuBLAS workspaces: plain cudaMalloc, outside torch
  bool estimate_graph_memory = false;  // newer vLLM: subtract a profiled graph-memory estimate
  std::size_t estimate_graph_sizes = 2;
  // With the estimate: each layer's share of the minimal KV cache vLLM allocates for it (0: none).
  std::uint64_t graph_profiling_kv_per_layer = 0;

  std::vector<TensorSpec> persistent_buffers;  // allocated right after the KV tensors

  std::uint64_t autotune_peak = 0;      // torch memory at the autotune peak, resident part included
  std::uint64_t autotune_resident = 0;  // what autotuning keeps (selected kernels' workspaces)
  std::size_t autotune_transient_buffers = 1;

  std::size_t module_count = 0;
  std::uint64_t module_total = 0;  // driver memory of all loaded modules together

  std::vector<std::size_t> capture_sizes;  // batch sizes, captured largest first as vLLM does
  std::size_t capture_warmups = 2;
  std::uint64_t capture_intermediate_per_token = 0;  // freed at the end of each capture
  std::uint64_t capture_output_per_token = 0;        // graph outputs: stay live in the pool
  std::uint64_t graph_exec_total = 0;                // driver memory of all instantiated graphs

  std::size_t serving_steps = 3;
  // The activations of a serving prefill (a long prompt, a larger chunk than profiling ran): the
  // profiling forward's peak unless the scenario's serving.activation_peak says more.
  std::uint64_t serving_activation_peak = 0;
  // The first prompt's eager prefill (vLLM's first request where it is eager, SGLang's warm-up request):
  // serving.first_prompt_activation_peak, else the serving activation peak. Smaller, it leaves the allocator's
  // cache holding blocks a later, larger prefill cannot reuse.
  std::uint64_t first_prompt_activation_peak = 0;
};

// Reads and validates a scenario; throws ScenarioError naming the file and the offending field.
Scenario load_scenario(const std::string& path);

// "48GiB", "0.5GiB", "256MiB", "10KiB", "4096B" or a JSON integer (bytes). IEC units only: a
// scenario copied from a GiB-denominated report must not silently shrink by 7%.
std::uint64_t parse_size(const std::string& text);

}  // namespace vllm_like
