// Simulated driver memory semantics: VMM rules and their errors, aliasing, capacity, faults, sparse zeroing.
#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "simcuda_fixture.h"

using MemoryTest = SimDriver;
using MemoryDeathTest = SimDriver;

namespace {
std::uint32_t* As32(CUdeviceptr p) { return reinterpret_cast<std::uint32_t*>(p); }

long ResidentKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}
}  // namespace

TEST_F(MemoryTest, VmmRoundTripKeepsDataAndAccountsCapacity) {
  const size_t size = 4 * kMiB;
  CUdeviceptr va = Reserve(size);
  CUmemGenericAllocationHandle h = Create(size);
  EXPECT_EQ(Used(), size);
  MapRW(va, size, h);
  As32(va)[0] = 0xdeadbeef;
  As32(va)[size / 4 - 1] = 42;
  std::uint32_t back[2] = {};
  ASSERT_CU(cuMemcpyDtoH(&back[0], va, 4));
  ASSERT_CU(cuMemcpyDtoH(&back[1], va + size - 4, 4));
  EXPECT_EQ(back[0], 0xdeadbeefu);
  EXPECT_EQ(back[1], 42u);
  ASSERT_CU(cuMemUnmap(va, size));
  ASSERT_CU(cuMemRelease(h));
  EXPECT_EQ(Used(), 0u);
  ASSERT_CU(cuMemAddressFree(va, size));
}

TEST_F(MemoryTest, MisalignedSizesAreRejected) {
  CUdeviceptr va = 0;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemAddressReserve(&va, 3 * kMiB, 0, 0, 0));
  CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle h = 0;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemCreate(&h, kMiB, &prop, 0));
  EXPECT_EQ(Used(), 0u);
  CUdeviceptr base = Reserve(8 * kMiB);
  CUmemGenericAllocationHandle ok = Create(2 * kMiB);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemMap(base + kMiB, 2 * kMiB, 0, ok, 0));
  ASSERT_CU(cuMemRelease(ok));
}

TEST_F(MemoryTest, MapRequiresOffsetZeroAndTheWholeHandle) {
  CUdeviceptr va = Reserve(8 * kMiB);
  CUmemGenericAllocationHandle h = Create(4 * kMiB);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemMap(va, 2 * kMiB, 2 * kMiB, h, 0));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemMap(va, 2 * kMiB, 0, h, 0));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemMap(va, 4 * kMiB, 0, h, 1));
  EXPECT_CU(cuMemMap(va, 4 * kMiB, 0, h, 0));
  EXPECT_CU(cuMemUnmap(va, 4 * kMiB));
  EXPECT_CU(cuMemRelease(h));
}

TEST_F(MemoryTest, MappingOverAMappingIsRejected) {
  CUdeviceptr va = Reserve(8 * kMiB);
  CUmemGenericAllocationHandle a = Create(4 * kMiB);
  CUmemGenericAllocationHandle b = Create(4 * kMiB);
  ASSERT_CU(cuMemMap(va, 4 * kMiB, 0, a, 0));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemMap(va, 4 * kMiB, 0, b, 0));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemMap(va + 2 * kMiB, 4 * kMiB, 0, b, 0));
  EXPECT_CU(cuMemMap(va + 4 * kMiB, 4 * kMiB, 0, b, 0));
  EXPECT_CU(cuMemUnmap(va, 8 * kMiB));
  EXPECT_CU(cuMemRelease(a));
  EXPECT_CU(cuMemRelease(b));
}

TEST_F(MemoryTest, MappingOutsideAReservationIsRejected) {
  CUdeviceptr va = Reserve(4 * kMiB);
  CUmemGenericAllocationHandle h = Create(4 * kMiB);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemMap(va + 2 * kMiB, 4 * kMiB, 0, h, 0));  // runs past the end
  CUdeviceptr plain = 0;
  ASSERT_CU(cuMemAlloc(&plain, 4 * kMiB));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemMap(plain, 4 * kMiB, 0, h, 0));  // not a reservation
  EXPECT_CU(cuMemFree(plain));
  EXPECT_CU(cuMemRelease(h));
}

TEST_F(MemoryTest, UnmappingPartOfAMappingIsRejected) {
  CUdeviceptr va = Reserve(8 * kMiB);
  CUmemGenericAllocationHandle h = Create(8 * kMiB);
  MapRW(va, 8 * kMiB, h);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemUnmap(va, 4 * kMiB));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemUnmap(va + 2 * kMiB, 6 * kMiB));
  As32(va)[0] = 7;  // still mapped and accessible after the refused calls
  EXPECT_CU(cuMemUnmap(va, 8 * kMiB));
  EXPECT_CU(cuMemRelease(h));
}

TEST_F(MemoryTest, OneUnmapAndOneSetAccessMaySpanContiguousMappings) {
  CUdeviceptr va = Reserve(6 * kMiB);
  CUmemGenericAllocationHandle h[3] = {Create(2 * kMiB), Create(2 * kMiB), Create(2 * kMiB)};
  for (int i = 0; i < 3; ++i) ASSERT_CU(cuMemMap(va + i * 2 * kMiB, 2 * kMiB, 0, h[i], 0));
  CUmemAccessDesc rw = ReadWrite();
  ASSERT_CU(cuMemSetAccess(va, 6 * kMiB, &rw, 1));
  for (int i = 0; i < 3; ++i) As32(va + i * 2 * kMiB)[1] = static_cast<std::uint32_t>(i);
  ASSERT_CU(cuMemUnmap(va, 6 * kMiB));
  for (auto handle : h) ASSERT_CU(cuMemRelease(handle));
  EXPECT_EQ(Used(), 0u);
}

TEST_F(MemoryTest, SetAccessRequiresAFullyMappedRange) {
  CUdeviceptr va = Reserve(6 * kMiB);
  CUmemGenericAllocationHandle a = Create(2 * kMiB);
  CUmemGenericAllocationHandle b = Create(2 * kMiB);
  ASSERT_CU(cuMemMap(va, 2 * kMiB, 0, a, 0));
  ASSERT_CU(cuMemMap(va + 4 * kMiB, 2 * kMiB, 0, b, 0));  // gap in the middle
  CUmemAccessDesc rw = ReadWrite();
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemSetAccess(va, 6 * kMiB, &rw, 1));
  EXPECT_CU(cuMemSetAccess(va, 2 * kMiB, &rw, 1));
  EXPECT_CU(cuMemUnmap(va, 2 * kMiB));
  EXPECT_CU(cuMemUnmap(va + 4 * kMiB, 2 * kMiB));
  EXPECT_CU(cuMemRelease(a));
  EXPECT_CU(cuMemRelease(b));
}

TEST_F(MemoryTest, OneHandleAliasedAtManyAddressesSharesItsBytes) {
  const int aliases = 16;
  CUdeviceptr va = Reserve(aliases * 2 * kMiB);
  CUmemGenericAllocationHandle scratch = Create(2 * kMiB);
  for (int i = 0; i < aliases; ++i) ASSERT_CU(cuMemMap(va + i * 2 * kMiB, 2 * kMiB, 0, scratch, 0));
  CUmemAccessDesc rw = ReadWrite();
  ASSERT_CU(cuMemSetAccess(va, aliases * 2 * kMiB, &rw, 1));
  EXPECT_EQ(Used(), 2 * kMiB) << "aliases are charged once";
  As32(va)[5] = 1234;
  for (int i = 0; i < aliases; ++i) EXPECT_EQ(As32(va + i * 2 * kMiB)[5], 1234u) << "alias " << i;
  ASSERT_CU(cuMemRelease(scratch));
  EXPECT_EQ(Used(), 2 * kMiB) << "still mapped";
  ASSERT_CU(cuMemUnmap(va, aliases * 2 * kMiB));
  EXPECT_EQ(Used(), 0u);
}

TEST_F(MemoryTest, ReleasingAHandleTwiceOrUnknownIsRejected) {
  CUmemGenericAllocationHandle h = Create(2 * kMiB);
  EXPECT_CU(cuMemRelease(h));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemRelease(h));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemRelease(0x1234));
  CUdeviceptr va = Reserve(2 * kMiB);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemMap(va, 2 * kMiB, 0, h, 0)) << "released handles cannot be mapped";
}

TEST_F(MemoryTest, AddressFreeNeedsTheWholeUnmappedReservation) {
  CUdeviceptr va = Reserve(4 * kMiB);
  CUmemGenericAllocationHandle h = Create(2 * kMiB);
  ASSERT_CU(cuMemMap(va, 2 * kMiB, 0, h, 0));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemAddressFree(va, 2 * kMiB));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemAddressFree(va, 4 * kMiB)) << "still has a mapping";
  ASSERT_CU(cuMemUnmap(va, 2 * kMiB));
  EXPECT_CU(cuMemAddressFree(va, 4 * kMiB));
  EXPECT_CU(cuMemRelease(h));
}

TEST_F(MemoryTest, ReserveHonoursAlignmentAndAFreeHint) {
  CUdeviceptr va = 0;
  ASSERT_CU(cuMemAddressReserve(&va, 4 * kMiB, 64 * kMiB, 0, 0));
  EXPECT_EQ(va % (64 * kMiB), 0u);
  ASSERT_CU(cuMemAddressFree(va, 4 * kMiB));
  CUdeviceptr again = 0;
  ASSERT_CU(cuMemAddressReserve(&again, 4 * kMiB, 0, va, 0));
  EXPECT_EQ(again, va) << "a free hinted range is used";
  ASSERT_CU(cuMemAddressFree(again, 4 * kMiB));
}

TEST_F(MemoryTest, GranularityQueriesReportConfiguredValues) {
  Restart("SIMCUDA_GRANULARITY=64KiB SIMCUDA_RECOMMENDED_GRANULARITY=2MiB");
  CUmemAllocationProp prop = DeviceProp();
  size_t g = 0;
  ASSERT_CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  EXPECT_EQ(g, 64u << 10);
  ASSERT_CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  EXPECT_EQ(g, 2 * kMiB);
  prop.location.id = 3;
  EXPECT_EQ(CUDA_ERROR_INVALID_DEVICE, cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
}

TEST_F(MemoryTest, MemGetInfoTracksAllocationsRoundedToTheGranularity) {
  size_t free0 = 0, total = 0;
  ASSERT_CU(cuMemGetInfo(&free0, &total));
  EXPECT_EQ(total, kGiB);
  EXPECT_EQ(free0, kGiB);
  CUdeviceptr a = 0, b = 0;
  ASSERT_CU(cuMemAlloc(&a, 100));
  ASSERT_CU(cuMemAlloc(&b, 3 * kMiB));
  size_t free1 = 0;
  ASSERT_CU(cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free0 - free1, 2 * kMiB + 4 * kMiB);
  ASSERT_CU(cuMemFree(a));
  ASSERT_CU(cuMemFree(b));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemFree(b)) << "double free";
  ASSERT_CU(cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free1, free0);
}

namespace {
// The permissions of the mapping that holds `address` ("rw-p", "---p"), from /proc/self/maps.
std::string MappingPermissions(CUdeviceptr address) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long long begin = 0, end = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%llx-%llx %4s", &begin, &end, perms) == 3 && address >= begin && address < end)
      return perms;
  }
  return "unmapped";
}
}  // namespace

TEST_F(MemoryTest, UnbackedAllocationsGetDistinctReusedAddressesWithoutHostMemory) {
  Restart("SIMCUDA_HOST_BACKING=0");
  CUdeviceptr a = 0, b = 0, c = 0;
  ASSERT_CU(cuMemAlloc(&a, 100));
  ASSERT_CU(cuMemAlloc(&b, 3 * kMiB));
  ASSERT_CU(cuMemAlloc(&c, 100));
  EXPECT_EQ(Used(), 2 * kMiB + 4 * kMiB + 2 * kMiB) << "charged as a backed allocation would be";
  // Disjoint ranges of the granularity-rounded sizes, in an inaccessible reservation.
  std::vector<std::pair<CUdeviceptr, CUdeviceptr>> ranges{{a, a + 2 * kMiB}, {b, b + 4 * kMiB}, {c, c + 2 * kMiB}};
  for (std::size_t i = 0; i < ranges.size(); ++i)
    for (std::size_t j = i + 1; j < ranges.size(); ++j)
      EXPECT_TRUE(ranges[i].second <= ranges[j].first || ranges[j].second <= ranges[i].first) << i << " " << j;
  for (CUdeviceptr p : {a, b, c}) EXPECT_EQ(MappingPermissions(p), "---p");
  CUdeviceptr base = 0;
  size_t size = 0;
  ASSERT_CU(cuMemGetAddressRange(&base, &size, b + 5));
  EXPECT_EQ(base, b);
  EXPECT_EQ(size, 3 * kMiB);
  // A freed address is handed out again for the same size, and only for it.
  ASSERT_CU(cuMemFree(a));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemFree(a)) << "double free";
  CUdeviceptr d = 0, e = 0;
  ASSERT_CU(cuMemAlloc(&d, 3 * kMiB));
  EXPECT_NE(d, a);
  ASSERT_CU(cuMemAlloc(&e, 2 * kMiB));
  EXPECT_EQ(e, a);
  for (CUdeviceptr p : {b, c, d, e}) ASSERT_CU(cuMemFree(p));
  EXPECT_EQ(Used(), 0u);
  // Capacity still applies.
  CUdeviceptr big = 0, more = 0;
  ASSERT_CU(cuMemAlloc(&big, 1000 * kMiB));
  EXPECT_EQ(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&more, 32 * kMiB));
  ASSERT_CU(cuMemFree(big));
}

TEST_F(MemoryTest, ExhaustionReturnsOutOfMemoryAndChargesNothing) {
  CUdeviceptr big = 0;
  ASSERT_CU(cuMemAlloc(&big, 1000 * kMiB));
  CUdeviceptr more = 0;
  EXPECT_EQ(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&more, 32 * kMiB));
  CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle h = 0;
  EXPECT_EQ(CUDA_ERROR_OUT_OF_MEMORY, cuMemCreate(&h, 32 * kMiB, &prop, 0));
  EXPECT_EQ(Used(), 1000 * kMiB);
  EXPECT_CU(cuMemAlloc(&more, 24 * kMiB)) << "what is left still fits";
  EXPECT_CU(cuMemFree(more));
  EXPECT_CU(cuMemFree(big));
}

TEST_F(MemoryTest, ContextRetainChargesContextBytesOnce) {
  Restart("SIMCUDA_CONTEXT_BYTES=512MiB");
  size_t free_bytes = 0, total = 0;
  ASSERT_CU(cuMemGetInfo(&free_bytes, &total));
  EXPECT_EQ(total - free_bytes, 512 * kMiB);
  CUcontext again = nullptr;
  ASSERT_CU(cuDevicePrimaryCtxRetain(&again, 0));
  EXPECT_EQ(again, ctx_);
  EXPECT_EQ(Used(), 512 * kMiB);
  ASSERT_CU(cuDevicePrimaryCtxRelease(0));
  ASSERT_CU(cuDevicePrimaryCtxRelease(0));
  EXPECT_EQ(Used(), 0u);
}

TEST_F(MemoryTest, HostLocatedHandlesChargeHostMemoryAndMapLikeDeviceOnes) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
  CUmemGenericAllocationHandle h = 0;
  ASSERT_CU(cuMemCreate(&h, 8 * kMiB, &prop, 0));
  EXPECT_EQ(Used(), 0u);
  EXPECT_EQ(simcuda_host_used_bytes(), 8 * kMiB);
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  prop.location.id = 0;
  CUmemGenericAllocationHandle numa = 0;
  ASSERT_CU(cuMemCreate(&numa, 2 * kMiB, &prop, 0));
  CUdeviceptr va = Reserve(8 * kMiB);
  MapRW(va, 8 * kMiB, h);
  As32(va)[3] = 99;
  EXPECT_EQ(As32(va)[3], 99u);
  ASSERT_CU(cuMemUnmap(va, 8 * kMiB));
  ASSERT_CU(cuMemRelease(h));
  ASSERT_CU(cuMemRelease(numa));
  EXPECT_EQ(simcuda_host_used_bytes(), 0u);
}

TEST_F(MemoryTest, HostLocationsAreRefusedWhereTheDeviceLacksSupport) {
  Restart("SIMCUDA_HOST_VMM=0 SIMCUDA_HOST_NUMA_VMM=0");
  int host = -1, numa = -1, vmm = -1;
  ASSERT_CU(cuDeviceGetAttribute(&host, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
  ASSERT_CU(cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
  ASSERT_CU(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
  EXPECT_EQ(host, 0);
  EXPECT_EQ(numa, 0);
  EXPECT_EQ(vmm, 1);
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
  CUmemGenericAllocationHandle h = 0;
  EXPECT_EQ(CUDA_ERROR_NOT_SUPPORTED, cuMemCreate(&h, 2 * kMiB, &prop, 0));
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  EXPECT_EQ(CUDA_ERROR_NOT_SUPPORTED, cuMemCreate(&h, 2 * kMiB, &prop, 0));
  EXPECT_EQ(simcuda_host_used_bytes(), 0u);
}

TEST_F(MemoryTest, ZeroingHugeRangesStaysSparse) {
  // A 16 GiB "device" on a test machine: filling it with zeros must not touch 16 GiB of RAM.
  Restart("SIMCUDA_DEVICE_MEMORY=64GiB");
  const size_t size = 16 * kGiB;
  CUdeviceptr va = Reserve(size);
  CUmemGenericAllocationHandle h = Create(size);
  MapRW(va, size, h);
  for (size_t off = 0; off < size; off += kGiB) As32(va + off)[0] = 0xabcdef;  // dirty one page per GiB
  const long before = ResidentKiB();
  ASSERT_CU(cuMemsetD8(va, 0, size));
  const long after = ResidentKiB();
  for (size_t off = 0; off < size; off += kGiB) EXPECT_EQ(As32(va + off)[0], 0u) << off;
  EXPECT_LT(after - before, 64 * 1024) << "RSS grew by " << (after - before) << " KiB";
  CUdeviceptr plain = 0;
  ASSERT_CU(cuMemAlloc(&plain, 8 * kGiB));
  As32(plain + 4 * kGiB)[0] = 5;
  ASSERT_CU(cuMemsetD8(plain, 0, 8 * kGiB));
  EXPECT_EQ(As32(plain + 4 * kGiB)[0], 0u);
  EXPECT_LT(ResidentKiB() - before, 64 * 1024);
  ASSERT_CU(cuMemFree(plain));
  ASSERT_CU(cuMemUnmap(va, size));
  ASSERT_CU(cuMemRelease(h));
}

TEST_F(MemoryTest, MemsetAndMemcpyCoverEdgesAndReportBadPointers) {
  CUdeviceptr a = 0, b = 0;
  ASSERT_CU(cuMemAlloc(&a, 3 * kMiB + 123));
  ASSERT_CU(cuMemAlloc(&b, 3 * kMiB + 123));
  ASSERT_CU(cuMemsetD8(a, 0x5a, 3 * kMiB + 123));
  ASSERT_CU(cuMemcpyDtoD(b, a, 3 * kMiB + 123));
  ASSERT_CU(cuMemsetD8(b + 10, 0, 2 * kMiB + 7));  // zero fill with unaligned edges
  std::vector<unsigned char> host(3 * kMiB + 123);
  ASSERT_CU(cuMemcpyDtoH(host.data(), b, host.size()));
  for (size_t i = 0; i < host.size(); ++i) {
    const unsigned char want = (i >= 10 && i < 10 + 2 * kMiB + 7) ? 0 : 0x5a;
    ASSERT_EQ(host[i], want) << "byte " << i;
  }
  int on_stack = 0;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemsetD8(reinterpret_cast<CUdeviceptr>(&on_stack), 0, 4));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(&on_stack), host.data(), 4));
  ASSERT_CU(cuMemFree(a));
  ASSERT_CU(cuMemFree(b));
}

TEST_F(MemoryTest, IpcHandlesOnlyForPlainAllocations) {
  CUdeviceptr plain = 0, pooled = 0;
  ASSERT_CU(cuMemAlloc(&plain, 2 * kMiB));
  ASSERT_CU(cuMemAllocAsync(&pooled, 2 * kMiB, nullptr));
  CUipcMemHandle ipc{};
  EXPECT_CU(cuIpcGetMemHandle(&ipc, plain));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuIpcGetMemHandle(&ipc, pooled));
  CUdeviceptr va = Reserve(2 * kMiB);
  CUmemGenericAllocationHandle h = Create(2 * kMiB);
  MapRW(va, 2 * kMiB, h);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuIpcGetMemHandle(&ipc, va)) << "VMM memory is not legacy-IPC capable";
  int capable = -1;
  ASSERT_CU(cuPointerGetAttribute(&capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, plain));
  EXPECT_EQ(capable, 1);
  ASSERT_CU(cuPointerGetAttribute(&capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, va));
  EXPECT_EQ(capable, 0);
  ASSERT_CU(cuMemUnmap(va, 2 * kMiB));
  ASSERT_CU(cuMemRelease(h));
  ASSERT_CU(cuMemFreeAsync(pooled, nullptr));
  ASSERT_CU(cuMemFree(plain));
}

TEST_F(MemoryTest, PointerAttributesAndAddressRanges) {
  CUdeviceptr plain = 0;
  ASSERT_CU(cuMemAlloc(&plain, 5 * kMiB));
  CUdeviceptr base = 0;
  size_t size = 0;
  ASSERT_CU(cuMemGetAddressRange(&base, &size, plain + 12345));
  EXPECT_EQ(base, plain);
  EXPECT_EQ(size, 5 * kMiB);
  CUdeviceptr va = Reserve(8 * kMiB);
  CUmemGenericAllocationHandle h = Create(4 * kMiB);
  MapRW(va + 4 * kMiB, 4 * kMiB, h);
  ASSERT_CU(cuMemGetAddressRange(&base, &size, va + 5 * kMiB));
  EXPECT_EQ(base, va + 4 * kMiB);
  EXPECT_EQ(size, 4 * kMiB);
  EXPECT_EQ(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange(&base, &size, va)) << "reserved but unmapped";
  int ordinal = -1;
  unsigned int type = 0;
  ASSERT_CU(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, va + 4 * kMiB));
  ASSERT_CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, plain));
  EXPECT_EQ(ordinal, 0);
  EXPECT_EQ(type, static_cast<unsigned>(CU_MEMORYTYPE_DEVICE));
  ASSERT_CU(cuMemUnmap(va + 4 * kMiB, 4 * kMiB));
  ASSERT_CU(cuMemRelease(h));
  ASSERT_CU(cuMemFree(plain));
}

TEST_F(MemoryTest, ConcurrentAllocationsAccountExactly) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this] {
      ASSERT_CU(cuCtxSetCurrent(ctx_));
      for (int i = 0; i < 200; ++i) {
        CUdeviceptr p = 0;
        CUmemGenericAllocationHandle h = 0;
        CUmemAllocationProp prop = DeviceProp();
        ASSERT_CU(cuMemAlloc(&p, 2 * kMiB));
        ASSERT_CU(cuMemCreate(&h, 2 * kMiB, &prop, 0));
        ASSERT_CU(cuMemRelease(h));
        ASSERT_CU(cuMemFree(p));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(Used(), 0u);
  EXPECT_EQ(simcuda_call_count("cuMemAlloc_v2"), 800u);
}

TEST_F(MemoryDeathTest, TouchingAnUnmappedAddressCrashesLikeAGpuFault) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  CUdeviceptr va = Reserve(4 * kMiB);
  EXPECT_DEATH({ As32(va)[0] = 1; }, "");
  CUmemGenericAllocationHandle h = Create(4 * kMiB);
  ASSERT_CU(cuMemMap(va, 4 * kMiB, 0, h, 0));
  EXPECT_DEATH({ As32(va)[0] = 1; }, "") << "mapped but no access granted yet";
  CUmemAccessDesc ro = ReadWrite();
  ro.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
  ASSERT_CU(cuMemSetAccess(va, 4 * kMiB, &ro, 1));
  EXPECT_EQ(As32(va)[0], 0u);
  EXPECT_DEATH({ As32(va)[0] = 1; }, "") << "read-only";
  ASSERT_CU(cuMemUnmap(va, 4 * kMiB));
  EXPECT_DEATH({ (void)*static_cast<volatile std::uint32_t*>(As32(va)); }, "") << "unmapped again";
  ASSERT_CU(cuMemRelease(h));
}

// cuMemRetainAllocationHandle adds a reference: the memory lives until every reference is released
// and every mapping is gone, whichever reference goes first.
TEST_F(MemoryTest, RetainedHandlesAreCountedReferences) {
  const size_t size = 4 * kMiB;
  CUdeviceptr va = Reserve(size);
  CUmemGenericAllocationHandle h = Create(size);
  MapRW(va, size, h);
  CUmemGenericAllocationHandle again = 0;
  ASSERT_CU(cuMemRetainAllocationHandle(&again, reinterpret_cast<void*>(va + kMiB)));
  EXPECT_EQ(again, h);
  ASSERT_CU(cuMemRelease(h));
  ASSERT_CU(cuMemUnmap(va, size));
  EXPECT_EQ(Used(), size) << "the retained reference keeps it";
  ASSERT_CU(cuMemRelease(again));
  EXPECT_EQ(Used(), 0u);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemRelease(h)) << "no reference left";
  CUmemGenericAllocationHandle none = 0;
  CUdeviceptr plain = 0;
  ASSERT_CU(cuMemAlloc(&plain, kMiB));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemRetainAllocationHandle(&none, reinterpret_cast<void*>(plain)))
      << "cuMemAlloc memory is no VMM handle the caller can retain";
  ASSERT_CU(cuMemFree(plain));
  ASSERT_CU(cuMemAddressFree(va, size));
}

TEST_F(MemoryTest, PointerAttributesAnswerSeveralAtOnceAndDmaBufIsNotSupported) {
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc(&p, 3 * kMiB));
  CUpointer_attribute attributes[2] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  CUdeviceptr start = 0;
  size_t size = 0;
  void* data[2] = {&start, &size};
  ASSERT_CU(cuPointerGetAttributes(2, attributes, data, p + 100));
  EXPECT_EQ(start, p);
  EXPECT_EQ(size, 3 * kMiB);
  int fd = -1;
  EXPECT_EQ(CUDA_ERROR_NOT_SUPPORTED,
            cuMemGetHandleForAddressRange(&fd, p, 2 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
  ASSERT_CU(cuMemFree(p));
}

// Unified addressing: the pointer names its allocation, so cuMemFree needs no current context. Numba
// pops every context of a thread and then frees what its contexts still owe.
TEST_F(MemoryTest, MemFreeNeedsNoCurrentContext) {
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc(&p, kMiB));
  ASSERT_CU(cuCtxSetCurrent(nullptr));
  EXPECT_CU(cuMemFree(p));
  EXPECT_EQ(Used(), 0u) << "the free returned the memory";
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemFree(p)) << "freed twice";
  EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT, cuMemAlloc(&p, kMiB)) << "allocating still needs a context";
}

// Pinned host memory is device memory at the same address: memsets and copies reach it through its
// device pointer, and cuMemGetAddressRange answers the pinned block containing any of its bytes.
TEST_F(MemoryTest, MappedHostMemoryIsDeviceMemoryForMemsetsCopiesAndAddressRanges) {
  constexpr size_t kBytes = 3 * 4096;
  void* host = nullptr;
  ASSERT_CU(cuMemHostAlloc(&host, kBytes, CU_MEMHOSTALLOC_DEVICEMAP));
  CUdeviceptr mapped = 0;
  ASSERT_CU(cuMemHostGetDevicePointer(&mapped, host, 0));
  ASSERT_CU(cuMemsetD8(mapped, 0xab, kBytes));
  EXPECT_EQ(static_cast<unsigned char*>(host)[kBytes - 1], 0xab) << "the memset wrote the host memory";
  std::vector<unsigned char> back(kBytes);
  static_cast<unsigned char*>(host)[5] = 7;
  ASSERT_CU(cuMemcpyDtoH(back.data(), mapped, kBytes));
  EXPECT_EQ(back[5], 7);
  EXPECT_EQ(back[6], 0xab);
  CUdeviceptr base = 0;
  size_t size = 0;
  ASSERT_CU(cuMemGetAddressRange(&base, &size, mapped + 4100));
  EXPECT_EQ(base, mapped);
  EXPECT_EQ(size, kBytes);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemsetD8(mapped, 0, kBytes + 4096 * 16)) << "past the block";

  // Registered memory likewise (CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: the same address).
  std::vector<unsigned char> user(8192, 1);
  ASSERT_CU(cuMemHostRegister(user.data(), user.size(), CU_MEMHOSTREGISTER_DEVICEMAP));
  const auto registered = reinterpret_cast<CUdeviceptr>(user.data());
  ASSERT_CU(cuMemsetD8(registered + 100, 9, 50));
  EXPECT_EQ(user[99], 1);
  EXPECT_EQ(user[100], 9);
  ASSERT_CU(cuMemcpyDtoD(registered, mapped, 16));
  EXPECT_EQ(user[0], 0xab);
  ASSERT_CU(cuMemGetAddressRange(&base, &size, registered + 5000));
  EXPECT_EQ(base, registered);
  EXPECT_EQ(size, user.size());
  ASSERT_CU(cuMemHostUnregister(user.data()));
  ASSERT_CU(cuMemFreeHost(host));
  EXPECT_EQ(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange(&base, &size, mapped)) << "freed";
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemsetD8(mapped, 0, 16)) << "freed";
}

// Managed memory: one address for the host and the device, real memory both sides reach, charged to no
// device until a device touches it (which never happens here).
TEST_F(MemoryTest, ManagedMemoryIsOneAddressForHostAndDevice) {
  CUdeviceptr managed = 0;
  ASSERT_CU(cuMemAllocManaged(&managed, 3 * kMiB, CU_MEM_ATTACH_GLOBAL));
  EXPECT_EQ(Used(), 0u);
  auto* bytes = reinterpret_cast<unsigned char*>(managed);
  bytes[0] = 3;  // the host writes it directly
  ASSERT_CU(cuMemsetD8(managed + 1, 0x5a, 3 * kMiB - 1));
  EXPECT_EQ(bytes[3 * kMiB - 1], 0x5a);
  CUdeviceptr device = 0;
  ASSERT_CU(cuMemAlloc(&device, kMiB));
  ASSERT_CU(cuMemcpyDtoD(device, managed, kMiB));
  EXPECT_EQ(reinterpret_cast<unsigned char*>(device)[0], 3);
  EXPECT_EQ(reinterpret_cast<unsigned char*>(device)[1], 0x5a);
  int is_managed = 0;
  ASSERT_CU(cuPointerGetAttribute(&is_managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, managed + 10));
  EXPECT_EQ(is_managed, 1);
  ASSERT_CU(cuPointerGetAttribute(&is_managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, device));
  EXPECT_EQ(is_managed, 0);
  CUdeviceptr host_pointer = 0;
  ASSERT_CU(cuPointerGetAttribute(&host_pointer, CU_POINTER_ATTRIBUTE_HOST_POINTER, managed + 10));
  EXPECT_EQ(host_pointer, managed + 10);
  CUdeviceptr base = 0;
  size_t size = 0;
  ASSERT_CU(cuMemGetAddressRange(&base, &size, managed + 2 * kMiB));
  EXPECT_EQ(base, managed);
  EXPECT_EQ(size, 3 * kMiB);
  CUipcMemHandle ipc{};
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuIpcGetMemHandle(&ipc, managed)) << "legacy IPC is for cuMemAlloc memory";
  CUdeviceptr attached_host = 0;
  ASSERT_CU(cuMemAllocManaged(&attached_host, 4096, CU_MEM_ATTACH_HOST));
  ASSERT_CU(cuMemFree(attached_host));
  ASSERT_CU(cuMemFree(managed));
  ASSERT_CU(cuMemFree(device));
  EXPECT_EQ(Used(), 0u);
  int attribute = 0;
  ASSERT_CU(cuDeviceGetAttribute(&attribute, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 0));
  EXPECT_EQ(attribute, 1);
  ASSERT_CU(cuDeviceGetAttribute(&attribute, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 0));
  EXPECT_EQ(attribute, 1);
}
