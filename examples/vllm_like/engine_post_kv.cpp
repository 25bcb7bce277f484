// vllm_like after KV sizing: autotuning, module loads, CUDA-graph capture into one shared pool.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#include "cuda_check.h"
#include "engine.h"

namespace vllm_like {

namespace {

constexpr std::uint32_t kAutotuneSeed = 0xa070u;
constexpr std::uint32_t kIntermediateSeed = 0x1e7eu;

}  // namespace

std::uint32_t graph_seed(std::size_t batch) { return 0x5eed0000u | static_cast<std::uint32_t>(batch & 0xffffu); }

void Engine::post_kv() {
  autotune();
  load_modules();
  if (!o_.cuda_graphs) {
    std::printf("vllm_like: phase post-KV: no CUDA graphs (%s)\n",
                o_.kind == EngineKind::vllm ? "--enforce-eager" : "--disable-cuda-graph");
    return;
  }
  if (o_.kind == EngineKind::vllm)
    capture_graphs_vllm();
  else
    capture_graphs_sglang();
}

// Kernel autotuning (FlashInfer, Inductor max-autotune) after the KV cache exists: each candidate
// run needs benchmark buffers (transient) and the winners keep workspaces (resident). Two rounds, so
// the second is served from the allocator's cache, as repeated candidates are.
void Engine::autotune() {
  begin_phase("post-KV (autotune)");
  if (s_.autotune_resident > 0) {
    autotune_resident_.push_back(allocate(s_.autotune_resident));
    kernels_->fill(autotune_resident_.back().ptr, s_.autotune_resident, kAutotuneSeed);
  }
  const std::uint64_t transient = s_.autotune_peak - s_.autotune_resident;
  const std::uint64_t each = transient / s_.autotune_transient_buffers;
  for (int round = 0; round < 2 && each > 0; ++round) {
    std::vector<Tensor> buffers;
    for (std::size_t i = 0; i < s_.autotune_transient_buffers; ++i) {
      buffers.push_back(allocate(each));
      kernels_->fill(buffers.back().ptr, each, kAutotuneSeed + static_cast<std::uint32_t>(i + 1));
    }
    for (const Tensor& t : buffers) alloc_->deallocate(t.ptr);
  }
  // vLLM frees the warm-up caches before capturing (gc + empty_cache), so the capture's "took X GiB"
  // measures graphs only.
  alloc_->empty_cache();
  std::printf("vllm_like: phase post-KV: autotune peak %s GiB, resident %s GiB, free %s GiB\n",
              gib(static_cast<double>(s_.autotune_peak)).c_str(),
              gib(static_cast<double>(s_.autotune_resident)).c_str(), gib(static_cast<double>(query_free())).c_str());
}

// JIT-compiled kernels (Triton, FlashInfer) arrive as modules the driver keeps in device memory.
void Engine::load_modules() {
  begin_phase("post-KV (module loads)");
  if (s_.module_count == 0) return;
  const std::uint64_t each = s_.module_total / s_.module_count;
  for (std::size_t i = 0; i < s_.module_count; ++i) modules_.push_back(load_generated_module(i, each));
  std::printf("vllm_like: phase post-KV: %zu modules loaded (%s GiB), free %s GiB\n", modules_.size(),
              gib(static_cast<double>(each * s_.module_count)).c_str(), gib(static_cast<double>(query_free())).c_str());
}

// One forward at a batch size on the current stream: two ping-pong intermediates (freed), the
// per-layer kernels that write the decode region of the KV cache, and an output tensor. `output`
// null = warm-up: the output is freed too.
void Engine::forward_for_batch(std::size_t batch, bool write_kv, void** output) {
  const std::uint64_t inter = batch * s_.capture_intermediate_per_token;
  const std::uint64_t out = batch * s_.capture_output_per_token;
  const std::uint32_t seed = graph_seed(batch);
  Tensor a{}, b{};
  if (inter > 0) {
    a = allocate(inter);
    b = allocate(inter);
    kernels_->fill(a.ptr, inter, kIntermediateSeed);
  }
  if (write_kv) {
    for (const Tensor& kv : kv_) write_kv_region(kv, kDecodeRegion, seed);
    // Start-up writes: real on a stock start, scratch under a deferred KV cache, zeroed by a commit.
    kv_expected_[kDecodeRegion].reset();
  }
  if (inter > 0) kernels_->fill(b.ptr, inter, kIntermediateSeed + 1);
  Tensor o = allocate(out > 0 ? out : 1);
  kernels_->fill(o.ptr, o.bytes, seed);
  if (inter > 0) {
    alloc_->deallocate(a.ptr);
    alloc_->deallocate(b.ptr);
  }
  if (output != nullptr)
    *output = o.ptr;
  else
    alloc_->deallocate(o.ptr);
}

// As torch.cuda.graph: empty_cache, allocations routed to the private pool, global-mode capture.
Engine::CapturedGraph Engine::capture_one(std::size_t batch, CachingAllocator::PoolId pool, bool write_kv) {
  CapturedGraph g;
  g.batch = batch;
  alloc_->empty_cache();
  alloc_->begin_allocate_to_pool(pool);
  VLLM_LIKE_CHECK(cudaStreamBeginCapture(current_stream_, cudaStreamCaptureModeGlobal));
  forward_for_batch(batch, write_kv, &g.output);
  // vLLM's custom all-reduce registers a graph buffer for IPC while the first graph is captured.
  if (graphs_.empty() && g.output) share_over_ipc(g.output);
  VLLM_LIKE_CHECK(cudaStreamEndCapture(current_stream_, &g.graph));
  alloc_->end_allocate_to_pool();
  VLLM_LIKE_CHECK(cudaGraphInstantiate(&g.exec, g.graph, 0));
  return g;
}

// vLLM V1 capture_model (gpu_model_runner.py): one query before and one after the loop, none
// inside; the loop runs in graph_capture() on a side stream: per size, largest first, the warm-up
// dummy runs, then the capture.
void Engine::capture_graphs_vllm() {
  begin_phase("post-KV (graph capture)");
  std::vector<std::size_t> sizes = s_.capture_sizes;
  std::sort(sizes.begin(), sizes.end(), std::greater<>());  // largest first: later sizes reuse its blocks
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t free_before = query_free();
  const CachingAllocator::PoolId pool = alloc_->create_graph_pool();
  enter_graph_capture();
  for (std::size_t batch : sizes) {
    // Piecewise warm-ups skip attention (force_attention is for FULL graphs only,
    // gpu_model_runner.py:7068, _warmup_and_capture): they reach no KV. The captured graph writes it.
    for (std::size_t w = 0; w < s_.capture_warmups; ++w) forward_for_batch(batch, false, nullptr);
    graphs_.push_back(capture_one(batch, pool, true));
  }
  leave_graph_capture();
  VLLM_LIKE_CHECK(cudaDeviceSynchronize());
  const std::uint64_t free_after = query_free();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "vllm_like: phase post-KV: Graph capturing finished in %.0f secs, took %s GiB (%zu graphs, pool %s GiB), %d "
      "buffers shared over IPC\n",
      secs, gib(static_cast<double>(free_before > free_after ? free_before - free_after : 0)).c_str(), graphs_.size(),
      gib(static_cast<double>(alloc_->pool_reserved(pool))).c_str(), ipc_handles_);
}

// SGLang: model_runner init_device_graphs logs "Capture cuda graph begin" and "... end" around
// CudaGraphRunner (each get_available_gpu_memory: empty_cache, then a query); its capture() enters
// graph_capture() (a new side stream), queries once, then per batch size, largest first: a query
// on rank 0, two warm-up forwards each after a device synchronize, and the capture into the shared
// global pool on the capture stream (cuda_graph_runner.py capture / capture_one_batch_size).
void Engine::capture_graphs_sglang() {
  begin_phase("post-KV (graph capture)");
  std::vector<std::size_t> sizes = s_.capture_sizes;
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  const auto start = std::chrono::steady_clock::now();
  alloc_->empty_cache();
  const std::uint64_t free_before = query_free();
  std::printf("vllm_like: phase post-KV: Capture cuda graph begin. avail mem=%s GB\n",
              gib(static_cast<double>(free_before)).c_str());
  const CachingAllocator::PoolId pool = alloc_->create_graph_pool();
  enter_graph_capture();
  query_free();
  for (std::size_t batch : sizes) {
    if (o_.device == 0) query_free();  // the rank-0 progress bar shows avail mem per size
    for (int w = 0; w < 2; ++w) {
      VLLM_LIKE_CHECK(cudaDeviceSynchronize());
      forward_for_batch(batch, true, nullptr);
    }
    graphs_.push_back(capture_one(batch, pool, true));
  }
  leave_graph_capture();
  alloc_->empty_cache();
  const std::uint64_t free_after = query_free();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "vllm_like: phase post-KV: Capture cuda graph end. Time elapsed: %.2f s. mem usage=%s GB. avail mem=%s GB. "
      "(%zu graphs, pool %s GiB)\n",
      secs, gib(static_cast<double>(free_before > free_after ? free_before - free_after : 0)).c_str(),
      gib(static_cast<double>(free_after)).c_str(), graphs_.size(),
      gib(static_cast<double>(alloc_->pool_reserved(pool))).c_str());
}

}  // namespace vllm_like
