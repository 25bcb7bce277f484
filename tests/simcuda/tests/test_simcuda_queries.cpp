// The simulated driver's answers to queries about what a program created (handle properties, access, a
// stream's context, a graph's nodes), and the allocation-bounds and pointer-attribute rules the conformance
// suite checks against the documentation.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <thread>

#include "simcuda_fixture.h"

using QueryTest = SimDriver;

namespace {

CUmemLocation Device(int id = 0) {
  CUmemLocation loc{};
  loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
  loc.id = id;
  return loc;
}

}  // namespace

// cuMemAlloc charges whole granules, but only the bytes asked for are the allocation: a memset or copy
// reaching into the rounding is outside it.
TEST_F(QueryTest, MemsetsAndCopiesStopAtTheRequestedBytesNotTheGranularityPadding) {
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc(&p, 4096));
  EXPECT_EQ(Used(), 2 * kMiB) << "charged a whole granule";
  ASSERT_CU(cuMemsetD8(p, 0x11, 4096));
  ASSERT_CU(cuMemsetD8(p + 4095, 0x22, 1));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemsetD8(p, 0, 4097));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemsetD8(p + 4096, 0, 1)) << "entirely in the padding";
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemsetD32(p + 4092, 0, 2));
  unsigned char host[8] = {};
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(p + 4092, host, 8));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(host, p + 4092, 8));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoD(p, p + 4090, 8));
  ASSERT_CU(cuMemcpyDtoH(host, p + 4092, 4));
  EXPECT_EQ(host[3], 0x22);
  EXPECT_EQ(host[0], 0x11);
  ASSERT_CU(cuMemFree(p));
}

// cuda.h: cuPointerGetAttributes, unlike cuPointerGetAttribute, succeeds on a pointer that is not a CUDA
// pointer and gives every attribute its default NULL value.
TEST_F(QueryTest, PointerGetAttributesOnAHostPointerSucceedsWithDefaults) {
  long long on_stack = 0;
  const auto ptr = reinterpret_cast<CUdeviceptr>(&on_stack);
  unsigned memory_type = 77;
  CUcontext context = reinterpret_cast<CUcontext>(&on_stack);
  unsigned long long buffer_id = 77;
  int is_managed = 77;
  CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT,
                                      CU_POINTER_ATTRIBUTE_BUFFER_ID, CU_POINTER_ATTRIBUTE_IS_MANAGED};
  void* data[] = {&memory_type, &context, &buffer_id, &is_managed};
  ASSERT_CU(cuPointerGetAttributes(4, attributes, data, ptr));
  EXPECT_EQ(memory_type, 0u);
  EXPECT_EQ(context, nullptr);
  EXPECT_EQ(buffer_id, 0u);
  EXPECT_EQ(is_managed, 0);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuPointerGetAttribute(&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr))
      << "the single-attribute form still refuses it";
  void* with_null[] = {&memory_type, nullptr, &buffer_id, &is_managed};
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuPointerGetAttributes(4, attributes, with_null, ptr));
  CUpointer_attribute unknown[] = {static_cast<CUpointer_attribute>(0x7fffffff)};
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuPointerGetAttributes(1, unknown, data, ptr));
}

TEST_F(QueryTest, PropertiesFromAHandleAreThoseItWasCreatedWith) {
  CUmemAllocationProp prop = DeviceProp();
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  prop.allocFlags.gpuDirectRDMACapable = 1;
  CUmemGenericAllocationHandle h = 0;
  ASSERT_CU(cuMemCreate(&h, 2 * kMiB, &prop, 0));
  CUmemAllocationProp got;
  std::memset(&got, 0xff, sizeof got);
  ASSERT_CU(cuMemGetAllocationPropertiesFromHandle(&got, h));
  EXPECT_EQ(got.type, CU_MEM_ALLOCATION_TYPE_PINNED);
  EXPECT_EQ(got.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
  EXPECT_EQ(got.location.id, 0);
  EXPECT_EQ(got.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  EXPECT_EQ(got.allocFlags.gpuDirectRDMACapable, 1);
  EXPECT_EQ(got.win32HandleMetaData, nullptr) << "fields not set at creation read 0";

  CUmemAllocationProp host_prop{};
  host_prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  host_prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  host_prop.location.id = 0;
  CUmemGenericAllocationHandle host = 0;
  ASSERT_CU(cuMemCreate(&host, 2 * kMiB, &host_prop, 0));
  ASSERT_CU(cuMemGetAllocationPropertiesFromHandle(&got, host));
  EXPECT_EQ(got.location.type, CU_MEM_LOCATION_TYPE_HOST_NUMA);
  EXPECT_EQ(got.requestedHandleTypes, CU_MEM_HANDLE_TYPE_NONE);
  EXPECT_EQ(got.allocFlags.gpuDirectRDMACapable, 0);

  // A retained reference keeps a released handle queryable; the last release ends it.
  const CUdeviceptr va = Reserve(2 * kMiB);
  MapRW(va, 2 * kMiB, host);
  CUmemGenericAllocationHandle retained = 0;
  ASSERT_CU(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(va)));
  ASSERT_CU(cuMemRelease(host));
  EXPECT_CU(cuMemGetAllocationPropertiesFromHandle(&got, host));
  ASSERT_CU(cuMemRelease(retained));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemGetAllocationPropertiesFromHandle(&got, host)) << "every reference released";
  ASSERT_CU(cuMemUnmap(va, 2 * kMiB));
  ASSERT_CU(cuMemAddressFree(va, 2 * kMiB));
  ASSERT_CU(cuMemRelease(h));
}

// The importing process learns what the exporter created, not what the importer would have.
TEST_F(QueryTest, AnImportedHandleReportsTheExportersProperties) {
  CUmemAllocationProp prop = DeviceProp();
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  prop.allocFlags.gpuDirectRDMACapable = 1;
  CUmemGenericAllocationHandle h = 0;
  ASSERT_CU(cuMemCreate(&h, 2 * kMiB, &prop, 0));
  int fd = -1;
  ASSERT_CU(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Exit codes: 0 ok; 1..4 which step failed.
    CUcontext c = nullptr;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&c, 0) != CUDA_SUCCESS || cuCtxSetCurrent(c) != CUDA_SUCCESS)
      _exit(1);
    CUmemGenericAllocationHandle imported = 0;
    if (cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != CUDA_SUCCESS)
      _exit(2);
    CUmemAllocationProp got{};
    if (cuMemGetAllocationPropertiesFromHandle(&got, imported) != CUDA_SUCCESS) _exit(3);
    const bool same = got.type == CU_MEM_ALLOCATION_TYPE_PINNED && got.location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
                      got.location.id == 0 && got.requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR &&
                      got.allocFlags.gpuDirectRDMACapable == 1;
    _exit(same ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  close(fd);
  ASSERT_CU(cuMemRelease(h));
}

TEST_F(QueryTest, GetAccessAnswersPerLocationWhatSetAccessGranted) {
  ASSERT_EQ(0, simcuda_reset((std::string(kBase) + " SIMCUDA_DEVICE_COUNT=2").c_str()));
  ASSERT_CU(cuInit(0));
  ASSERT_CU(cuDevicePrimaryCtxRetain(&ctx_, 0));
  ASSERT_CU(cuCtxSetCurrent(ctx_));
  const CUdeviceptr va = Reserve(6 * kMiB);
  const CUmemGenericAllocationHandle a = Create(2 * kMiB);
  const CUmemGenericAllocationHandle b = Create(2 * kMiB);
  ASSERT_CU(cuMemMap(va, 2 * kMiB, 0, a, 0));
  ASSERT_CU(cuMemMap(va + 2 * kMiB, 2 * kMiB, 0, b, 0));
  unsigned long long flags = 99;
  const CUmemLocation dev0 = Device(0);
  const CUmemLocation dev1 = Device(1);
  ASSERT_CU(cuMemGetAccess(&flags, &dev0, va + 12345));
  EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_NONE) << "mapped, no access granted yet";
  CUmemAccessDesc desc[2] = {ReadWrite(0), ReadWrite(1)};
  desc[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
  ASSERT_CU(cuMemSetAccess(va, 4 * kMiB, desc, 2));  // one call over both mappings
  ASSERT_CU(cuMemGetAccess(&flags, &dev0, va + 3 * kMiB));
  EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  ASSERT_CU(cuMemGetAccess(&flags, &dev1, va + 3 * kMiB));
  EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_READ);
  CUmemLocation host{};
  host.type = CU_MEM_LOCATION_TYPE_HOST;
  ASSERT_CU(cuMemGetAccess(&flags, &host, va));
  EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_NONE) << "never granted to the host";
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuMemGetAccess(&flags, &dev0, va + 4 * kMiB)) << "reserved, not mapped";
  // Unmapping forgets the grants: a new mapping at the same address starts without access.
  ASSERT_CU(cuMemUnmap(va, 2 * kMiB));
  ASSERT_CU(cuMemMap(va, 2 * kMiB, 0, a, 0));
  ASSERT_CU(cuMemGetAccess(&flags, &dev0, va));
  EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_NONE);
  ASSERT_CU(cuMemUnmap(va, 4 * kMiB));
  ASSERT_CU(cuMemRelease(a));
  ASSERT_CU(cuMemRelease(b));
  ASSERT_CU(cuMemAddressFree(va, 6 * kMiB));
}

TEST_F(QueryTest, StreamGetCtxAnswersTheCreatingContextOrTheCurrentOne) {
  CUstream s = nullptr;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUcontext created = nullptr;
  ASSERT_CU(cuCtxCreate(&created, nullptr, 0, 0));  // now current
  CUstream in_created = nullptr;
  ASSERT_CU(cuStreamCreate(&in_created, 0));
  CUcontext got = nullptr;
  ASSERT_CU(cuStreamGetCtx(s, &got));
  EXPECT_EQ(got, ctx_) << "the context the stream was created in, not the current one";
  ASSERT_CU(cuStreamGetCtx(in_created, &got));
  EXPECT_EQ(got, created);
  for (CUstream special : {static_cast<CUstream>(nullptr), CU_STREAM_LEGACY, CU_STREAM_PER_THREAD}) {
    got = nullptr;
    ASSERT_CU(cuStreamGetCtx(special, &got));
    EXPECT_EQ(got, created) << "a special stream answers the current context";
  }
  CUgreenCtx green = reinterpret_cast<CUgreenCtx>(&got);
  ASSERT_CU(cuStreamGetCtx_v2(s, &got, &green));
  EXPECT_EQ(got, ctx_);
  EXPECT_EQ(green, nullptr);
  // Another thread with no current context: a created stream still answers, a special one cannot.
  CUresult own = CUDA_ERROR_UNKNOWN, special = CUDA_ERROR_UNKNOWN;
  CUcontext from_thread = nullptr;
  std::thread([&] {
    own = cuStreamGetCtx(s, &from_thread);
    CUcontext unused = nullptr;
    special = cuStreamGetCtx(nullptr, &unused);
  }).join();
  EXPECT_EQ(own, CUDA_SUCCESS);
  EXPECT_EQ(from_thread, ctx_);
  EXPECT_EQ(special, CUDA_ERROR_INVALID_CONTEXT);
  ASSERT_CU(cuStreamDestroy(in_created));
  ASSERT_CU(cuCtxDestroy(created));
  ASSERT_CU(cuCtxSetCurrent(ctx_));
  EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, cuStreamGetCtx(in_created, &got)) << "destroyed stream";
  ASSERT_CU(cuStreamDestroy(s));
}

TEST_F(QueryTest, GraphGetNodesCountsAndFillsAsDocumented) {
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc(&p, 4096));
  CUstream s = nullptr;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  for (int i = 0; i < 3; ++i) ASSERT_CU(cuMemsetD8Async(p + i, static_cast<unsigned char>(i), 1, s));
  CUgraph g = nullptr;
  ASSERT_CU(cuStreamEndCapture(s, &g));
  size_t count = 0;
  ASSERT_CU(cuGraphGetNodes(g, nullptr, &count));
  EXPECT_EQ(count, 3u);
  CUgraphNode nodes[5];
  for (CUgraphNode& n : nodes) n = reinterpret_cast<CUgraphNode>(&count);
  size_t asked = 5;
  ASSERT_CU(cuGraphGetNodes(g, nodes, &asked));
  EXPECT_EQ(asked, 3u) << "the number actually obtained";
  EXPECT_NE(nodes[0], nullptr);
  EXPECT_NE(nodes[0], nodes[1]);
  EXPECT_NE(nodes[1], nodes[2]);
  EXPECT_EQ(nodes[3], nullptr) << "entries past the graph's nodes are NULL";
  EXPECT_EQ(nodes[4], nullptr);
  CUgraphNode first[2] = {};
  asked = 1;
  ASSERT_CU(cuGraphGetNodes(g, first, &asked));
  EXPECT_EQ(asked, 1u);
  EXPECT_EQ(first[0], nodes[0]) << "the same node, the same handle";
  EXPECT_EQ(first[1], nullptr) << "nothing written past numNodes";
  ASSERT_CU(cuGraphDestroy(g));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuGraphGetNodes(g, nullptr, &count)) << "destroyed graph";
  ASSERT_CU(cuStreamDestroy(s));
  ASSERT_CU(cuMemFree(p));
}

// cuda.h: CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE is the pool an allocation came from, NULL for other memory.
TEST_F(QueryTest, MempoolHandleAttributeNamesThePoolOrNull) {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUmemoryPool pool = nullptr, def = nullptr, got = reinterpret_cast<CUmemoryPool>(&props);
  ASSERT_CU(cuMemPoolCreate(&pool, &props));
  ASSERT_CU(cuDeviceGetDefaultMemPool(&def, 0));
  CUdeviceptr from_pool = 0, from_default = 0, plain = 0;
  ASSERT_CU(cuMemAllocFromPoolAsync(&from_pool, 4096, pool, nullptr));
  ASSERT_CU(cuMemAllocAsync(&from_default, 4096, nullptr));
  ASSERT_CU(cuMemAlloc(&plain, 4096));
  ASSERT_CU(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, from_pool + 100));
  EXPECT_EQ(got, pool);
  ASSERT_CU(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, from_default));
  EXPECT_EQ(got, def);
  ASSERT_CU(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, plain));
  EXPECT_EQ(got, nullptr);
  ASSERT_CU(cuMemFreeAsync(from_pool, nullptr));
  ASSERT_CU(cuMemFreeAsync(from_default, nullptr));
  ASSERT_CU(cuMemFree(plain));
  ASSERT_CU(cuMemPoolDestroy(pool));
}
