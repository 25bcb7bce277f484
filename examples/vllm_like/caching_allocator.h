// A small caching device allocator with the PyTorch rules that decide how much memory vLLM sees.
//
// What is modelled (PyTorch's documented behaviour): requests <= 1 MiB are rounded to 512 bytes and
// packed into shared 2 MiB segments; larger ones are rounded to 2 MiB and get their own cudaMalloc
// segment; freed blocks stay cached (split on best fit, merged with free neighbours) until
// empty_cache; a cudaMalloc the device refuses is retried as PyTorch's malloc retries it (frees the
// cached segments unless a capture is under way, asks again, then raises torch.OutOfMemoryError); while a graph pool is active, blocks come from and return to that
// private pool only; peak statistics feed vLLM's profiling formula.
// Not modelled: PyTorch's 20 MiB segments for 1-10 MiB requests, per-stream pools, expandable
// segments, max_split_size.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <unordered_map>
#include <vector>

namespace vllm_like {

class CachingAllocator {
 public:
  using PoolId = std::size_t;

  // Allocations are stream-ordered on `stream`; its capture status decides the capture-mode switch.
  explicit CachingAllocator(cudaStream_t stream);
  // The engine's current stream changed; the caller has synchronised the previous one.
  void set_stream(cudaStream_t stream) { stream_ = stream; }
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  ~CachingAllocator();

  // Throws EngineExit(kExitOutOfMemory) with PyTorch's OOM text.
  void* allocate(std::size_t bytes);
  void deallocate(void* ptr);
  // cudaFree of every cached segment of the general pool that has no live block.
  void empty_cache();

  // Graph-private pools, as torch.cuda.graph(pool=...) uses; one may be active at a time.
  PoolId create_graph_pool();
  void begin_allocate_to_pool(PoolId pool);
  void end_allocate_to_pool();
  // Returns a graph pool's segments to the device; every block in it must be free.
  void release_graph_pool(PoolId pool);
  std::uint64_t pool_reserved(PoolId pool) const;

  void reset_peak_memory_stats() { peak_allocated_ = allocated_; }
  std::uint64_t memory_allocated() const { return allocated_; }
  std::uint64_t max_memory_allocated() const { return peak_allocated_; }
  std::uint64_t memory_reserved() const { return reserved_; }
  std::uint64_t cuda_malloc_calls() const { return cuda_malloc_calls_; }

 private:
  struct Pool;
  struct Segment;
  struct Block;
  struct BySize {
    bool operator()(const Block* a, const Block* b) const;
  };

  Pool& active_pool();
  Block* find_free_block(Pool& pool, bool small, std::size_t size);
  Block* new_segment(Pool& pool, bool small, std::size_t size, std::size_t requested);
  cudaError_t malloc_maybe_capturing(void** ptr, std::size_t bytes);
  cudaError_t free_maybe_capturing(void* ptr);
  void release_free_segments(Pool& pool);
  bool release_available_cached_blocks();
  void release_cached_blocks();
  [[noreturn]] void out_of_memory(std::size_t requested);

  cudaStream_t stream_;
  std::unique_ptr<Pool> general_;
  std::vector<std::unique_ptr<Pool>> graph_pools_;
  Pool* capture_pool_ = nullptr;
  std::unordered_map<void*, Block*> live_;
  std::uint64_t allocated_ = 0;
  std::uint64_t peak_allocated_ = 0;
  std::uint64_t reserved_ = 0;
  std::uint64_t cuda_malloc_calls_ = 0;
};

}  // namespace vllm_like
