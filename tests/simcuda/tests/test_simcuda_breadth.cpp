// Semantics of the driver API beyond kvremap's own calls: device identity, contexts, peers, events, streams,
// pinned host memory, copy and memset variants, pointer queries on host memory.
#include <dlfcn.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "simcuda_fixture.h"

namespace {

class Breadth : public SimDriver {};

TEST_F(Breadth, DeviceIdentityRoundTrips) {
  Restart("SIMCUDA_DEVICE_COUNT=2");
  CUuuid a{}, b{};
  ASSERT_CU(cuDeviceGetUuid(&a, 0));
  ASSERT_CU(cuDeviceGetUuid(&b, 1));
  EXPECT_NE(0, std::memcmp(a.bytes, b.bytes, sizeof a.bytes)) << "two devices, two UUIDs";
  char bus[32];
  ASSERT_CU(cuDeviceGetPCIBusId(bus, sizeof bus, 1));
  CUdevice dev = -1;
  ASSERT_CU(cuDeviceGetByPCIBusId(&dev, bus));
  EXPECT_EQ(dev, 1);
  ASSERT_CU(cuDeviceGetByPCIBusId(&dev, bus + 5));  // "BB:DD.F" without the domain
  EXPECT_EQ(dev, 1);
  int attr = 0;
  ASSERT_CU(cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 1));
  EXPECT_EQ(
      bus, std::string("0000:") + (attr < 16 ? "0" : "") + [&] {
        char hex[8];
        std::snprintf(hex, sizeof hex, "%x", attr);
        return std::string(hex);
      }() + ":00.0");
  ASSERT_CU(cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 0));
  EXPECT_EQ(attr, 64);
  ASSERT_CU(cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 0));
  EXPECT_EQ(attr, 50 << 20);
}

TEST_F(Breadth, PeerAccessIsEnabledOnceAndDisabledOnce) {
  Restart("SIMCUDA_DEVICE_COUNT=2");
  int can = -1;
  ASSERT_CU(cuDeviceCanAccessPeer(&can, 0, 1));
  EXPECT_EQ(can, 1);
  ASSERT_CU(cuDeviceCanAccessPeer(&can, 0, 0));
  EXPECT_EQ(can, 0);
  CUcontext other = nullptr;
  ASSERT_CU(cuDevicePrimaryCtxRetain(&other, 1));
  ASSERT_CU(cuCtxEnablePeerAccess(other, 0));
  EXPECT_EQ(cuCtxEnablePeerAccess(other, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  ASSERT_CU(cuCtxDisablePeerAccess(other));
  EXPECT_EQ(cuCtxDisablePeerAccess(other), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
}

TEST_F(Breadth, ContextStackPushesAndPops) {
  Restart("SIMCUDA_DEVICE_COUNT=2");
  CUcontext other = nullptr, current = nullptr, popped = nullptr;
  ASSERT_CU(cuDevicePrimaryCtxRetain(&other, 1));
  ASSERT_CU(cuCtxPushCurrent(other));
  ASSERT_CU(cuCtxGetCurrent(&current));
  EXPECT_EQ(current, other);
  CUdevice dev = -1;
  ASSERT_CU(cuCtxGetDevice(&dev));
  EXPECT_EQ(dev, 1);
  ASSERT_CU(cuCtxPopCurrent(&popped));
  EXPECT_EQ(popped, other);
  ASSERT_CU(cuCtxGetCurrent(&current));
  EXPECT_EQ(current, ctx_) << "the context below is current again";
  ASSERT_CU(cuCtxPopCurrent(&popped));
  EXPECT_EQ(popped, ctx_);
  ASSERT_CU(cuCtxGetCurrent(&current));
  EXPECT_EQ(current, nullptr);
  EXPECT_EQ(cuCtxPopCurrent(&popped), CUDA_ERROR_INVALID_CONTEXT);
  unsigned version = 0;
  ASSERT_CU(cuCtxGetApiVersion(ctx_, &version));
  EXPECT_EQ(version, 3020u);
}

TEST_F(Breadth, PrimaryContextStateAndFlags) {
  unsigned flags = 99;
  int active = -1;
  ASSERT_CU(cuDevicePrimaryCtxGetState(0, &flags, &active));
  EXPECT_EQ(flags, 0u);
  EXPECT_EQ(active, 1);
  ASSERT_CU(cuDevicePrimaryCtxSetFlags(0, CU_CTX_SCHED_BLOCKING_SYNC));
  ASSERT_CU(cuDevicePrimaryCtxGetState(0, &flags, &active));
  EXPECT_EQ(flags, static_cast<unsigned>(CU_CTX_SCHED_BLOCKING_SYNC));
  ASSERT_CU(cuCtxGetFlags(&flags));
  EXPECT_EQ(flags, static_cast<unsigned>(CU_CTX_SCHED_BLOCKING_SYNC));
  // A reset frees the context's allocations and clears its flags.
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc(&p, kMiB));
  EXPECT_EQ(simcuda_device_used_bytes(0), 2 * kMiB);
  ASSERT_CU(cuDevicePrimaryCtxReset(0));
  EXPECT_EQ(simcuda_device_used_bytes(0), 0u);
  EXPECT_EQ(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuDevicePrimaryCtxGetState(0, &flags, &active));
  EXPECT_EQ(flags, 0u);
  ASSERT_CU(cuDevicePrimaryCtxRelease(0));
  ASSERT_CU(cuDevicePrimaryCtxGetState(0, &flags, &active));
  EXPECT_EQ(active, 0);
}

TEST_F(Breadth, EventsTimeRecordedWork) {
  CUevent a = nullptr, b = nullptr, never = nullptr;
  ASSERT_CU(cuEventCreate(&a, CU_EVENT_DEFAULT));
  ASSERT_CU(cuEventCreate(&b, CU_EVENT_DEFAULT));
  ASSERT_CU(cuEventCreate(&never, CU_EVENT_DEFAULT));
  EXPECT_CU(cuEventQuery(never)) << "an event never recorded is complete";
  float ms = 0;
  EXPECT_EQ(cuEventElapsedTime(&ms, a, never), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_CU(cuEventRecord(a, nullptr));
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc(&p, 64 * kMiB));
  ASSERT_CU(cuMemsetD8(p, 1, 64 * kMiB));
  ASSERT_CU(cuEventRecord(b, nullptr));
  ASSERT_CU(cuEventElapsedTime(&ms, a, b));
  EXPECT_GT(ms, 0.0f);
  ASSERT_CU(cuEventElapsedTime(&ms, b, a));
  EXPECT_LT(ms, 0.0f);
  ASSERT_CU(cuMemFree(p));
  for (CUevent e : {a, b, never}) ASSERT_CU(cuEventDestroy(e));
}

TEST_F(Breadth, StreamPrioritiesAreClampedAndCallbacksRunInOrder) {
  int least = 0, greatest = 0;
  ASSERT_CU(cuCtxGetStreamPriorityRange(&least, &greatest));
  CUstream s = nullptr;
  ASSERT_CU(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, 100));
  int priority = -1;
  ASSERT_CU(cuStreamGetPriority(s, &priority));
  EXPECT_EQ(priority, least);
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc(&p, 4096));
  struct Seen {
    CUdeviceptr p;
    unsigned char byte;
  } seen{p, 0};
  ASSERT_CU(cuMemsetD8Async(p, 0x42, 4096, s));
  ASSERT_CU(cuStreamAddCallback(
      s,
      [](CUstream, CUresult status, void* user) {
        auto* seen = static_cast<Seen*>(user);
        if (status == CUDA_SUCCESS) cuMemcpyDtoH(&seen->byte, seen->p, 1);
      },
      &seen, 0));
  EXPECT_EQ(seen.byte, 0x42) << "the callback ran after the memset enqueued before it";
  ASSERT_CU(cuMemFree(p));
  ASSERT_CU(cuStreamDestroy(s));
}

TEST_F(Breadth, MemsetD16AndD32WriteTheirPattern) {
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc(&p, 4 * kMiB));
  ASSERT_CU(cuMemsetD32(p, 0xdeadbeef, kMiB));
  std::vector<unsigned> words(kMiB);
  ASSERT_CU(cuMemcpyDtoH(words.data(), p, 4 * kMiB));
  for (unsigned w : {words.front(), words[12345], words.back()}) EXPECT_EQ(w, 0xdeadbeefu);
  ASSERT_CU(cuMemsetD16Async(p + 2, 0x0102, 3, nullptr));
  unsigned short halves[5] = {};
  ASSERT_CU(cuMemcpyDtoH(halves, p, sizeof halves));
  EXPECT_EQ(halves[0], 0xbeef);
  EXPECT_EQ(halves[1], 0x0102);
  EXPECT_EQ(halves[3], 0x0102);
  EXPECT_EQ(halves[4], 0xbeef);
  // Zero on D32 still punches holes: a large zero fill of an allocation leaves it reading zero.
  ASSERT_CU(cuMemsetD32(p, 0, kMiB));
  ASSERT_CU(cuMemcpyDtoH(words.data(), p, 4 * kMiB));
  EXPECT_EQ(words[777], 0u);
  ASSERT_CU(cuMemFree(p));
}

TEST_F(Breadth, Copy2DMovesRowsBetweenPitches) {
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc(&p, 4096));
  ASSERT_CU(cuMemsetD8(p, 0, 4096));
  unsigned char src[4][8];
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 8; ++c) src[r][c] = static_cast<unsigned char>(r * 8 + c);
  CUDA_MEMCPY2D m{};
  m.srcMemoryType = CU_MEMORYTYPE_HOST;
  m.srcHost = src;
  m.srcPitch = 8;
  m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  m.dstDevice = p;
  m.dstPitch = 256;
  m.dstXInBytes = 4;
  m.WidthInBytes = 8;
  m.Height = 4;
  ASSERT_CU(cuMemcpy2D(&m));
  unsigned char row[16] = {};
  ASSERT_CU(cuMemcpyDtoH(row, p + 3 * 256, sizeof row));
  EXPECT_EQ(row[3], 0);
  EXPECT_EQ(row[4], 24);
  EXPECT_EQ(row[11], 31);
  EXPECT_EQ(row[12], 0);
  m.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  EXPECT_EQ(cuMemcpy2D(&m), CUDA_ERROR_NOT_SUPPORTED) << "arrays are not simulated";
  ASSERT_CU(cuMemFree(p));
}

TEST_F(Breadth, PinnedHostMemoryAnswersPointerQueriesAsHostMemory) {
  void* pinned = nullptr;
  ASSERT_CU(cuMemAllocHost(&pinned, 3 * 4096));
  const auto at = reinterpret_cast<CUdeviceptr>(pinned) + 4096;
  unsigned type = 0;
  ASSERT_CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, at));
  EXPECT_EQ(type, static_cast<unsigned>(CU_MEMORYTYPE_HOST));
  CUdeviceptr start = 0;
  size_t size = 0;
  ASSERT_CU(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, at));
  ASSERT_CU(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, at));
  EXPECT_EQ(start, reinterpret_cast<CUdeviceptr>(pinned));
  EXPECT_EQ(size, 3u * 4096);
  EXPECT_EQ(simcuda_device_used_bytes(0), 0u) << "pinned memory is host memory";
  ASSERT_CU(cuMemFreeHost(pinned));
  EXPECT_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, at), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(Breadth, IpcExportKeepsTheAllocationsContentsAndZeroFills) {
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc(&p, 4 * kMiB));
  ASSERT_CU(cuMemsetD8(p + kMiB, 0x6b, kMiB));
  CUipcMemHandle h;
  ASSERT_CU(cuIpcGetMemHandle(&h, p));  // the allocation moves into shared memory here
  unsigned char byte = 0;
  ASSERT_CU(cuMemcpyDtoH(&byte, p + 2 * kMiB - 1, 1));
  EXPECT_EQ(byte, 0x6b);
  ASSERT_CU(cuMemsetD8(p, 0, 4 * kMiB));  // punches the shared file, not just the mapping
  ASSERT_CU(cuMemcpyDtoH(&byte, p + 2 * kMiB - 1, 1));
  EXPECT_EQ(byte, 0);
  CUdeviceptr opened = 0;
  EXPECT_EQ(cuIpcOpenMemHandle(&opened, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_CONTEXT)
      << "the exporting process cannot open its own handle";
  ASSERT_CU(cuMemFree(p));
  EXPECT_EQ(simcuda_device_used_bytes(0), 0u);
}

TEST_F(Breadth, PoolsKeepIdleMemoryUnderTheirReleaseThresholdAndTrim) {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool = nullptr;
  ASSERT_CU(cuMemPoolCreate(&pool, &props));
  cuuint64_t threshold = 8 * kMiB;
  ASSERT_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
  CUdeviceptr a = 0, b = 0;
  ASSERT_CU(cuMemAllocFromPoolAsync(&a, 4 * kMiB, pool, nullptr));
  ASSERT_CU(cuMemAllocFromPoolAsync(&b, 6 * kMiB, pool, nullptr));
  cuuint64_t used = 0, reserved = 0, high = 0;
  ASSERT_CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
  EXPECT_EQ(used, 10 * kMiB);
  ASSERT_CU(cuMemFreeAsync(a, nullptr));
  ASSERT_CU(cuMemFreeAsync(b, nullptr));  // 4 MiB idle fits under 8, the next 6 do not
  ASSERT_CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
  ASSERT_CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
  ASSERT_CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &high));
  EXPECT_EQ(used, 0u);
  EXPECT_EQ(reserved, 4 * kMiB);
  EXPECT_EQ(high, 10 * kMiB);
  EXPECT_EQ(simcuda_device_used_bytes(0), 4 * kMiB) << "idle pool memory stays charged to the device";
  // Reusing idle memory charges nothing new.
  ASSERT_CU(cuMemAllocFromPoolAsync(&a, 2 * kMiB, pool, nullptr));
  EXPECT_EQ(simcuda_device_used_bytes(0), 4 * kMiB);
  ASSERT_CU(cuMemFreeAsync(a, nullptr));
  ASSERT_CU(cuMemPoolTrimTo(pool, kMiB));
  ASSERT_CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
  EXPECT_EQ(reserved, kMiB);
  ASSERT_CU(cuMemPoolTrimTo(pool, 0));
  EXPECT_EQ(simcuda_device_used_bytes(0), 0u);
  cuuint64_t nonzero = 1;
  EXPECT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &nonzero), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuMemPoolDestroy(pool));
  EXPECT_EQ(cuMemPoolTrimTo(pool, 0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(Breadth, CurrentPoolServesCuMemAllocAsyncAndDestroyWaitsForItsAllocations) {
  CUmemoryPool def = nullptr, current = nullptr, pool = nullptr;
  ASSERT_CU(cuDeviceGetDefaultMemPool(&def, 0));
  ASSERT_CU(cuDeviceGetMemPool(&current, 0));
  EXPECT_EQ(def, current);
  EXPECT_EQ(cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE) << "the default pool cannot be destroyed";
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.maxSize = 4 * kMiB;
  ASSERT_CU(cuMemPoolCreate(&pool, &props));
  ASSERT_CU(cuDeviceSetMemPool(0, pool));
  CUdeviceptr p = 0, q = 0;
  ASSERT_CU(cuMemAllocAsync(&p, 3 * kMiB, nullptr));
  cuuint64_t used = 0;
  ASSERT_CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
  EXPECT_EQ(used, 4 * kMiB);
  EXPECT_EQ(cuMemAllocAsync(&q, kMiB, nullptr), CUDA_ERROR_OUT_OF_MEMORY) << "past the pool's maxSize";
  ASSERT_CU(cuMemPoolDestroy(pool));
  ASSERT_CU(cuDeviceGetMemPool(&current, 0));
  EXPECT_EQ(current, def) << "the device falls back to its default pool";
  EXPECT_EQ(simcuda_device_used_bytes(0), 4 * kMiB) << "an outstanding allocation outlives its pool's destruction";
  ASSERT_CU(cuMemFreeAsync(p, nullptr));
  EXPECT_EQ(simcuda_device_used_bytes(0), 0u);
}

}  // namespace

namespace {

class CreatedContexts : public SimDriver {};

// cuCtxCreate pushes a new context over the current one; cuCtxDestroy frees its cuMemAlloc, managed and
// pinned memory (not pool memory) and pops it, so the primary context is current again.
TEST_F(CreatedContexts, CreateIsAPushAndDestroyFreesItsMemoryAndPops) {
  Restart("SIMCUDA_CONTEXT_BYTES=4MiB");
  const unsigned long long with_primary = simcuda_device_used_bytes(0);
  CUdeviceptr primary_memory = 0;
  ASSERT_CU(cuMemAlloc(&primary_memory, kMiB));
  CUcontext created = nullptr, current = nullptr;
  ASSERT_CU(cuCtxCreate_v4(&created, nullptr, CU_CTX_SCHED_YIELD, 0));
  EXPECT_NE(created, ctx_);
  ASSERT_CU(cuCtxGetCurrent(&current));
  EXPECT_EQ(current, created);
  unsigned flags = 0;
  ASSERT_CU(cuCtxGetFlags(&flags));
  EXPECT_EQ(flags, static_cast<unsigned>(CU_CTX_SCHED_YIELD));
  CUdevice dev = -1;
  ASSERT_CU(cuCtxGetDevice(&dev));
  EXPECT_EQ(dev, 0);
  EXPECT_EQ(simcuda_device_used_bytes(0), with_primary + 2 * kMiB + 4 * kMiB) << "the context's own bytes";

  CUdeviceptr own = 0, managed = 0, pooled = 0;
  void* pinned = nullptr;
  ASSERT_CU(cuMemAlloc(&own, kMiB));
  ASSERT_CU(cuMemAllocManaged(&managed, kMiB, CU_MEM_ATTACH_GLOBAL));
  ASSERT_CU(cuMemHostAlloc(&pinned, 4096, 0));
  ASSERT_CU(cuMemAllocAsync(&pooled, kMiB, nullptr));
  CUcontext owner = nullptr;
  ASSERT_CU(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, own));
  EXPECT_EQ(owner, created);

  // A primary-context reset leaves the created context's memory alone.
  ASSERT_CU(cuDevicePrimaryCtxReset(0));
  CUdeviceptr base = 0;
  size_t size = 0;
  EXPECT_CU(cuMemGetAddressRange(&base, &size, own));
  EXPECT_EQ(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange(&base, &size, primary_memory)) << "the reset freed it";

  // Popped and pushed like any context.
  CUcontext popped = nullptr;
  ASSERT_CU(cuCtxPopCurrent(&popped));
  EXPECT_EQ(popped, created);
  ASSERT_CU(cuCtxGetCurrent(&current));
  EXPECT_EQ(current, ctx_);
  ASSERT_CU(cuCtxPushCurrent(created));

  ASSERT_CU(cuCtxDestroy_v2(created));
  ASSERT_CU(cuCtxGetCurrent(&current));
  EXPECT_EQ(current, ctx_) << "destroying the current context pops it";
  EXPECT_EQ(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange(&base, &size, own));
  EXPECT_EQ(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange(&base, &size, managed));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemFreeHost(pinned)) << "freed with its context";
  EXPECT_CU(cuMemGetAddressRange(&base, &size, pooled)) << "pool memory outlives the context (cuda.h)";
  ASSERT_CU(cuMemFreeAsync(pooled, nullptr));
  EXPECT_EQ(simcuda_device_used_bytes(0), with_primary);
  EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT, cuCtxPushCurrent(created));
  EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT, cuCtxSetCurrent(created));
  EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT, cuCtxDestroy_v2(created)) << "destroyed twice";
  EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT, cuCtxDestroy_v2(ctx_)) << "a primary context is released, not destroyed";
}

// A context destroyed by one thread stays current to another, which gets CONTEXT_IS_DESTROYED (cuda.h).
TEST_F(CreatedContexts, AnotherThreadsCurrentContextIsDestroyedUnderIt) {
  CUcontext created = nullptr;
  ASSERT_CU(cuCtxCreate_v4(&created, nullptr, 0, 0));
  ASSERT_CU(cuCtxPopCurrent(nullptr));
  CUresult before = CUDA_ERROR_UNKNOWN, after = CUDA_ERROR_UNKNOWN;
  std::mutex m;
  std::condition_variable cv;
  int step = 0;
  std::thread other([&] {
    cuCtxSetCurrent(created);
    CUdeviceptr p = 0;
    before = cuMemAlloc(&p, kMiB);
    if (before == CUDA_SUCCESS) cuMemFree(p);
    {
      std::unique_lock<std::mutex> lock(m);
      step = 1;
      cv.notify_all();
      cv.wait(lock, [&] { return step == 2; });
    }
    after = cuMemAlloc(&p, kMiB);
  });
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return step == 1; });
  }
  ASSERT_CU(cuCtxDestroy_v2(created));
  {
    std::lock_guard<std::mutex> lock(m);
    step = 2;
  }
  cv.notify_all();
  other.join();
  EXPECT_EQ(before, CUDA_SUCCESS);
  EXPECT_EQ(after, CUDA_ERROR_CONTEXT_IS_DESTROYED);
}

TEST_F(CreatedContexts, EveryAbiCreatesAndExecutionAffinityNeedsMps) {
  using CreateV2 = CUresult(CUcontext*, unsigned int, CUdevice);
  using CreateV3 = CUresult(CUcontext*, CUexecAffinityParam*, int, unsigned int, CUdevice);
  for (const char* name : {"cuCtxCreate", "cuCtxCreate_v2"}) {
    auto* create = reinterpret_cast<CreateV2*>(dlsym(RTLD_DEFAULT, name));
    ASSERT_NE(create, nullptr) << name;
    CUcontext c = nullptr;
    ASSERT_CU(create(&c, CU_CTX_MAP_HOST, 0));
    EXPECT_CU(cuCtxDestroy_v2(c)) << name;
  }
  auto* create_v3 = reinterpret_cast<CreateV3*>(dlsym(RTLD_DEFAULT, "cuCtxCreate_v3"));
  ASSERT_NE(create_v3, nullptr);
  CUcontext c = nullptr;
  ASSERT_CU(create_v3(&c, nullptr, 0, 0, 0));
  EXPECT_CU(cuCtxDestroy_v2(c));
  CUexecAffinityParam affinity{};
  affinity.type = CU_EXEC_AFFINITY_TYPE_SM_COUNT;
  affinity.param.smCount.val = 16;
  EXPECT_EQ(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, create_v3(&c, &affinity, 1, 0, 0));
  CUcontext current = nullptr;
  ASSERT_CU(cuCtxGetCurrent(&current));
  EXPECT_EQ(current, ctx_) << "failed creations push nothing";
}

}  // namespace
