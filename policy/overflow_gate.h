// Which refused serving allocation may be given host memory: only an allocator's retry of a refusal, never its first ask.
#pragma once

#include <cstdint>
#include <optional>

namespace kvremap::policy {

// What the tracker has counted on one device since it started (cumulative, never reset): successful
// allocations of every kind, frees, and the bytes those frees gave back.
struct DeviceAllocationCounts {
  std::uint64_t allocations = 0;
  std::uint64_t frees = 0;
  std::uint64_t freed_bytes = 0;
};

// The answer to one refusal.
struct OverflowDecision {
  bool overflow = false;  // true: back it with host memory; false: hand the engine its out-of-memory error
  // For an overflow: what the allocator freed between the refusal and this retry of it.
  std::uint64_t frees_since_refusal = 0;
  std::uint64_t freed_bytes_since_refusal = 0;
};

// One device's gate, held under the KV manager's lock. The rule (docs/kv-deferral.md, Limits: an overflow only for the allocator's retry):
// the first refusal of a request is answered with the out-of-memory error and remembered (its size and the
// device's counts then). The next refusal on that device is the allocator's retry, and gets host memory,
// when it asks the same size and the device saw no successful allocation in between (frees in between are
// the allocator releasing its cache, and are reported). Anything else starts the record again: a refusal
// of another size, or one after an allocation succeeded (the retry fitted, or another request ran).
// PyTorch's caching allocator retries so (c10/cuda/CUDACachingAllocator.cpp at pytorch/pytorch 001074d2,
// DeviceCachingAllocator::malloc: alloc_block, then release_available_cached_blocks and alloc_block, then
// release_cached_blocks and alloc_block, then OutOfMemoryError); an allocator that never retries never gets
// host memory.
class OverflowGate {
 public:
  OverflowDecision on_refusal(std::uint64_t bytes, const DeviceAllocationCounts& now);

 private:
  struct Refusal {
    std::uint64_t bytes = 0;
    DeviceAllocationCounts counts;
  };
  std::optional<Refusal> last_;
};

}  // namespace kvremap::policy
