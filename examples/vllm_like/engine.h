// The vllm_like engine: vLLM V1's (or SGLang's) start-up sequence over the caching allocator.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "caching_allocator.h"
#include "device_ops.h"
#include "scenario.h"

namespace vllm_like {

enum class EngineKind { vllm, sglang };

// vLLM graph mode: what the first serving step after start-up is.
enum class FirstRequest { graph_replays, eager_prefill };

// How the engine allocates its KV cache.
enum class KvLayout {
  // One torch.zeros per layer: vLLM up to 0.28 (v1/worker/gpu_model_runner.py:7444-7480 before vllm#51718).
  per_layer,
  // Every layer's KV in one allocation, layer l at l x the layer size: vLLM >= 0.29 (KVCacheTensor's `size`
  // is the whole backing allocation, layers at offset + l * layer_stride, vllm#51718), SGLang's
  // --enable-unified-memory pool (mem_cache/unified_memory_pool.py:216).
  one_allocation,
  // SGLang's MHA pool: one torch.zeros per layer for K, then one per layer for V, each half the layer's
  // KV (MHATokenToKVPool._create_buffers, mem_cache/memory_pool.py:1510-1530 at 1f5eeb6, the default
  // layout).
  k_then_v,
};

// vLLM's cudagraph_mode (config/compilation.py CUDAGraphMode) under Model Runner V2: which graphs it captures.
enum class CudagraphMode {
  full_and_piecewise,  // the default: PIECEWISE graphs for every size, then FULL graphs
  full,                // FULL graphs only (forced by sequence parallelism or attention+quant fusion)
  piecewise,           // PIECEWISE graphs only
};

struct EngineOptions {
  EngineKind kind = EngineKind::vllm;
  double gpu_memory_utilization = 0.92;  // vLLM's default (config/cache.py:80)
  double mem_fraction_static = 0.88;
  FirstRequest first_request = FirstRequest::graph_replays;
  bool cuda_graphs = true;                       // false: vLLM --enforce-eager, SGLang --disable-cuda-graph
  std::optional<std::uint64_t> kv_cache_memory;  // vLLM --kv-cache-memory: KV size given, not profiled
  std::string kv_connector;                      // vLLM --kv-transfer-config: empty without a connector
  // How the KV cache is allocated (--kv-layout).
  KvLayout kv_layout = KvLayout::per_layer;
  // vLLM's model runner: V1's start-up (false) or Model Runner V2's (VLLM_USE_V2_MODEL_RUNNER=1).
  bool model_runner_v2 = false;
  CudagraphMode cudagraph_mode = CudagraphMode::full_and_piecewise;  // Model Runner V2 only
  // SGLang --context-length and --max-running-requests: the rows and columns of its req_to_token table. SGLang
  // takes the context length from the model and the requests from its KV capacity (at least 2048,
  // model_runner_kv_cache_mixin.py:1225-1238); the replica's defaults stand for a 32k-context model.
  std::uint64_t context_length = 32768;
  std::uint64_t max_running_requests = 2048;
  // Not an SGLang flag: the model's linear-attention (Mamba, GDN) layers, which SGLang reads from the model's
  // config; their state pool comes before the KV cache of the other layers. 0: a dense model.
  std::size_t mamba_layers = 0;
  // SGLang --speculative-algorithm EAGLE: a draft model's weights after the target's, its KV pool after the
  // target's.
  bool speculative = false;
  int device = 0;  // also the rank: the launcher runs rank r on device r
};

// Each KV tensor is split into equal regions standing for the block ranges of different requests,
// so serving can write one request's KV and later prove it survived other requests' steps.
enum KvRegion : std::size_t {
  kFirstPromptRegion = 0,   // the first request's prompt (vLLM's eager prefill, SGLang's warm-up request)
  kDecodeRegion = 1,        // decode token slots: what warm-ups, captured graphs and decode steps write
  kSecondPromptRegion = 2,  // a later request's own tokens
  kUntouchedRegion = 3,     // never written after torch.zeros
  kKvRegionCount = 4,
};

// The pattern a batch size's warm-ups and captured graph write into the decode region.
std::uint32_t graph_seed(std::size_t batch);

class Engine {
 public:
  Engine(const Scenario& scenario, const EngineOptions& options) : s_(scenario), o_(options) {}

  // All phases up to the "started" line; throws EngineExit on any failure.
  void run();
  // The phase running now, for the failure line main prints.
  const std::string& phase() const { return phase_; }

 private:
  // KV write of one forward: `seed`'s pattern into `region` of every layer.
  struct KvWrite {
    KvRegion region;
    std::uint32_t seed;
  };

  // cudaIpcGetMemHandle on `ptr`, as custom all-reduce does; fails the start-up if refused.
  void share_over_ipc(void* ptr);
  // Legacy IPC must work on every non-KV tensor the engine holds (a VMM placement would break it), except
  // SGLang's req_to_token table, which no other process opens and kvremap may place in its arena.
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
  void copy_checkpoint(std::size_t first);
  void profile();
  // NCCL buffers and cuBLAS workspaces: the scenario's non-torch growth, outside torch's allocator, on
  // first use (vLLM's profiling forward; SGLang's NCCL initialisation before its weights).
  void grow_non_torch();
  void size_kv_sglang();
  void allocate_kv();
  std::uint64_t query_free();
  Tensor allocate(std::uint64_t bytes);
  // Makes `stream` current for kernels and the allocator (torch.cuda.stream), after synchronising
  // the one left: the allocator does not track streams per block, so nothing may still be in flight.
  void use_stream(cudaStream_t stream);
  // A new side stream made current, as vLLM's and SGLang's graph_capture() do.
  void enter_graph_capture();
  void leave_graph_capture();
  // `peak`: the activations' total; 0 for the profiling forward's (Scenario::activation_peak).
  void eager_forward(std::optional<KvWrite> kv_write = std::nullopt, std::uint64_t peak = 0);
  std::uint64_t estimate_graph_memory();

  // engine_post_kv.cpp
  void post_kv();
  void autotune();
  void load_modules();
  std::vector<std::size_t> sizes_largest_first() const;
  void capture_graphs_vllm();
  void capture_graphs_vllm_v2();
  void warmup_kernels_v2();
  void capture_graphs_sglang();
  CapturedGraph capture_one(std::size_t batch, CachingAllocator::PoolId pool, bool write_kv);
  void forward_for_batch(std::size_t batch, bool write_kv, void** output);

  // engine_serving.cpp
  void serve_vllm();
  void serve_sglang();
  void begin_serving();
  void eager_prefill(const char* request, std::size_t tokens, KvRegion region, std::uint32_t seed,
                     std::uint64_t peak);
  void decode_step(std::size_t step, std::size_t of_steps);
  void write_kv_region(const Tensor& kv, KvRegion region, std::uint32_t seed);
  void check_kv_region(const Tensor& kv, KvRegion region, std::uint32_t seed);
  // Checks every region whose content is known, and the persistent buffers (still zero).
  void verify_kv(const std::string& when);
  // SGLang's prefix cache: reads `region` back and requires `seed`'s pattern in every layer.
  void verify_prefix(KvRegion region, std::uint32_t seed, const std::string& when);

  const Scenario& s_;
  EngineOptions o_;
  std::string phase_ = "init";
  cudaStream_t main_stream_ = nullptr;     // the engine's compute stream: everything but graph capture
  cudaStream_t current_stream_ = nullptr;  // main_stream_, or the side stream inside graph_capture()
  std::vector<cudaStream_t> capture_streams_;
  // PyTorch's process-wide torch.cuda.graph capture stream (graphs.py default_capture_stream), created at
  // the first capture that names no stream: Model Runner V2's FULL graphs.
  cudaStream_t default_capture_stream_ = nullptr;
  // SGLang's overlap-scheduler forward stream: serving runs there (null for vLLM, which serves on main_stream_).
  cudaStream_t forward_stream_ = nullptr;
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
  // Per model layer, the indices in kv_ of what its forward writes: its KV tensors (K and V where they are
  // apart), a linear-attention layer's state; the draft model's KV with the last layer.
  std::vector<std::vector<std::size_t>> layer_tensors_;
  std::vector<Tensor> persistent_;
  // SGLang's req_to_token table (allocate_kv): the scheduler writes a request's token slots into its row.
  Tensor req_to_token_;
  std::vector<Tensor> autotune_resident_;
  std::vector<cudaLibrary_t> modules_;
  std::vector<CapturedGraph> graphs_;
  // The pattern seed each KV region must hold; empty = not known (start-up writes that a deferred
  // KV cache keeps in scratch and a commit zero-fills), so not checked.
  std::array<std::optional<std::uint32_t>, kKvRegionCount> kv_expected_{};
};

}  // namespace vllm_like
