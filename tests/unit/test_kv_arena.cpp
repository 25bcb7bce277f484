// The KV arena's mechanics on the simulated driver: backing, deferral to aliased scratch, commit, rollback.
#include "interpose/kv_arena.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "simcuda_fixture.h"

using kvremap::interpose::ArenaConfig;
using kvremap::interpose::ArenaDriver;
using kvremap::interpose::Backing;
using kvremap::interpose::KvArena;

namespace {

ArenaDriver simulated_driver() {
  ArenaDriver d{};
  d.address_reserve = cuMemAddressReserve;
  d.address_free = cuMemAddressFree;
  d.create = cuMemCreate;
  d.release = cuMemRelease;
  d.map = cuMemMap;
  d.unmap = cuMemUnmap;
  d.set_access = cuMemSetAccess;
  d.memset_d8 = cuMemsetD8_v2;
  return d;
}

constexpr std::uint64_t kChunk = 8 * kMiB;
constexpr std::uint64_t kScratch = 2 * kMiB;

class ArenaTest : public SimDriver {
 protected:
  std::unique_ptr<KvArena> Make(std::uint64_t reserve = 256 * kMiB) {
    CUresult error = CUDA_SUCCESS;
    auto arena = KvArena::create(simulated_driver(), ArenaConfig{0, reserve, kChunk, kScratch, 2 * kMiB}, &error);
    EXPECT_EQ(error, CUDA_SUCCESS);
    return arena;
  }
  static std::uint32_t* Words(CUdeviceptr p) { return reinterpret_cast<std::uint32_t*>(p); }
};

}  // namespace

TEST_F(ArenaTest, RegionsAreChunksPlusAGranuleRoundedTailOfReadWriteDeviceMemory) {
  auto arena = Make();
  EXPECT_EQ(Used(), 0u) << "no scratch until something is deferred";
  CUdeviceptr a = 0;
  ASSERT_CU(arena->allocate(10 * kMiB - 100, &a));
  EXPECT_EQ(arena->region_bytes(a), 10 * kMiB) << "one 8 MiB chunk and a 2 MiB tail, not two chunks";
  EXPECT_EQ(Used(), 10 * kMiB);
  EXPECT_EQ(arena->backing(a), Backing::chunks);
  EXPECT_TRUE(arena->contains(a + 9 * kMiB));
  Words(a)[0] = 1;
  Words(a + 10 * kMiB - 4)[0] = 2;
  EXPECT_EQ(Words(a)[0], 1u);
  CUipcMemHandle ipc{};
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuIpcGetMemHandle(&ipc, a)) << "arena memory is VMM memory";
}

TEST_F(ArenaTest, DeferKeepsEveryAddressValidOnOneScratchAndFreesTheChunks) {
  auto arena = Make();
  CUdeviceptr a = 0;
  ASSERT_CU(arena->allocate(32 * kMiB, &a));
  ASSERT_CU(arena->defer(a));
  EXPECT_EQ(arena->backing(a), Backing::scratch);
  EXPECT_EQ(Used(), kScratch + 2 * kMiB) << "the scratch and the one-granule scratch for tails; the KV region's device memory went back to the engine";
  // Aliasing: offsets that are equal modulo the scratch size share bytes.
  Words(a + 3)[0] = 0;
  Words(a + 4)[0] = 0xabcd;
  EXPECT_EQ(Words(a + 4 + 5 * kScratch)[0], 0xabcdu);
  EXPECT_EQ(CUDA_ERROR_ILLEGAL_STATE, arena->defer(a)) << "already deferred";
}

TEST_F(ArenaTest, CommitBacksTheSameAddressesWithZeroedMemory) {
  auto arena = Make();
  CUdeviceptr a = 0;
  ASSERT_CU(arena->allocate(16 * kMiB, &a));
  ASSERT_CU(arena->defer(a));
  Words(a)[7] = 77;  // lands in the scratch
  ASSERT_CU(arena->commit(a, 16 * kMiB));
  EXPECT_EQ(arena->backing(a), Backing::chunks);
  EXPECT_EQ(Used(), kScratch + 2 * kMiB + 16 * kMiB);
  EXPECT_EQ(Words(a)[7], 0u) << "nothing written before the commit survives";
  Words(a)[7] = 5;
  Words(a + kChunk)[7] = 6;
  EXPECT_EQ(Words(a)[7], 5u) << "chunks are no longer aliases";
  EXPECT_EQ(CUDA_ERROR_ILLEGAL_STATE, arena->commit(a, 16 * kMiB)) << "not deferred";
}

TEST_F(ArenaTest, CommitCanPutTheTailOnHostMemory) {
  auto arena = Make();
  CUdeviceptr a = 0;
  ASSERT_CU(arena->allocate(3 * kChunk, &a));
  ASSERT_CU(arena->defer(a));
  std::uint64_t on_device = 0;
  ASSERT_CU(arena->commit(a, kChunk + kChunk / 2, &on_device));
  EXPECT_EQ(on_device, kChunk) << "whole chunks only";
  EXPECT_EQ(arena->host_chunks(), 2u);
  EXPECT_EQ(Used(), kScratch + 2 * kMiB + kChunk);
  EXPECT_EQ(simcuda_host_used_bytes(), 2 * kChunk);
  Words(a + 2 * kChunk)[1] = 9;  // host-backed bytes are device-accessible
  EXPECT_EQ(Words(a + 2 * kChunk)[1], 9u);
}

TEST_F(ArenaTest, AGraphCapturedBeforeDeferralWritesIntoTheCommittedBacking) {
  auto arena = Make();
  CUdeviceptr a = 0;
  ASSERT_CU(arena->allocate(kChunk, &a));
  CUstream s = nullptr;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU(cuMemsetD8Async(a + kMiB, 0x3c, 4096, s));
  CUgraph graph = nullptr;
  ASSERT_CU(cuStreamEndCapture(s, &graph));
  CUgraphExec exec = nullptr;
  ASSERT_CU(cuGraphInstantiate(&exec, graph, 0));
  ASSERT_CU(arena->defer(a));
  ASSERT_CU(arena->commit(a, kChunk));
  ASSERT_CU(cuGraphLaunch(exec, s));
  EXPECT_EQ(Words(a + kMiB)[0], 0x3c3c3c3cu);
  EXPECT_EQ(Words(a)[0], 0u);
  ASSERT_CU(cuGraphExecDestroy(exec));
  ASSERT_CU(cuGraphDestroy(graph));
}

TEST_F(ArenaTest, ReleasedVaIsReusedAndDestructionReturnsEverything) {
  {
    auto arena = Make(64 * kMiB);
    CUdeviceptr a = 0, b = 0, c = 0;
    ASSERT_CU(arena->allocate(2 * kChunk, &a));
    ASSERT_CU(arena->allocate(2 * kChunk, &b));
    ASSERT_CU(arena->release(a));
    ASSERT_CU(arena->allocate(kChunk, &c));
    EXPECT_EQ(c, a) << "first fit reuses the hole";
    ASSERT_CU(arena->defer(b));
    CUdeviceptr too_big = 0;
    EXPECT_EQ(CUDA_ERROR_OUT_OF_MEMORY, arena->allocate(8 * kChunk, &too_big)) << "the reservation is full";
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, arena->release(a + kMiB));
  }
  EXPECT_EQ(Used(), 0u);
  EXPECT_EQ(simcuda_host_used_bytes(), 0u);
}

TEST_F(ArenaTest, DeviceExhaustionOnAllocateLeavesNothingBehind) {
  Restart("SIMCUDA_DEVICE_MEMORY=64MiB");
  auto arena = Make();
  CUdeviceptr a = 0;
  EXPECT_EQ(CUDA_ERROR_OUT_OF_MEMORY, arena->allocate(80 * kMiB, &a));
  EXPECT_EQ(Used(), 0u);
  EXPECT_CU(arena->allocate(48 * kMiB, &a)) << "what fits still works";
}

// Every driver call of the deferral and the commit, failed in turn: each outcome is either done or
// exactly the state before, the region is always mapped and usable, and nothing leaks.
TEST_F(ArenaTest, AFailureAtAnyDriverCallOfDeferOrCommitIsRolledBack) {
  const char* functions[] = {"cuMemCreate",    "cuMemMap",      "cuMemUnmap",
                             "cuMemSetAccess", "cuMemsetD8_v2", "cuMemRelease"};
  for (const char* fn : functions) {
    for (int phase = 0; phase < 2; ++phase) {  // 0: fail inside defer, 1: inside commit
      // A clean run counts fn's calls before and inside the operation under test.
      Restart("");
      std::unique_ptr<KvArena> arena = Make();
      CUdeviceptr a = 0;
      ASSERT_CU(arena->allocate(3 * kChunk, &a));
      if (phase == 1) {
        ASSERT_CU(arena->defer(a));
      }
      const unsigned long long before = simcuda_call_count(fn);
      ASSERT_CU(phase == 0 ? arena->defer(a) : arena->commit(a, 2 * kChunk));
      const unsigned long long inside = simcuda_call_count(fn) - before;
      arena.reset();
      for (unsigned long long nth = 1; nth <= inside; ++nth) {
        SCOPED_TRACE(std::string(fn) + " call " + std::to_string(nth) + (phase ? " of commit" : " of defer"));
        Restart("SIMCUDA_FAIL=" + std::string(fn) + ":" + std::to_string(before + nth) + ":CUDA_ERROR_OUT_OF_MEMORY");
        arena = Make();
        ASSERT_CU(arena->allocate(3 * kChunk, &a));
        if (phase == 1) {
          ASSERT_CU(arena->defer(a));
        }
        const Backing start = arena->backing(a);
        const CUresult r = phase == 0 ? arena->defer(a) : arena->commit(a, 2 * kChunk);
        const Backing after = arena->backing(a);
        if (r == CUDA_SUCCESS) {
          EXPECT_EQ(after, phase == 0 ? Backing::scratch : Backing::chunks);
        } else {
          EXPECT_EQ(after, start) << "a failed operation leaves the region as it was";
        }
        ASSERT_NE(after, Backing::none);
        Words(a + 3 * kChunk - 4)[0] = 1;  // mapped and writable whatever happened
        EXPECT_EQ(Words(a + 3 * kChunk - 4)[0], 1u);
        arena.reset();
        EXPECT_EQ(Used(), 0u) << "no handle leaked";
        EXPECT_EQ(simcuda_host_used_bytes(), 0u);
      }
    }
  }
}
