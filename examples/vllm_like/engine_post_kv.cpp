// vllm_like after KV sizing: autotuning, module loads, CUDA-graph capture into one shared pool, serving.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#include "cuda_check.h"
#include "engine.h"
#include "kv_sample.h"

namespace vllm_like {

namespace {

constexpr std::uint32_t kAutotuneSeed = 0xa070u;
constexpr std::uint32_t kIntermediateSeed = 0x1e7eu;

std::uint32_t graph_seed(std::size_t batch) { return 0x5eed0000u | static_cast<std::uint32_t>(batch & 0xffffu); }

}  // namespace

void Engine::post_kv() {
  autotune();
  load_modules();
  capture_graphs();
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

// One forward at a batch size: two ping-pong intermediates (freed), the per-layer kernels that
// write the KV cache, and an output tensor. `output` null = warm-up: the output is freed too.
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
  if (write_kv)
    for (const Tensor& kv : kv_) kernels_->fill(kv.ptr, kv.bytes, seed);
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
  VLLM_LIKE_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  forward_for_batch(batch, write_kv, &g.output);
  // vLLM's custom all-reduce registers a graph buffer for IPC while the first graph is captured.
  if (graphs_.empty() && g.output) share_over_ipc(g.output);
  VLLM_LIKE_CHECK(cudaStreamEndCapture(stream_, &g.graph));
  alloc_->end_allocate_to_pool();
  VLLM_LIKE_CHECK(cudaGraphInstantiate(&g.exec, g.graph, 0));
  return g;
}

void Engine::capture_graphs() {
  begin_phase("post-KV (graph capture)");
  std::vector<std::size_t> sizes = s_.capture_sizes;
  std::sort(sizes.begin(), sizes.end(), std::greater<>());  // largest first: later sizes reuse its blocks
  const auto start = std::chrono::steady_clock::now();
  // vLLM queries free memory once before and once after the loop, never inside it.
  const std::uint64_t free_before = query_free();
  const CachingAllocator::PoolId pool = alloc_->create_graph_pool();
  for (std::size_t batch : sizes) {
    for (std::size_t w = 0; w < s_.capture_warmups; ++w) forward_for_batch(batch, true, nullptr);
    graphs_.push_back(capture_one(batch, pool, true));
  }
  const std::uint64_t free_after = query_free();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "vllm_like: phase post-KV: Graph capturing finished in %.0f secs, took %s GiB (%zu graphs, pool %s GiB), %d "
      "buffers shared over IPC\n",
      secs, gib(static_cast<double>(free_before > free_after ? free_before - free_after : 0)).c_str(), graphs_.size(),
      gib(static_cast<double>(alloc_->pool_reserved(pool))).c_str(), ipc_handles_);
}

void Engine::verify_kv(std::uint32_t seed, const char* when) {
  std::uint64_t words = 0;
  for (const Tensor& kv : kv_) {
    kernels_->check(kv.ptr, kv.bytes, seed);
    words += sample_count(kv.bytes, kSampleStride);
  }
  for (const Tensor& t : persistent_) {
    kernels_->check(t.ptr, t.bytes, 0);  // never written after torch.zeros
    words += sample_count(t.bytes, kSampleStride);
  }
  const std::uint32_t bad = kernels_->take_mismatches();
  if (bad != 0)
    throw EngineExit(kExitFailure, "KV verification failed " + std::string(when) + ": " + std::to_string(bad) + " of " +
                                       std::to_string(words) + " sampled words differ");
}

// Synthetic decode steps: each replays one captured graph (spread over the sizes) and checks that
// every sampled KV word holds what that graph writes; then one eager step at the activation peak.
void Engine::serve() {
  begin_phase("serving");
  const std::size_t n = graphs_.size();
  std::uint32_t last_seed = 0;
  for (std::size_t step = 0; step < s_.serving_steps; ++step) {
    const CapturedGraph& g = graphs_[s_.serving_steps > 1 ? (n - 1) * step / (s_.serving_steps - 1) : 0];
    VLLM_LIKE_CHECK(cudaGraphLaunch(g.exec, stream_));
    last_seed = graph_seed(g.batch);
    verify_kv(last_seed, "after a graph replay");
    std::printf("vllm_like: phase serving: step %zu replayed the batch-%zu graph, KV verified\n", step, g.batch);
  }
  eager_forward();
  verify_kv(last_seed, "after an eager step");
  std::printf("vllm_like: phase serving: eager step at the activation peak, KV verified, free %s GiB\n",
              gib(static_cast<double>(query_free())).c_str());
}

}  // namespace vllm_like
