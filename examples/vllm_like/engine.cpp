// vllm_like start-up up to the KV cache: init, weight loading, profiling (or SGLang's formula), KV allocation.
#include "engine.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <cstdio>

#include "cuda_check.h"

namespace vllm_like {

namespace {

constexpr std::uint64_t kKvRound = 2u << 20;  // KV tensor sizes are whole 2 MiB granules
// One KV block of one layer in the one-allocation layout: 16 tokens of one KV head of 128 dims, K and V,
// bf16 (the seed's TP8 rank). vLLM sizes that layout in whole blocks across all layers
// (num_blocks = available // (page_size * num_layers)), so the cache is a multiple of num_layers pages.
constexpr std::uint64_t kKvPageBytes = 8u << 10;
constexpr std::uint32_t kActivationSeed = 0xac71u;

}  // namespace

void Engine::begin_phase(const char* name) { phase_ = name; }

std::uint64_t Engine::query_free() {
  std::size_t free = 0, total = 0;
  VLLM_LIKE_CHECK(cudaMemGetInfo(&free, &total));
  total_ = total;
  return free;
}

void Engine::check_ipc_on_non_kv() {
  std::size_t n = 0;
  for (const auto* group : {&weights_, &persistent_, &autotune_resident_})
    for (const Tensor& t : *group) {
      cudaIpcMemHandle_t handle{};
      VLLM_LIKE_CHECK(cudaIpcGetMemHandle(&handle, t.ptr));
      ++n;
    }
  for (void* p : non_torch_) {
    cudaIpcMemHandle_t handle{};
    VLLM_LIKE_CHECK(cudaIpcGetMemHandle(&handle, p));
    ++n;
  }
  std::printf("vllm_like: phase serving: cudaIpcGetMemHandle works on all %zu non-KV tensors\n", n);
}

Engine::Tensor Engine::allocate(std::uint64_t bytes) { return Tensor{alloc_->allocate(bytes), bytes}; }

void Engine::use_stream(cudaStream_t stream) {
  if (stream == current_stream_) return;
  VLLM_LIKE_CHECK(cudaStreamSynchronize(current_stream_));
  current_stream_ = stream;
  kernels_->set_stream(stream);
  alloc_->set_stream(stream);
}

// graph_capture(): torch.cuda.Stream() + stream.wait_stream(current) (here a synchronize: the same
// ordering without events), then torch.cuda.stream(it). The stream outlives the context, as torch's
// pooled streams do, since graphs were captured on it.
void Engine::enter_graph_capture() {
  cudaStream_t side = nullptr;
  VLLM_LIKE_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  capture_streams_.push_back(side);
  use_stream(side);
}

void Engine::leave_graph_capture() { use_stream(main_stream_); }

void Engine::run() {
  init();
  load_weights();
  if (o_.kind == EngineKind::vllm)
    profile();
  else
    size_kv_sglang();
  allocate_kv();
  post_kv();
  if (o_.kind == EngineKind::vllm)
    serve_vllm();
  else
    serve_sglang();
  check_ipc_on_non_kv();
  std::printf("vllm_like: started, KV %s GiB in %zu tensors\n", gib(static_cast<double>(kv_bytes_)).c_str(),
              kv_.size());
}

void Engine::share_over_ipc(void* ptr) {
  cudaIpcMemHandle_t handle{};
  VLLM_LIKE_CHECK(cudaIpcGetMemHandle(&handle, ptr));
  ++ipc_handles_;
}

void Engine::init() {
  begin_phase("init");
  VLLM_LIKE_CHECK(cudaSetDevice(o_.device));
  VLLM_LIKE_CHECK(cudaFree(nullptr));  // creates the primary context: the simulator charges its memory here
  // vLLM's current_stream() replaces the legacy NULL stream (implicit synchronisation) with a
  // created stream; graphs are captured on further side streams (enter_graph_capture).
  VLLM_LIKE_CHECK(cudaStreamCreateWithFlags(&main_stream_, cudaStreamNonBlocking));
  current_stream_ = main_stream_;
  alloc_ = std::make_unique<CachingAllocator>(main_stream_);
  // Custom all-reduce: buffers other ranks open through legacy CUDA IPC, which VMM memory cannot
  // offer; whatever places the KV cache must leave these as plain allocations.
  for (int i = 0; i < 2; ++i) {
    void* p = nullptr;
    VLLM_LIKE_CHECK(cudaMalloc(&p, 8u << 20));
    share_over_ipc(p);
    non_torch_.push_back(p);
  }
  kernels_ = std::make_unique<Kernels>(main_stream_);  // before the baseline: it is start-up overhead, like CUDA's own
  alloc_->empty_cache();
  baseline_free_ = query_free();
  baseline_non_torch_ = total_ - baseline_free_ - alloc_->memory_reserved();
  const double share = o_.kind == EngineKind::vllm ? o_.gpu_memory_utilization : o_.mem_fraction_static;
  requested_ = static_cast<std::uint64_t>(static_cast<double>(total_) * share);
  std::printf("vllm_like: phase init: total %s GiB, free %s GiB, %s %.2f -> requested %s GiB\n",
              gib(static_cast<double>(total_)).c_str(), gib(static_cast<double>(baseline_free_)).c_str(),
              o_.kind == EngineKind::vllm ? "gpu_memory_utilization" : "mem_fraction_static", share,
              gib(static_cast<double>(requested_)).c_str());
  if (o_.kind == EngineKind::vllm && baseline_free_ < requested_) {
    char text[256];
    std::snprintf(text, sizeof text,
                  "ValueError: Free memory on device (%s/%s GiB) on startup is less than desired GPU memory "
                  "utilization (%.2f, %s GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
                  "processes.",
                  gib(static_cast<double>(baseline_free_)).c_str(), gib(static_cast<double>(total_)).c_str(),
                  o_.gpu_memory_utilization, gib(static_cast<double>(requested_)).c_str());
    throw EngineExit(kExitRefused, text);
  }
  // SGLang initialises NCCL (and its custom all-reduce buffers) before loading weights, then takes
  // pre_model_load_memory: a query, the minimum over ranks, then the local one (model_runner.py:1350-1375).
  if (o_.kind == EngineKind::sglang) {
    grow_non_torch();
    query_free();
    query_free();
    // The overlap scheduler's forward stream, created here (ENGINES-2026.md sequence D, step 2) and first used
    // by the server's warm-up request: every start-up kernel before runs on the default stream.
    VLLM_LIKE_CHECK(cudaStreamCreateWithFlags(&forward_stream_, cudaStreamNonBlocking));
  }
}

void Engine::grow_non_torch() {
  if (s_.non_torch_growth == 0) return;
  void* p = nullptr;
  VLLM_LIKE_CHECK(cudaMalloc(&p, s_.non_torch_growth));
  non_torch_.push_back(p);
}

// The checkpoint's bytes arrive by host-to-device copies (load_state_dict). The run never reads weights
// (there is no model, only its memory footprint), so 96 MiB of each model's weights from `first` on stand
// for them — the first MiB of each tensor, then the next, until 96 MiB or every byte is copied: on the
// simulator untouched device memory costs no RAM.
void Engine::copy_checkpoint(std::size_t first) {
  constexpr std::uint64_t kBudget = 96u << 20;
  const std::vector<char> chunk(1u << 20, 1);
  std::uint64_t copied = 0;
  for (std::uint64_t offset = 0; copied < kBudget; offset += chunk.size()) {
    bool any = false;
    for (std::size_t i = first; i < weights_.size() && copied < kBudget; ++i) {
      const Tensor& w = weights_[i];
      if (offset >= w.bytes) continue;
      const std::uint64_t n = std::min<std::uint64_t>(w.bytes - offset, chunk.size());
      VLLM_LIKE_CHECK(cudaMemcpy(static_cast<char*>(w.ptr) + offset, chunk.data(), n, cudaMemcpyHostToDevice));
      copied += n;
      any = true;
    }
    if (!any) break;
  }
}

void Engine::load_weights() {
  begin_phase("loading");
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t before = alloc_->memory_allocated();
  // SGLang logs the memory free before and after its weights ("Load weight begin/end. avail mem"),
  // each a query of its own (and one more before the first: its memory checks around load_model).
  if (o_.kind == EngineKind::sglang) {
    query_free();
    query_free();
  }
  for (const TensorSpec& t : s_.global_tensors)
    for (std::size_t i = 0; i < t.count; ++i) weights_.push_back(allocate(t.bytes));
  for (std::size_t layer = 0; layer < s_.num_layers; ++layer)
    for (const TensorSpec& t : s_.per_layer_tensors)
      for (std::size_t i = 0; i < t.count; ++i) weights_.push_back(allocate(t.bytes));
  copy_checkpoint(0);
  // The EAGLE draft worker loads its model after the target's (managers/scheduler.py:862-865), logging the
  // memory before and after as the target does: one decoder layer.
  if (o_.speculative) {
    query_free();
    const std::size_t first = weights_.size();
    for (const TensorSpec& t : s_.per_layer_tensors)
      for (std::size_t i = 0; i < t.count; ++i) weights_.push_back(allocate(t.bytes));
    copy_checkpoint(first);
    query_free();
  }
  weights_bytes_ = alloc_->memory_allocated() - before;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("vllm_like: phase loading: Model loading took %s GiB and %.3f seconds (%zu tensors, %llu cudaMalloc)\n",
              gib(static_cast<double>(weights_bytes_)).c_str(), secs, weights_.size(),
              static_cast<unsigned long long>(alloc_->cuda_malloc_calls()));
}

// The activations of one forward at the maximum batch: all live at the peak, then freed (cached).
// With `kv_write`, each layer also writes its KV tensor's region, as attention does in serving.
void Engine::eager_forward(std::optional<KvWrite> kv_write, std::uint64_t peak) {
  if (peak == 0) peak = s_.activation_peak;
  // Activations of different shapes (hidden states, attention scores, MLP intermediates), sized
  // 1:2:...:n so they add up to the scenario's peak: a forward pass does not allocate a run of
  // identical large tensors, which is what a KV cache looks like.
  std::vector<Tensor> live;
  const std::size_t n = s_.activation_tensors;
  const std::uint64_t unit = peak / (n * (n + 1) / 2);
  std::uint64_t allocated = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t bytes = i + 1 == n ? peak - allocated : unit * (i + 1);
    allocated += bytes;
    live.push_back(allocate(bytes));
    kernels_->fill(live.back().ptr, bytes, kActivationSeed + static_cast<std::uint32_t>(i));
  }
  // A forward pass launches several kernels per layer (norms, attention, MLP); phase inference
  // recognises profiling by that launch count, as it would on a real engine.
  for (std::size_t layer = 0; layer < s_.num_layers; ++layer) {
    for (std::uint32_t k = 0; k < 4; ++k) {
      const Tensor& t = live[(layer * 4 + k) % live.size()];
      kernels_->fill(t.ptr, t.bytes, kActivationSeed + k);
    }
    // The layer's KV tensors (its K and V where they are apart, a linear-attention layer's state).
    if (kv_write)
      for (std::size_t t : layer_tensors_.at(layer)) write_kv_region(kv_[t], kv_write->region, kv_write->seed);
  }
  for (const Tensor& t : live) alloc_->deallocate(t.ptr);
}

void Engine::profile() {
  begin_phase("profiling");
  if (o_.kv_cache_memory) {
    // vLLM with kv_cache_memory_bytes runs the profiling forward only (it compiles the model) and takes
    // the given size as is: no snapshot, no memory query, no empty_cache (gpu_worker.py:489-510), and no
    // check against the requested share.
    grow_non_torch();
    eager_forward();
    kv_bytes_ = *o_.kv_cache_memory;
    std::printf(
        "vllm_like: phase profiling: KV cache size given (--kv-cache-memory %s GiB), memory profiling skipped\n",
        gib(static_cast<double>(kv_bytes_)).c_str());
    return;
  }
  // vLLM's worker clears the cache, resets the peak statistics and snapshots free memory before
  // the profiling forward pass; the snapshot after it is the one the KV cache is sized from.
  alloc_->empty_cache();
  alloc_->reset_peak_memory_stats();
  query_free();
  const std::uint64_t before = alloc_->memory_allocated();
  grow_non_torch();
  eager_forward();
  const std::uint64_t torch_peak_increase = alloc_->max_memory_allocated() - before;
  // memory_profiling's exit: the "after profile" snapshot the KV cache is sized from. The graph-memory
  // estimate comes after it (gpu_worker.py:515-528), with its own queries.
  alloc_->empty_cache();
  const std::uint64_t free = query_free();
  const std::uint64_t non_torch = total_ - free - alloc_->memory_reserved();
  const std::uint64_t non_torch_increase = non_torch > baseline_non_torch_ ? non_torch - baseline_non_torch_ : 0;
  const std::uint64_t graph_estimate = s_.estimate_graph_memory ? estimate_graph_memory() : 0;
  const std::uint64_t non_kv = weights_bytes_ + torch_peak_increase + non_torch_increase + graph_estimate;
  std::printf(
      "vllm_like: phase profiling: weights %s GiB, torch peak memory increase %s GiB, non-torch forward "
      "increase memory %s GiB, estimated CUDA graph memory %s GiB, free after profiling %s GiB\n",
      gib(static_cast<double>(weights_bytes_)).c_str(), gib(static_cast<double>(torch_peak_increase)).c_str(),
      gib(static_cast<double>(non_torch_increase)).c_str(), gib(static_cast<double>(graph_estimate)).c_str(),
      gib(static_cast<double>(free)).c_str());
  if (non_kv >= requested_)
    throw EngineExit(kExitNoKvMemory,
                     "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                     "when initializing the engine. (requested " +
                         gib(static_cast<double>(requested_)) + " GiB, non-KV " + gib(static_cast<double>(non_kv)) +
                         " GiB)");
  kv_bytes_ = requested_ - non_kv;
}

// Newer vLLM's estimate: capture a few sizes into a throw-away pool and extrapolate what they took
// to all sizes: the first (largest) capture as the pool's base, the others' mean as the increment
// per further size. Measured by free memory, so graph execs count too; an estimate, off both ways.
// As vLLM V1's profile_cudagraph_memory (v1/worker/gpu_model_runner.py:6780-6935): a minimal KV cache
// of min(max_num_reqs, largest capture size) blocks per layer first (_init_minimal_kv_cache_for_profiling,
// :6633-6660), freed with empty_cache once the probes are gone (_cleanup_profiling_kv_cache, :6709-6739).
std::uint64_t Engine::estimate_graph_memory() {
  const std::size_t count = s_.capture_sizes.size();
  const std::size_t n = s_.estimate_graph_sizes < count ? s_.estimate_graph_sizes : count;
  std::vector<std::size_t> sizes = s_.capture_sizes;
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  std::vector<Tensor> minimal_kv;
  if (s_.graph_profiling_kv_per_layer > 0)
    for (std::size_t layer = 0; layer < s_.num_layers; ++layer) {
      minimal_kv.push_back(allocate(s_.graph_profiling_kv_per_layer));
      kernels_->torch_zeros(minimal_kv.back().ptr, s_.graph_profiling_kv_per_layer);
    }
  const CachingAllocator::PoolId pool = alloc_->create_graph_pool();
  VLLM_LIKE_CHECK(cudaDeviceSynchronize());
  alloc_->empty_cache();
  enter_graph_capture();
  std::vector<CapturedGraph> probes;
  std::uint64_t first = 0, rest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t before = query_free();
    // Spread over the list, largest first, as the real capture order is.
    probes.push_back(capture_one(sizes[(count - 1) * i / (n > 1 ? n - 1 : 1)], pool, false));
    const std::uint64_t after = query_free();
    (i == 0 ? first : rest) += before > after ? before - after : 0;
  }
  leave_graph_capture();
  for (CapturedGraph& g : probes) {
    VLLM_LIKE_CHECK(cudaGraphExecDestroy(g.exec));
    VLLM_LIKE_CHECK(cudaGraphDestroy(g.graph));
    alloc_->deallocate(g.output);
  }
  alloc_->release_graph_pool(pool);
  VLLM_LIKE_CHECK(cudaDeviceSynchronize());
  for (const Tensor& t : minimal_kv) alloc_->deallocate(t.ptr);
  alloc_->empty_cache();
  return n > 1 ? first + rest / (n - 1) * (count - 1) : first * count;
}

void Engine::size_kv_sglang() {
  begin_phase("profiling");
  // SGLang: no profiling run; whatever is free after the weights, minus the static reserve. It
  // logs the memory left when loading ends ("Load weight end ... avail mem"), then queries again to
  // size the pool (profile_max_num_token).
  query_free();
  const std::uint64_t free = query_free();
  const std::uint64_t reserve = total_ - requested_;
  std::printf("vllm_like: phase profiling: skipped (sglang): free after weights %s GiB, static reserve %s GiB\n",
              gib(static_cast<double>(free)).c_str(), gib(static_cast<double>(reserve)).c_str());
  if (free <= reserve)
    throw EngineExit(kExitNoKvMemory, "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.");
  kv_bytes_ = free - reserve;
}

void Engine::allocate_kv() {
  begin_phase("kv-cache");
  const std::size_t layers = s_.num_layers;
  // Hybrid models (SGLang, --mamba-layers): the linear-attention layers keep a state pool, the rest a KV
  // cache. SGLang gives the state pool mamba_full_memory_ratio / (1 + ratio) of the budget (0.9 by
  // default: server_args.py:1896-1899, model_runner_kv_cache_mixin.py:186-200).
  const std::size_t mamba = o_.mamba_layers;
  const std::size_t attention = layers - mamba;
  const std::uint64_t state_budget = mamba > 0 ? kv_bytes_ * 9 / 19 : 0;
  // K and V of a layer are separate tensors in SGLang's MHA pool: each a whole number of granules.
  const std::uint64_t round = o_.kv_layout == KvLayout::one_allocation ? kKvPageBytes
                              : o_.kv_layout == KvLayout::k_then_v     ? 2 * kKvRound
                                                                       : kKvRound;
  // An EAGLE draft model's pool (--speculative-algorithm) holds one layer of half the target's KV heads
  // for the same tokens: half a layer more in the budget.
  const std::uint64_t halves = 2 * attention + (o_.speculative ? 1 : 0);
  const std::uint64_t per_layer = (kv_bytes_ - state_budget) * 2 / halves / round * round;
  if (per_layer == 0) throw EngineExit(kExitNoKvMemory, "ValueError: No available memory for the cache blocks.");
  std::printf("vllm_like: phase kv-cache: Available KV cache memory: %s GiB\n",
              gib(static_cast<double>(kv_bytes_)).c_str());
  // SGLang's ReqToTokenPool comes first (model_runner_kv_cache_mixin.py _init_pools, memory_pool.py:247-268 at
  // 1f5eeb6): torch.zeros of int32, (max_running_requests + 1) rows of context length + 4 slots (the decode
  // over-allocation, mem_cache/common.py:252-259). It is paid from SGLang's reserve, not the KV budget.
  if (o_.kind == EngineKind::sglang) {
    const std::uint64_t bytes = (o_.max_running_requests + 1) * (o_.context_length + 4) * sizeof(std::int32_t);
    req_to_token_ = allocate(bytes);
    kernels_->torch_zeros(req_to_token_.ptr, bytes);
  }
  layer_tensors_.assign(layers, {});
  // torch.zeros: an empty tensor, then PyTorch's fill kernel on the current stream (torch_fill.h).
  const auto zeros = [&](std::uint64_t bytes) {
    kv_.push_back(allocate(bytes));
    kernels_->torch_zeros(kv_.back().ptr, bytes);
    return kv_.size() - 1;
  };
  // Model layer of attention layer i: spread over the model (Qwen3-Next: every fourth layer).
  const auto attention_layer = [&](std::size_t i) { return (i + 1) * layers / attention - 1; };
  if (mamba > 0) {
    // HybridReqToTokenPool's MambaPool (memory_pool.py:354-452): one conv-state tensor and one temporal-state
    // tensor, each for every linear-attention layer, before the full-attention KV pool. The first
    // linear-attention layer's forward writes both.
    std::vector<bool> is_attention(layers, false);
    for (std::size_t i = 0; i < attention; ++i) is_attention[attention_layer(i)] = true;
    const std::size_t first_mamba =
        static_cast<std::size_t>(std::find(is_attention.begin(), is_attention.end(), false) - is_attention.begin());
    const std::uint64_t conv = state_budget / 10 / kKvRound * kKvRound;
    layer_tensors_[first_mamba].push_back(zeros(conv));
    layer_tensors_[first_mamba].push_back(zeros((state_budget - conv) / kKvRound * kKvRound));
  }
  if (o_.kv_layout == KvLayout::one_allocation) {
    const Tensor whole = allocate(per_layer * attention);
    kernels_->torch_zeros(whole.ptr, whole.bytes);
    for (std::size_t i = 0; i < attention; ++i) {
      kv_.push_back(Tensor{static_cast<char*>(whole.ptr) + i * per_layer, per_layer});
      layer_tensors_[attention_layer(i)].push_back(kv_.size() - 1);
    }
  } else if (o_.kv_layout == KvLayout::k_then_v) {
    for (int buffers = 0; buffers < 2; ++buffers)  // every layer's K buffer, then every layer's V buffer
      for (std::size_t i = 0; i < attention; ++i) layer_tensors_[attention_layer(i)].push_back(zeros(per_layer / 2));
  } else {
    for (std::size_t i = 0; i < attention; ++i) layer_tensors_[attention_layer(i)].push_back(zeros(per_layer));
  }
  // The draft worker's pool right after the target's (managers/scheduler.py:839-848): its K and V, each a
  // quarter of a target layer; the draft model runs after the target's last layer.
  if (o_.speculative)
    for (int buffers = 0; buffers < 2; ++buffers) layer_tensors_.back().push_back(zeros(per_layer / 4));
  kv_bytes_ = 0;
  for (const Tensor& t : kv_) kv_bytes_ += t.bytes;
  for (const TensorSpec& t : s_.persistent_buffers)
    for (std::size_t i = 0; i < t.count; ++i) {
      persistent_.push_back(allocate(t.bytes));
      VLLM_LIKE_CHECK(cudaMemsetAsync(persistent_.back().ptr, 0, t.bytes, main_stream_));
    }
  kv_expected_.fill(0u);  // checked at the first serving step: an engine reads no KV before it
  if (!o_.kv_connector.empty()) {
    // vLLM registers the KV cache with its connector right after allocating it
    // (v1/worker/gpu_model_runner.py:7807-7812, register_kv_caches); LMCache's multi-process adapter
    // wraps every KV tensor in a legacy CUDA IPC handle (lmcache_integration/multi_process_adapter.py:25).
    for (const Tensor& t : kv_) {
      cudaIpcMemHandle_t handle{};
      VLLM_LIKE_CHECK(cudaIpcGetMemHandle(&handle, t.ptr));
    }
    std::printf("vllm_like: phase kv-cache: registered %zu KV tensors with the KV connector (CUDA IPC)\n", kv_.size());
  }
  std::printf("vllm_like: phase kv-cache: %zu KV tensors of %s + %zu persistent buffers, free %s GiB\n", kv_.size(),
              format_size(o_.kv_layout == KvLayout::k_then_v ? per_layer / 2 : per_layer).c_str(), persistent_.size(),
              gib(static_cast<double>(query_free())).c_str());
}

}  // namespace vllm_like
