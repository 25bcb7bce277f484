// The KV arena's mechanics on the simulated driver: backing, deferral to aliased scratch, commit, rollback.
#include "interpose/kv/kv_arena.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "policy/commit_plan.h"
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

// The simulated driver, watched: which handles are host-located and what is mapped where, so a
// test can tell which VA ranges are backed by host memory.
struct Mapping {
  std::uint64_t bytes = 0;
  CUmemGenericAllocationHandle handle = 0;
};
std::map<CUmemGenericAllocationHandle, std::pair<bool, std::uint64_t>> g_handles;  // host?, bytes
std::map<CUdeviceptr, Mapping> g_mappings;                                         // by VA

CUresult spy_create(CUmemGenericAllocationHandle* h, size_t bytes, const CUmemAllocationProp* prop,
                    unsigned long long flags) {
  const CUresult r = cuMemCreate(h, bytes, prop, flags);
  if (r == CUDA_SUCCESS) g_handles[*h] = {prop->location.type == CU_MEM_LOCATION_TYPE_HOST, bytes};
  return r;
}
CUresult spy_map(CUdeviceptr va, size_t bytes, size_t offset, CUmemGenericAllocationHandle h,
                 unsigned long long flags) {
  const CUresult r = cuMemMap(va, bytes, offset, h, flags);
  if (r == CUDA_SUCCESS) g_mappings[va] = Mapping{bytes, h};
  return r;
}
CUresult spy_unmap(CUdeviceptr va, size_t bytes) {
  const CUresult r = cuMemUnmap(va, bytes);
  if (r == CUDA_SUCCESS) g_mappings.erase(g_mappings.lower_bound(va), g_mappings.lower_bound(va + bytes));
  return r;
}
ArenaDriver spying_driver() {
  g_handles.clear();
  g_mappings.clear();
  ArenaDriver d = simulated_driver();
  d.create = spy_create;
  d.map = spy_map;
  d.unmap = spy_unmap;
  return d;
}

// The host-backed ranges inside [va, va + bytes), merged, as offsets from va.
std::vector<std::pair<std::uint64_t, std::uint64_t>> host_ranges(CUdeviceptr va, std::uint64_t bytes) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  for (auto it = g_mappings.lower_bound(va); it != g_mappings.end() && it->first < va + bytes; ++it) {
    if (!g_handles.at(it->second.handle).first) continue;
    const std::uint64_t begin = it->first - va, end = begin + it->second.bytes;
    if (!out.empty() && out.back().second == begin) {
      out.back().second = end;
    } else {
      out.emplace_back(begin, end);
    }
  }
  return out;
}

constexpr std::uint64_t kChunk = 8 * kMiB;
constexpr std::uint64_t kScratch = 2 * kMiB;

class ArenaTest : public SimDriver {
 protected:
  std::unique_ptr<KvArena> Make(std::uint64_t reserve = 256 * kMiB, bool spy = false, bool one_handle = false) {
    CUresult error = CUDA_SUCCESS;
    auto arena = KvArena::create(spy ? spying_driver() : simulated_driver(),
                                 ArenaConfig{0, reserve, kChunk, kScratch, 2 * kMiB, one_handle}, &error);
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
  std::memset(reinterpret_cast<void*>(a + 3), 0, 4);
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

TEST_F(ArenaTest, TheScratchGoesBackOnceNoRegionIsOnIt) {
  auto arena = Make();
  CUdeviceptr a = 0, b = 0;
  ASSERT_CU(arena->allocate(16 * kMiB, &a));
  ASSERT_CU(arena->allocate(16 * kMiB, &b));
  ASSERT_CU(arena->defer(a));
  ASSERT_CU(arena->defer(b));
  ASSERT_CU(arena->commit(a, 16 * kMiB));
  EXPECT_FALSE(arena->release_scratch()) << "b still aliases it";
  EXPECT_EQ(Used(), kScratch + 2 * kMiB + 16 * kMiB);
  ASSERT_CU(arena->commit(b, 16 * kMiB));
  EXPECT_TRUE(arena->release_scratch());
  EXPECT_EQ(Used(), 32 * kMiB) << "only the KV cache itself";
  ASSERT_CU(arena->defer(a)) << "a later deferral makes a scratch again";
  EXPECT_EQ(Words(a)[0], 0u);
}

TEST_F(ArenaTest, CommitCanPutTheTailOnHostMemory) {
  auto arena = Make();
  CUdeviceptr a = 0;
  ASSERT_CU(arena->allocate(3 * kChunk, &a));
  ASSERT_CU(arena->defer(a));
  std::uint64_t on_device = 0;
  ASSERT_CU(arena->commit(a, kChunk + kChunk / 2 + kMiB, &on_device));
  EXPECT_EQ(on_device, kChunk + kChunk / 2) << "rounded down to the granularity";
  EXPECT_EQ(arena->host_chunks(), 2u) << "the split chunk's host half and the last chunk";
  EXPECT_EQ(arena->host_bytes(a), 3 * kChunk / 2);
  EXPECT_EQ(Used(), kScratch + 2 * kMiB + kChunk + kChunk / 2);
  EXPECT_EQ(simcuda_host_used_bytes(), 3 * kChunk / 2);
  Words(a + 2 * kChunk)[1] = 9;  // host-backed bytes are device-accessible
  EXPECT_EQ(Words(a + 2 * kChunk)[1], 9u);
}

TEST_F(ArenaTest, TheHostShareIsTheRegionsEndAndTheChunkAtTheBoundaryIsSplit) {
  auto arena = Make(256 * kMiB, /*spy=*/true);
  CUdeviceptr a = 0;
  ASSERT_CU(arena->allocate(3 * kChunk, &a));
  ASSERT_CU(arena->defer(a));
  Words(a + 20 * kMiB)[0] = 7;
  ASSERT_CU(arena->commit(a, 18 * kMiB));
  EXPECT_EQ(arena->backing(a), Backing::chunks);
  EXPECT_EQ(simcuda_host_used_bytes(), 6 * kMiB);
  EXPECT_EQ(Used(), kScratch + 2 * kMiB + 18 * kMiB);
  using Ranges = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  EXPECT_EQ(host_ranges(a, 3 * kChunk), (Ranges{{18 * kMiB, 24 * kMiB}})) << "exactly the last 6 MiB";
  // Device 8 + 8 + 2 MiB, host 6 MiB: the third chunk split at the boundary, every handle a granule multiple.
  std::vector<std::pair<bool, std::uint64_t>> handles;
  for (auto it = g_mappings.lower_bound(a); it != g_mappings.end() && it->first < a + 3 * kChunk; ++it)
    handles.push_back(g_handles.at(it->second.handle));
  EXPECT_EQ(handles, (std::vector<std::pair<bool, std::uint64_t>>{
                         {false, kChunk}, {false, kChunk}, {false, 2 * kMiB}, {true, 6 * kMiB}}));
  EXPECT_EQ(Words(a + 20 * kMiB)[0], 0u) << "the host part is zero-filled too";
  Words(a + 18 * kMiB - 4)[0] = 1;
  Words(a + 18 * kMiB)[0] = 2;
  EXPECT_EQ(Words(a + 18 * kMiB - 4)[0], 1u);
  EXPECT_EQ(Words(a + 18 * kMiB)[0], 2u);
  // Deferred and committed again, the region goes back to its plain chunk grid.
  ASSERT_CU(arena->defer(a));
  EXPECT_EQ(simcuda_host_used_bytes(), 0u);
  ASSERT_CU(arena->commit(a, 3 * kChunk));
  EXPECT_TRUE(host_ranges(a, 3 * kChunk).empty());
  EXPECT_EQ(arena->host_bytes(a), 0u);
}

// One handle per region: the whole region on one device handle, and after a commit with a host tail
// one device and one host handle, at the same addresses as the chunk grid would have used.
TEST_F(ArenaTest, OneHandlePerRegionOnRequest) {
  auto chunked = Make(256 * kMiB, /*spy=*/false);
  CUdeviceptr c = 0;
  ASSERT_CU(chunked->allocate(3 * kChunk, &c));
  EXPECT_EQ(chunked->handles(c), 3u);
  chunked.reset();
  auto arena = Make(256 * kMiB, /*spy=*/true, /*one_handle=*/true);
  CUdeviceptr a = 0;
  ASSERT_CU(arena->allocate(3 * kChunk - 100, &a));
  EXPECT_EQ(arena->handles(a), 1u);
  EXPECT_EQ(g_mappings.at(a).bytes, 3 * kChunk) << "one mapping of the whole region";
  ASSERT_CU(arena->defer(a));
  EXPECT_EQ(arena->handles(a), 0u) << "on scratch";
  Words(a + 20 * kMiB)[0] = 7;
  ASSERT_CU(arena->commit(a, 18 * kMiB));
  EXPECT_EQ(arena->handles(a), 2u);
  std::vector<std::pair<bool, std::uint64_t>> handles;
  for (auto it = g_mappings.lower_bound(a); it != g_mappings.end() && it->first < a + 3 * kChunk; ++it)
    handles.push_back(g_handles.at(it->second.handle));
  EXPECT_EQ(handles, (std::vector<std::pair<bool, std::uint64_t>>{{false, 18 * kMiB}, {true, 6 * kMiB}}));
  EXPECT_EQ(Words(a + 20 * kMiB)[0], 0u) << "zero-filled";
  ASSERT_CU(arena->defer(a));
  ASSERT_CU(arena->commit(a, 3 * kChunk));
  EXPECT_EQ(arena->handles(a), 1u);
  ASSERT_CU(arena->release(a));
}

// What kv_manager does with a deficit: the plan's split of every tensor, committed tensor by
// tensor. The host bytes are the deficit rounded up to the granularity per tensor, at each end.
TEST_F(ArenaTest, ADeficitLandsAtTheEndOfEveryTensor) {
  auto arena = Make(256 * kMiB, /*spy=*/true);
  std::vector<CUdeviceptr> tensors(4);
  for (CUdeviceptr& t : tensors) ASSERT_CU(arena->allocate(2 * kChunk + 4 * kMiB, &t));  // 20 MiB each
  for (CUdeviceptr t : tensors) ASSERT_CU(arena->defer(t));
  kvremap::policy::CommitInputs in;
  in.tensor_bytes.assign(4, 20 * kMiB);
  in.granularity = 2 * kMiB;
  in.chunk_bytes = kChunk;
  in.device_free_bytes = 80 * kMiB - 9 * kMiB;  // 9 MiB short: 2.25 MiB per tensor, 4 MiB rounded up
  in.device_total_bytes = 1024 * kMiB;
  in.host_vmm_supported = true;
  const kvremap::policy::CommitPlan plan = kvremap::policy::plan_commit(in);
  ASSERT_EQ(plan.verdict, kvremap::policy::CommitVerdict::host_tail);
  EXPECT_EQ(plan.host_bytes_per_tensor, 4 * kMiB);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    std::uint64_t on_device = 0;
    ASSERT_CU(arena->commit(tensors[i], plan.tensors[i].device_bytes, &on_device));
    EXPECT_EQ(on_device, 16 * kMiB);
  }
  EXPECT_EQ(simcuda_host_used_bytes(), 16 * kMiB) << "4 MiB on each of the 4 tensors";
  EXPECT_EQ(arena->host_bytes(), plan.host_bytes);
  using Ranges = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  for (CUdeviceptr t : tensors) EXPECT_EQ(host_ranges(t, 20 * kMiB), (Ranges{{16 * kMiB, 20 * kMiB}}));
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
  // The commit splits the last chunk: two device chunks, a 2 MiB device handle and a 6 MiB host one.
  constexpr std::uint64_t kSplit = 2 * kChunk + 2 * kMiB;
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
      ASSERT_CU(phase == 0 ? arena->defer(a) : arena->commit(a, kSplit));
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
        const CUresult r = phase == 0 ? arena->defer(a) : arena->commit(a, kSplit);
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

namespace {

// An engine's own VMM allocation: `bytes` reserved and mapped at a range of its own, with the engine's
// properties (POSIX fd export, GPUDirect RDMA), read-only for device 0 as the engine granted it.
struct EngineMapping {
  CUdeviceptr va = 0;
  std::uint64_t bytes = 0;
  CUmemGenericAllocationHandle handle = 0;
  CUmemAllocationProp prop{};
  CUmemAccessDesc grant{};
};

EngineMapping map_like_an_engine(std::uint64_t bytes) {
  EngineMapping m;
  m.bytes = bytes;
  m.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  m.prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  m.prop.location.id = 0;
  m.prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  m.prop.allocFlags.gpuDirectRDMACapable = 1;
  m.grant.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  m.grant.location.id = 0;
  m.grant.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
  EXPECT_EQ(CUDA_SUCCESS, cuMemAddressReserve(&m.va, bytes, 0, 0, 0));
  EXPECT_EQ(CUDA_SUCCESS, cuMemCreate(&m.handle, bytes, &m.prop, 0));
  EXPECT_EQ(CUDA_SUCCESS, cuMemMap(m.va, bytes, 0, m.handle, 0));
  EXPECT_EQ(CUDA_SUCCESS, cuMemSetAccess(m.va, bytes, &m.grant, 1));
  return m;
}

unsigned long long access_of_device0(CUdeviceptr va) {
  CUmemLocation device{};
  device.type = CU_MEM_LOCATION_TYPE_DEVICE;
  device.id = 0;
  unsigned long long flags = 0;
  EXPECT_EQ(CUDA_SUCCESS, cuMemGetAccess(&flags, &device, va));
  return flags;
}

}  // namespace

TEST_F(ArenaTest, AnAdoptedRegionIsDeferredAndCommittedWithTheEnginesPropertiesAndGrants) {
  auto arena = Make();
  const EngineMapping m = map_like_an_engine(12 * kMiB);
  ASSERT_CU(arena->adopt(m.va, m.bytes, m.handle, m.prop));
  arena->record_access(m.va, &m.grant, 1);
  EXPECT_TRUE(arena->adopted(m.va));
  EXPECT_FALSE(arena->contains(m.va)) << "the engine's range, not the arena's";
  EXPECT_TRUE(arena->holds(m.va + m.bytes - 1));
  EXPECT_EQ(arena->sole_handle(m.va), m.handle);
  ASSERT_CU(arena->defer(m.va));
  EXPECT_EQ(arena->backing(m.va), Backing::scratch);
  EXPECT_EQ(arena->sole_handle(m.va), 0u);
  EXPECT_EQ(Used(), kScratch + 2 * kMiB) << "the engine's handle went with the deferral";
  EXPECT_EQ(access_of_device0(m.va), CU_MEM_ACCESS_FLAGS_PROT_READ) << "the engine's grant, on the scratch too";
  ASSERT_CU(arena->commit(m.va, m.bytes));
  EXPECT_EQ(arena->handles(m.va), 1u) << "one handle, as the engine made it, whatever the chunk size";
  const CUmemGenericAllocationHandle committed = arena->sole_handle(m.va);
  ASSERT_NE(committed, 0u);
  CUmemAllocationProp got{};
  ASSERT_CU(cuMemGetAllocationPropertiesFromHandle(&got, committed));
  EXPECT_EQ(got.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  EXPECT_EQ(got.allocFlags.gpuDirectRDMACapable, 1);
  EXPECT_EQ(access_of_device0(m.va), CU_MEM_ACCESS_FLAGS_PROT_READ) << "and on the committed memory";
  int fd = -1;
  EXPECT_EQ(CUDA_SUCCESS, cuMemExportToShareableHandle(&fd, committed, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0))
      << "exportable, as the engine asked";
  close(fd);
  CUmemGenericAllocationHandle kept = 0;
  ASSERT_CU(arena->unadopt(m.va, &kept));
  EXPECT_EQ(kept, committed) << "the committed handle goes back to the engine's handle";
  EXPECT_FALSE(arena->holds(m.va));
  EXPECT_CU(cuMemRelease(kept));
  EXPECT_CU(cuMemAddressFree(m.va, m.bytes));
}

TEST_F(ArenaTest, UnadoptingOnScratchOrWithAHostTailKeepsNoHandle) {
  auto arena = Make();
  const EngineMapping a = map_like_an_engine(8 * kMiB);
  const EngineMapping b = map_like_an_engine(8 * kMiB);
  ASSERT_CU(arena->adopt(a.va, a.bytes, a.handle, a.prop));
  ASSERT_CU(arena->adopt(b.va, b.bytes, b.handle, b.prop));
  ASSERT_CU(arena->defer(a.va));
  ASSERT_CU(arena->defer(b.va));
  CUmemGenericAllocationHandle kept = 1;
  ASSERT_CU(arena->unadopt(a.va, &kept));
  EXPECT_EQ(kept, 0u) << "on scratch: no memory of its own";
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemUnmap(a.va, a.bytes)) << "nothing is left mapped there";
  ASSERT_CU(arena->commit(b.va, 4 * kMiB));
  EXPECT_EQ(arena->host_bytes(b.va), 4 * kMiB) << "a device part and a host tail";
  EXPECT_EQ(arena->sole_handle(b.va), 0u) << "two handles: none stands for the region";
  ASSERT_CU(arena->unadopt(b.va, &kept));
  EXPECT_EQ(kept, 0u);
  EXPECT_TRUE(arena->release_scratch());
  EXPECT_EQ(Used(), 0u) << "every handle released";
  EXPECT_CU(cuMemAddressFree(a.va, a.bytes));
  EXPECT_CU(cuMemAddressFree(b.va, b.bytes));
}

TEST_F(ArenaTest, AdoptedRegionsNeitherOverlapNorTakeTheArenasAddresses) {
  auto arena = Make(32 * kMiB);
  const EngineMapping m = map_like_an_engine(8 * kMiB);
  ASSERT_CU(arena->adopt(m.va, m.bytes, m.handle, m.prop));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, arena->adopt(m.va + 2 * kMiB, 2 * kMiB, m.handle, m.prop)) << "overlaps";
  CUdeviceptr a = 0;
  ASSERT_CU(arena->allocate(32 * kMiB, &a)) << "the whole reserved range is still free";
  EXPECT_EQ(a, arena->base());
  ASSERT_CU(arena->release(a));
  CUmemGenericAllocationHandle kept = 0;
  ASSERT_CU(arena->unadopt(m.va, &kept));
  EXPECT_CU(cuMemRelease(kept));
  EXPECT_CU(cuMemAddressFree(m.va, m.bytes));
}
