// The vllm_like engine: vLLM V1's (or SGLang's) start-up sequence over the caching allocator.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "caching_allocator.h"
#include "device_ops.h"
#include "scenario.h"

namespace vllm_like {

enum class EngineKind { vllm, sglang };

struct EngineOptions {
  EngineKind kind = EngineKind::vllm;
  double gpu_memory_utilization = 0.9;  // vLLM's default
  double mem_fraction_static = 0.88;
};

class Engine {
 public:
  Engine(const Scenario& scenario, const EngineOptions& options) : s_(scenario), o_(options) {}

  // All phases up to the "started" line; throws EngineExit on any failure.
  void run();
  // The phase running now, for the failure line main prints.
  const std::string& phase() const { return phase_; }

 private:
  // cudaIpcGetMemHandle on `ptr`, as custom all-reduce does; fails the start-up if refused.
  void share_over_ipc(void* ptr);
  // Legacy IPC must work on every non-KV tensor the engine holds (a VMM placement would break it).
  void check_ipc_on_non_kv();
  int ipc_handles_ = 0;
  struct Tensor {
    void* ptr = nullptr;
    std::uint64_t bytes = 0;
  };
  struct CapturedGraph {
    std::size_t batch = 0;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    void* output = nullptr;  // graph outputs stay live in the pool, as a runner keeps them
  };

  // engine.cpp
  void begin_phase(const char* name);
  void init();
  void load_weights();
  void profile();
  void size_kv_sglang();
  void allocate_kv();
  std::uint64_t query_free();
  Tensor allocate(std::uint64_t bytes);
  void eager_forward();
  std::uint64_t estimate_graph_memory();

  // engine_post_kv.cpp
  void post_kv();
  void autotune();
  void load_modules();
  void capture_graphs();
  CapturedGraph capture_one(std::size_t batch, CachingAllocator::PoolId pool, bool write_kv);
  void forward_for_batch(std::size_t batch, bool write_kv, void** output);
  void serve();
  void verify_kv(std::uint32_t seed, const char* when);

  const Scenario& s_;
  EngineOptions o_;
  std::string phase_ = "init";
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<CachingAllocator> alloc_;
  std::unique_ptr<Kernels> kernels_;

  std::uint64_t total_ = 0;
  std::uint64_t baseline_free_ = 0;
  std::uint64_t baseline_non_torch_ = 0;
  std::uint64_t requested_ = 0;
  std::uint64_t weights_bytes_ = 0;
  std::uint64_t kv_bytes_ = 0;
  std::vector<Tensor> weights_;
  std::vector<void*> non_torch_;
  std::vector<Tensor> kv_;
  std::vector<Tensor> persistent_;
  std::vector<Tensor> autotune_resident_;
  std::vector<cudaLibrary_t> modules_;
  std::vector<CapturedGraph> graphs_;
};

}  // namespace vllm_like
