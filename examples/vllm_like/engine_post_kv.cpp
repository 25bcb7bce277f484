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
  if (o_.kind == EngineKind::sglang) {
    capture_graphs_sglang();
  } else if (o_.model_runner_v2) {
    capture_graphs_vllm_v2();
    warmup_kernels_v2();
  } else {
    capture_graphs_vllm();
  }
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

// Every engine captures its largest size first: later sizes reuse the pool blocks it took.
std::vector<std::size_t> Engine::sizes_largest_first() const {
  std::vector<std::size_t> sizes = s_.capture_sizes;
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  return sizes;
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
  const std::vector<std::size_t> sizes = sizes_largest_first();
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

// vLLM Model Runner V2 capture_model (v1/worker/gpu/model_runner.py:848-911 at 017e9f4): gc, empty_cache and a
// query; then CudaGraphManager.capture (v1/worker/gpu/cudagraph_utils.py:307-374): inside one graph_capture()
// (a new side stream), PIECEWISE sizes first, then FULL sizes, largest first. Each size's warm-up forward runs
// on the side stream with attention metadata (prepare_inputs_to_capture, :606): its attention kernels take the
// KV cache, though dummy slot mappings of PAD_SLOT_ID store nothing (block_table.py:209-217); the replica's
// warm-up writes the decode region, which start-up leaves unchecked. A PIECEWISE graph is captured on that
// stream; a FULL graph by torch.cuda.graph(graph, pool) with no stream, which synchronises, empties the cache
// and captures on PyTorch's default_capture_stream. A query after the loop ("Graph capturing finished in N
// secs, took X GiB").
void Engine::capture_graphs_vllm_v2() {
  begin_phase("post-KV (graph capture)");
  const std::vector<std::size_t> sizes = sizes_largest_first();
  const auto start = std::chrono::steady_clock::now();
  alloc_->empty_cache();
  const std::uint64_t free_before = query_free();
  const CachingAllocator::PoolId pool = alloc_->create_graph_pool();
  enter_graph_capture();
  const cudaStream_t side = current_stream_;
  std::size_t piecewise = 0, full = 0;
  if (o_.cudagraph_mode != CudagraphMode::full)
    for (std::size_t batch : sizes) {
      forward_for_batch(batch, true, nullptr);
      graphs_.push_back(capture_one(batch, pool, true));
      ++piecewise;
    }
  if (o_.cudagraph_mode != CudagraphMode::piecewise)
    for (std::size_t batch : sizes) {
      forward_for_batch(batch, true, nullptr);
      VLLM_LIKE_CHECK(cudaDeviceSynchronize());
      if (default_capture_stream_ == nullptr)
        VLLM_LIKE_CHECK(cudaStreamCreateWithFlags(&default_capture_stream_, cudaStreamNonBlocking));
      use_stream(default_capture_stream_);
      graphs_.push_back(capture_one(batch, pool, true));
      use_stream(side);
      ++full;
    }
  leave_graph_capture();
  VLLM_LIKE_CHECK(cudaDeviceSynchronize());
  const std::uint64_t free_after = query_free();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "vllm_like: phase post-KV: Graph capturing finished in %.0f secs, took %s GiB (%zu PIECEWISE and %zu FULL "
      "graphs, "
      "pool %s GiB), %d buffers shared over IPC\n",
      secs, gib(static_cast<double>(free_before > free_after ? free_before - free_after : 0)).c_str(), piecewise, full,
      gib(static_cast<double>(alloc_->pool_reserved(pool))).c_str(), ipc_handles_);
}

// Model Runner V2's warmup_kernels after capture_model (v1/worker/gpu_worker.py:808-810,
// v1/worker/gpu/warmup.py:202): scheduler-realistic dummy requests through execute_model and sampling on the
// main stream — a prefill, then decode steps — which write KV (start-up writes: not checked in serving).
void Engine::warmup_kernels_v2() {
  begin_phase("post-KV (warmup_kernels)");
  for (std::size_t step = 0; step < 4; ++step) eager_forward(KvWrite{kDecodeRegion, graph_seed(step)});
  kv_expected_[kDecodeRegion].reset();
  std::printf("vllm_like: phase post-KV: warmup_kernels ran a prefill and 3 decode steps on the main stream\n");
}

// SGLang: model_runner init_device_graphs logs "Capture cuda graph begin" and "... end" around
// CudaGraphRunner (each get_available_gpu_memory: empty_cache, then a query); its capture() enters
// graph_capture() (a new side stream), queries once, then per batch size, largest first: a query
// on rank 0, two warm-up forwards each after a device synchronize, and the capture into the shared
// global pool on the capture stream (cuda_graph_runner.py capture / capture_one_batch_size).
void Engine::capture_graphs_sglang() {
  begin_phase("post-KV (graph capture)");
  const std::vector<std::size_t> sizes = sizes_largest_first();
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
