// The serving overflow's gate: host memory only for an allocator's retry of a refused request.
#include "policy/overflow_gate.h"

#include <gtest/gtest.h>

#include <cstdint>

using namespace kvremap::policy;

namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

DeviceAllocationCounts counts(std::uint64_t allocations, std::uint64_t frees, std::uint64_t freed_bytes) {
  return {allocations, frees, freed_bytes};
}

}  // namespace

// PyTorch's malloc (c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator::malloc): alloc_block is refused,
// release_cached_blocks frees the cached segments, alloc_block asks the same size again. The first ask gets
// the error, the retry after the frees gets host memory, with the frees reported.
TEST(OverflowGate, TheFirstRefusalGetsTheErrorAndTheRetryAfterTheFreesGetsHostMemory) {
  OverflowGate gate;
  EXPECT_FALSE(gate.on_refusal(512 * kMiB, counts(100, 40, 4000 * kMiB)).overflow);
  const OverflowDecision retry = gate.on_refusal(512 * kMiB, counts(100, 43, 4096 * kMiB));
  EXPECT_TRUE(retry.overflow);
  EXPECT_EQ(retry.frees_since_refusal, 3u);
  EXPECT_EQ(retry.freed_bytes_since_refusal, 96 * kMiB);
}

// An allocator with nothing cached to free (every cached block split, or none) asks again at once: the
// retry after release_cached_blocks freed nothing is still its last one (release_available_cached_blocks
// returns true only where it freed a block), so it gets host memory.
TEST(OverflowGate, ARetryWithNothingFreedBetweenIsStillTheRetry) {
  OverflowGate gate;
  EXPECT_FALSE(gate.on_refusal(64 * kMiB, counts(7, 2, kMiB)).overflow);
  const OverflowDecision retry = gate.on_refusal(64 * kMiB, counts(7, 2, kMiB));
  EXPECT_TRUE(retry.overflow);
  EXPECT_EQ(retry.frees_since_refusal, 0u);
  EXPECT_EQ(retry.freed_bytes_since_refusal, 0u);
}

// A refusal that names another size is another request: its first refusal, answered with the error.
TEST(OverflowGate, ARefusalOfAnotherSizeIsAFirstRefusal) {
  OverflowGate gate;
  EXPECT_FALSE(gate.on_refusal(64 * kMiB, counts(7, 2, kMiB)).overflow);
  EXPECT_FALSE(gate.on_refusal(128 * kMiB, counts(7, 2, kMiB)).overflow);
  EXPECT_TRUE(gate.on_refusal(128 * kMiB, counts(7, 3, 3 * kMiB)).overflow) << "the retry of the second request";
}

// Where an allocation succeeded after the refusal (the retry fitted once the cache was freed, or another
// request ran), a later refusal of the same size is a new request's first ask: never host memory for it.
TEST(OverflowGate, AnAllocationBetweenMakesTheNextRefusalAFirstOne) {
  OverflowGate gate;
  EXPECT_FALSE(gate.on_refusal(64 * kMiB, counts(7, 2, kMiB)).overflow);
  EXPECT_FALSE(gate.on_refusal(64 * kMiB, counts(8, 5, 9 * kMiB)).overflow);
  EXPECT_TRUE(gate.on_refusal(64 * kMiB, counts(8, 6, 11 * kMiB)).overflow);
}

// An overflow answers its request: the allocator's next refusal, of any size, is a first ask again.
TEST(OverflowGate, AnOverflowEndsTheRecord) {
  OverflowGate gate;
  EXPECT_FALSE(gate.on_refusal(64 * kMiB, counts(7, 2, kMiB)).overflow);
  EXPECT_TRUE(gate.on_refusal(64 * kMiB, counts(7, 2, kMiB)).overflow);
  EXPECT_FALSE(gate.on_refusal(64 * kMiB, counts(7, 2, kMiB)).overflow);
  EXPECT_TRUE(gate.on_refusal(64 * kMiB, counts(7, 2, kMiB)).overflow);
}
