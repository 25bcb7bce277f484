// Implementation of the caching allocator: segments, split/merge of blocks, capture-safe cudaMalloc.
#include "caching_allocator.h"

#include <cstdio>
#include <iterator>
#include <string>

#include "cuda_check.h"

namespace vllm_like {

namespace {

constexpr std::size_t kSmallLimit = 1u << 20;  // requests up to here share 2 MiB segments
constexpr std::size_t kSmallSegment = 2u << 20;
constexpr std::size_t kSmallRound = 512;
constexpr std::size_t kLargeRound = 2u << 20;

std::size_t round_up(std::size_t value, std::size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

}  // namespace

struct CachingAllocator::Segment {
  char* base = nullptr;
  std::size_t size = 0;
  bool small = false;
};

struct CachingAllocator::Block {
  char* ptr = nullptr;
  std::size_t size = 0;
  bool allocated = false;
  Segment* segment = nullptr;
  Pool* pool = nullptr;
  Block* prev = nullptr;  // neighbours inside the same segment, for merging
  Block* next = nullptr;
};

bool CachingAllocator::BySize::operator()(const Block* a, const Block* b) const {
  return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
}

struct CachingAllocator::Pool {
  std::set<Block*, BySize> free_small;
  std::set<Block*, BySize> free_large;
  std::vector<std::unique_ptr<Segment>> segments;
  std::uint64_t reserved = 0;
  std::set<Block*, BySize>& free_set(bool small) { return small ? free_small : free_large; }
};

CachingAllocator::CachingAllocator(cudaStream_t stream) : stream_(stream), general_(std::make_unique<Pool>()) {}

// The process exits right after serving, as an engine does; device memory goes with the context.
CachingAllocator::~CachingAllocator() {
  for (auto& [ptr, block] : live_) delete block;
  auto drop_free = [](Pool& pool) {
    for (Block* b : pool.free_small) delete b;
    for (Block* b : pool.free_large) delete b;
  };
  drop_free(*general_);
  for (auto& pool : graph_pools_) drop_free(*pool);
}

CachingAllocator::Pool& CachingAllocator::active_pool() {
  return capture_pool_ != nullptr ? *capture_pool_ : *general_;
}

// cudaMalloc is a "potentially unsafe" call: in a global-mode capture it would fail and invalidate
// the capture. PyTorch switches only this thread to relaxed mode around it (the memory is not part
// of the graph, so that is safe), and only while the stream is actually capturing.
cudaError_t CachingAllocator::malloc_maybe_capturing(void** ptr, std::size_t bytes) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(stream_, &status), "cudaStreamIsCapturing");
  ++cuda_malloc_calls_;
  if (status == cudaStreamCaptureStatusNone) return cudaMalloc(ptr, bytes);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  check(cudaThreadExchangeStreamCaptureMode(&mode), "cudaThreadExchangeStreamCaptureMode");
  const cudaError_t error = cudaMalloc(ptr, bytes);
  check(cudaThreadExchangeStreamCaptureMode(&mode), "cudaThreadExchangeStreamCaptureMode");
  return error;
}

cudaError_t CachingAllocator::free_maybe_capturing(void* ptr) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(stream_, &status), "cudaStreamIsCapturing");
  if (status == cudaStreamCaptureStatusNone) return cudaFree(ptr);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  check(cudaThreadExchangeStreamCaptureMode(&mode), "cudaThreadExchangeStreamCaptureMode");
  const cudaError_t error = cudaFree(ptr);
  check(cudaThreadExchangeStreamCaptureMode(&mode), "cudaThreadExchangeStreamCaptureMode");
  return error;
}

CachingAllocator::Block* CachingAllocator::find_free_block(Pool& pool, bool small, std::size_t size) {
  auto& free = pool.free_set(small);
  Block key;
  key.size = size;
  auto it = free.lower_bound(&key);  // smallest cached block that fits: best fit
  if (it == free.end()) return nullptr;
  Block* block = *it;
  free.erase(it);
  return block;
}

CachingAllocator::Block* CachingAllocator::new_segment(Pool& pool, bool small, std::size_t size,
                                                       std::size_t requested) {
  const std::size_t segment_size = small ? kSmallSegment : size;
  void* ptr = nullptr;
  // PyTorch's order on a refused cudaMalloc (c10/cuda/CUDACachingAllocator.cpp at pytorch/pytorch 001074d2,
  // DeviceCachingAllocator::malloc, the `block_found = alloc_block(...) || ...` chain): alloc_block; then release_available_cached_blocks and
  // alloc_block again where it freed something; then, unless a capture is under way, release_cached_blocks
  // (every unsplit cached block of the general pools) and alloc_block a last time; then OutOfMemoryError.
  cudaError_t error = malloc_maybe_capturing(&ptr, segment_size);
  if (error == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // alloc_block forgives a refusal: malloc decides what follows
    if (release_available_cached_blocks()) {
      error = malloc_maybe_capturing(&ptr, segment_size);
      if (error == cudaErrorMemoryAllocation) (void)cudaGetLastError();
    }
  }
  if (error == cudaErrorMemoryAllocation && capture_pool_ == nullptr) {
    release_cached_blocks();
    error = malloc_maybe_capturing(&ptr, segment_size);
  }
  if (error == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    out_of_memory(requested);
  }
  check(error, "cudaMalloc");
  auto segment = std::make_unique<Segment>();
  segment->base = static_cast<char*>(ptr);
  segment->size = segment_size;
  segment->small = small;
  auto* block = new Block;
  block->ptr = segment->base;
  block->size = segment_size;
  block->segment = segment.get();
  block->pool = &pool;
  pool.segments.push_back(std::move(segment));
  pool.reserved += segment_size;
  reserved_ += segment_size;
  return block;
}

void* CachingAllocator::allocate(std::size_t bytes) {
  const bool small = bytes <= kSmallLimit;
  const std::size_t size = small ? round_up(bytes == 0 ? 1 : bytes, kSmallRound) : round_up(bytes, kLargeRound);
  Pool& pool = active_pool();
  Block* block = find_free_block(pool, small, size);
  if (block == nullptr) block = new_segment(pool, small, size, size);
  // Split when the rest is still worth caching (PyTorch: >= 512 B small, > 1 MiB large).
  const std::size_t rest = block->size - size;
  if (small ? rest >= kSmallRound : rest > kSmallLimit) {
    auto* tail = new Block;
    tail->ptr = block->ptr + size;
    tail->size = rest;
    tail->segment = block->segment;
    tail->pool = block->pool;
    tail->prev = block;
    tail->next = block->next;
    if (block->next != nullptr) block->next->prev = tail;
    block->next = tail;
    block->size = size;
    pool.free_set(small).insert(tail);
  }
  block->allocated = true;
  live_.emplace(block->ptr, block);
  allocated_ += block->size;
  if (allocated_ > peak_allocated_) peak_allocated_ = allocated_;
  return block->ptr;
}

void CachingAllocator::deallocate(void* ptr) {
  if (ptr == nullptr) return;
  auto it = live_.find(ptr);
  if (it == live_.end()) throw EngineExit(kExitFailure, "caching allocator: free of an unknown pointer");
  Block* block = it->second;
  live_.erase(it);
  allocated_ -= block->size;
  block->allocated = false;
  Pool& pool = *block->pool;
  auto& free = pool.free_set(block->segment->small);
  // Merge with free neighbours so a whole segment becomes one block again, which empty_cache needs.
  if (Block* prev = block->prev; prev != nullptr && !prev->allocated) {
    free.erase(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (block->next != nullptr) block->next->prev = prev;
    delete block;
    block = prev;
  }
  if (Block* next = block->next; next != nullptr && !next->allocated) {
    free.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (next->next != nullptr) next->next->prev = block;
    delete next;
  }
  free.insert(block);
}

void CachingAllocator::release_free_segments(Pool& pool) {
  for (auto* free : {&pool.free_small, &pool.free_large}) {
    for (auto it = free->begin(); it != free->end();) {
      Block* block = *it;
      if (block->prev != nullptr || block->next != nullptr) {
        ++it;
        continue;
      }
      Segment* segment = block->segment;
      check(free_maybe_capturing(segment->base), "cudaFree");
      pool.reserved -= segment->size;
      reserved_ -= segment->size;
      for (auto s = pool.segments.begin(); s != pool.segments.end(); ++s) {
        if (s->get() == segment) {
          pool.segments.erase(s);
          break;
        }
      }
      delete block;
      it = free->erase(it);
    }
  }
}

// PyTorch's release_available_cached_blocks frees only blocks of at least max_split_size, and with max_split_size
// unset (its default, and the only setting this allocator models) it returns false at once, freeing nothing.
bool CachingAllocator::release_available_cached_blocks() { return false; }

// PyTorch's release_cached_blocks: synchronize_and_free_events (this allocator records no cross-stream events, so
// no block waits on one), then release_blocks of the general pools: every cached block that is a whole segment.
void CachingAllocator::release_cached_blocks() { release_free_segments(*general_); }

void CachingAllocator::empty_cache() {
  // torch synchronises before returning memory the device may still be using.
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  release_free_segments(*general_);
}

CachingAllocator::PoolId CachingAllocator::create_graph_pool() {
  graph_pools_.push_back(std::make_unique<Pool>());
  return graph_pools_.size() - 1;
}

void CachingAllocator::begin_allocate_to_pool(PoolId pool) {
  if (pool >= graph_pools_.size() || capture_pool_ != nullptr)
    throw EngineExit(kExitFailure, "caching allocator: bad or nested graph pool");
  capture_pool_ = graph_pools_[pool].get();
}

void CachingAllocator::end_allocate_to_pool() { capture_pool_ = nullptr; }

void CachingAllocator::release_graph_pool(PoolId pool) {
  Pool& p = *graph_pools_.at(pool);
  release_free_segments(p);
  if (!p.segments.empty()) throw EngineExit(kExitFailure, "caching allocator: graph pool released with live blocks");
}

std::uint64_t CachingAllocator::pool_reserved(PoolId pool) const { return graph_pools_.at(pool)->reserved; }

void CachingAllocator::out_of_memory(std::size_t requested) {
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) (void)cudaGetLastError();
  const std::uint64_t cached = reserved_ - allocated_;
  throw EngineExit(kExitOutOfMemory, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate " +
                                         format_size(requested) + ". GPU 0 has a total capacity of " +
                                         format_size(total) + " of which " + format_size(free) +
                                         " is free. Of the allocated memory " + format_size(allocated_) +
                                         " is allocated by PyTorch, and " + format_size(cached) +
                                         " is reserved by PyTorch but unallocated.");
}

}  // namespace vllm_like
