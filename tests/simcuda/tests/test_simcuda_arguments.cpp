// Bad arguments to every export of the simulated driver: each call returns the error the CUDA
// driver documents (cuda.h) and changes nothing, instead of crashing, hanging or corrupting state.
//
// The table names every exported cu* function; ArgumentCoverage.EveryExportHasCases reads the
// library's dynamic symbol table so that a new export without cases fails here.
#include <dlfcn.h>
#include <elf.h>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "argument_sweep.h"
#include "simcuda_fixture.h"

// Exports cuda.h renames or does not declare in its default mode, with their own ABIs.
using GraphInstantiateLegacyFn = CUresult(CUgraphExec*, CUgraph, CUgraphNode*, char*, size_t);
using GetProcAddress11030Fn = CUresult(const char*, void**, int, cuuint64_t);
using CaptureInfoV2Fn = CUresult(CUstream, CUstreamCaptureStatus*, cuuint64_t*, CUgraph*, const CUgraphNode**, size_t*);
using CtxCreateV2Fn = CUresult(CUcontext*, unsigned int, CUdevice);  // also the CUDA 2.0 cuCtxCreate
using CtxCreateV3Fn = CUresult(CUcontext*, CUexecAffinityParam*, int, unsigned int, CUdevice);

// The kernel the table's module launches (found by the simulator with dlsym, hence exported).
extern "C" __attribute__((visibility("default"))) void simcuda_kernel_arguments_noop(void** params) { (void)params; }

namespace {

const char* const kPtx = R"(
.version 8.0
.target sm_90
.address_size 64
.visible .entry arguments_noop(
  .param .u64 arguments_noop_param_0
)
{
  ret;
}
)";

constexpr size_t kGranule = 2 * kMiB;
// Longer than all the device memory a case's Env holds together, so that such a range is never wholly
// known however the allocation and the reservation happen to lie next to each other.
constexpr size_t kPastEverything = 8 * kGranule;
constexpr size_t kHuge = SIZE_MAX;
// A multiple of the granularity that no address space holds and that wraps when aligned up.
constexpr size_t kHugeGranules = SIZE_MAX - kGranule + 1;

// Valid objects the cases refer to, and handles the driver never gave out.
struct Env {
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  CUdeviceptr alloc = 0;  // cuMemAlloc, kAllocBytes
  CUdeviceptr va = 0;     // reservation of 2 granules, the first mapped read/write
  CUmemGenericAllocationHandle handle = 0;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  CUlibrary library = nullptr;
  CUkernel kernel = nullptr;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  unsigned char host[4096] = {};
  // Addresses of this object: never a handle of the driver's.
  long long bogus_storage[4] = {};
  template <typename T>
  T bogus() {
    return reinterpret_cast<T>(&bogus_storage[1]);
  }
};
constexpr size_t kAllocBytes = 4096;

using Case = kvremap::testing::ArgumentCase<CUresult, Env>;
using kvremap::testing::out_of_range;

template <typename Fn, typename Call>
void add(std::vector<Case>& out, std::initializer_list<const char*> names, const char* bad, CUresult expected,
         Call call) {
  kvremap::testing::add_argument_cases<Fn>(out, "libcuda.so.1", names, bad, expected, CUDA_ERROR_NOT_FOUND, call);
}

constexpr CUresult kValue = CUDA_ERROR_INVALID_VALUE;
constexpr CUresult kHandle = CUDA_ERROR_INVALID_HANDLE;
constexpr CUresult kDevice = CUDA_ERROR_INVALID_DEVICE;
constexpr CUresult kContext = CUDA_ERROR_INVALID_CONTEXT;
constexpr CUresult kMemory = CUDA_ERROR_OUT_OF_MEMORY;

CUmemAllocationProp device_prop(int device = 0) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

void add_core_cases(std::vector<Case>& c) {
  add<decltype(cuInit)>(c, {"cuInit"}, "unknown flags", kValue, [](auto f, Env&) { return f(1); });
  add<decltype(cuDriverGetVersion)>(c, {"cuDriverGetVersion"}, "NULL version", kValue,
                                    [](auto f, Env&) { return f(nullptr); });
  add<decltype(cuDeviceGetCount)>(c, {"cuDeviceGetCount"}, "NULL count", kValue,
                                  [](auto f, Env&) { return f(nullptr); });
  add<decltype(cuDeviceGet)>(c, {"cuDeviceGet"}, "NULL device", kValue, [](auto f, Env&) { return f(nullptr, 0); });
  add<decltype(cuDeviceGet)>(c, {"cuDeviceGet"}, "ordinal 1 of 1", kDevice, [](auto f, Env&) {
    CUdevice d = 0;
    return f(&d, 1);
  });
  add<decltype(cuDeviceGet)>(c, {"cuDeviceGet"}, "ordinal -1", kDevice, [](auto f, Env&) {
    CUdevice d = 0;
    return f(&d, -1);
  });
  add<decltype(cuDeviceGetName)>(c, {"cuDeviceGetName"}, "NULL name", kValue,
                                 [](auto f, Env&) { return f(nullptr, 64, 0); });
  add<decltype(cuDeviceGetName)>(c, {"cuDeviceGetName"}, "length 0", kValue, [](auto f, Env&) {
    char name[8];
    return f(name, 0, 0);
  });
  add<decltype(cuDeviceGetName)>(c, {"cuDeviceGetName"}, "bad ordinal", kDevice, [](auto f, Env&) {
    char name[64];
    return f(name, 64, 7);
  });
  add<decltype(cuDeviceTotalMem_v2)>(c, {"cuDeviceTotalMem_v2"}, "NULL bytes", kValue,
                                     [](auto f, Env&) { return f(nullptr, 0); });
  add<decltype(cuDeviceTotalMem_v2)>(c, {"cuDeviceTotalMem_v2"}, "bad ordinal", kDevice, [](auto f, Env&) {
    size_t bytes = 0;
    return f(&bytes, -3);
  });
  add<decltype(cuDeviceGetAttribute)>(c, {"cuDeviceGetAttribute"}, "NULL value", kValue,
                                      [](auto f, Env&) { return f(nullptr, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0); });
  add<decltype(cuDeviceGetAttribute)>(c, {"cuDeviceGetAttribute"}, "attribute out of range", kValue, [](auto f, Env&) {
    int v = 0;
    return f(&v, out_of_range<CUdevice_attribute>(), 0);
  });
  add<decltype(cuDeviceGetAttribute)>(c, {"cuDeviceGetAttribute"}, "attribute 0", kValue, [](auto f, Env&) {
    int v = 0;
    return f(&v, static_cast<CUdevice_attribute>(0), 0);
  });
  add<decltype(cuDeviceGetAttribute)>(c, {"cuDeviceGetAttribute"}, "bad ordinal", kDevice, [](auto f, Env&) {
    int v = 0;
    return f(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 1);
  });
  add<decltype(cuDevicePrimaryCtxRetain)>(c, {"cuDevicePrimaryCtxRetain"}, "NULL context", kValue,
                                          [](auto f, Env&) { return f(nullptr, 0); });
  add<decltype(cuDevicePrimaryCtxRetain)>(c, {"cuDevicePrimaryCtxRetain"}, "bad ordinal", kDevice, [](auto f, Env&) {
    CUcontext ctx = nullptr;
    return f(&ctx, 16);
  });
  add<decltype(cuDevicePrimaryCtxRelease_v2)>(c, {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"},
                                              "bad ordinal", kDevice, [](auto f, Env&) { return f(-1); });
  add<decltype(cuCtxGetCurrent)>(c, {"cuCtxGetCurrent"}, "NULL context", kValue,
                                 [](auto f, Env&) { return f(nullptr); });
  add<decltype(cuCtxSetCurrent)>(c, {"cuCtxSetCurrent"}, "unknown context", kContext,
                                 [](auto f, Env& e) { return f(e.bogus<CUcontext>()); });
  add<decltype(cuCtxGetDevice)>(c, {"cuCtxGetDevice"}, "NULL device", kValue, [](auto f, Env&) { return f(nullptr); });
  add<decltype(cuCtxGetDevice_v2)>(c, {"cuCtxGetDevice_v2"}, "NULL device", kValue,
                                   [](auto f, Env& e) { return f(nullptr, e.ctx); });
  add<decltype(cuCtxGetDevice_v2)>(c, {"cuCtxGetDevice_v2"}, "unknown context", kContext, [](auto f, Env& e) {
    CUdevice d = 0;
    return f(&d, e.bogus<CUcontext>());
  });
  add<decltype(cuCtxSynchronize)>(c, {"cuCtxSynchronize"}, "no current context", kContext, [](auto f, Env&) {
    cuCtxSetCurrent(nullptr);
    return f();
  });
  add<decltype(cuCtxSynchronize_v2)>(c, {"cuCtxSynchronize_v2"}, "unknown context", kContext,
                                     [](auto f, Env& e) { return f(e.bogus<CUcontext>()); });
  add<decltype(cuGetErrorName)>(c, {"cuGetErrorName"}, "NULL name", kValue,
                                [](auto f, Env&) { return f(CUDA_SUCCESS, nullptr); });
  add<decltype(cuGetErrorName)>(c, {"cuGetErrorName"}, "error out of range", kValue, [](auto f, Env&) {
    const char* name = "";
    return f(out_of_range<CUresult>(), &name);
  });
  add<decltype(cuGetErrorString)>(c, {"cuGetErrorString"}, "NULL text", kValue,
                                  [](auto f, Env&) { return f(CUDA_SUCCESS, nullptr); });
  add<decltype(cuGetErrorString)>(c, {"cuGetErrorString"}, "error out of range", kValue, [](auto f, Env&) {
    const char* text = "";
    return f(out_of_range<CUresult>(), &text);
  });

  add<decltype(cuGetProcAddress_v2)>(c, {"cuGetProcAddress_v2"}, "NULL symbol", kValue, [](auto f, Env&) {
    void* p = nullptr;
    return f(nullptr, &p, 12000, 0, nullptr);
  });
  add<decltype(cuGetProcAddress_v2)>(c, {"cuGetProcAddress_v2"}, "NULL pfn", kValue,
                                     [](auto f, Env&) { return f("cuInit", nullptr, 12000, 0, nullptr); });
  add<decltype(cuGetProcAddress_v2)>(c, {"cuGetProcAddress_v2"}, "unknown flags", kValue, [](auto f, Env&) {
    void* p = nullptr;
    return f("cuInit", &p, 12000, 1ULL << 40, nullptr);
  });
  add<decltype(cuGetProcAddress_v2)>(c, {"cuGetProcAddress_v2"}, "version -1", kValue, [](auto f, Env&) {
    void* p = nullptr;
    return f("cuInit", &p, -1, 0, nullptr);
  });
  add<GetProcAddress11030Fn>(c, {"cuGetProcAddress"}, "NULL symbol", kValue, [](auto f, Env&) {
    void* p = nullptr;
    return f(nullptr, &p, 12000, 0);
  });
  add<GetProcAddress11030Fn>(c, {"cuGetProcAddress"}, "NULL pfn", kValue,
                             [](auto f, Env&) { return f("cuInit", nullptr, 12000, 0); });
}

void add_memory_cases(std::vector<Case>& c) {
  add<decltype(cuMemAlloc_v2)>(c, {"cuMemAlloc_v2"}, "NULL dptr", kValue,
                               [](auto f, Env&) { return f(nullptr, 4096); });
  add<decltype(cuMemAlloc_v2)>(c, {"cuMemAlloc_v2"}, "size 0", kValue, [](auto f, Env&) {
    CUdeviceptr p = 0;
    return f(&p, 0);
  });
  add<decltype(cuMemAlloc_v2)>(c, {"cuMemAlloc_v2"}, "SIZE_MAX", kMemory, [](auto f, Env&) {
    CUdeviceptr p = 0;
    return f(&p, kHuge);
  });
  add<decltype(cuMemAlloc_v2)>(c, {"cuMemAlloc_v2"}, "size that wraps when rounded to the granularity", kMemory,
                               [](auto f, Env&) {
                                 CUdeviceptr p = 0;
                                 return f(&p, kHugeGranules + 1);
                               });
  add<decltype(cuMemAllocPitch_v2)>(c, {"cuMemAllocPitch_v2"}, "NULL dptr", kValue, [](auto f, Env&) {
    size_t pitch = 0;
    return f(nullptr, &pitch, 64, 64, 4);
  });
  add<decltype(cuMemAllocPitch_v2)>(c, {"cuMemAllocPitch_v2"}, "NULL pitch", kValue, [](auto f, Env&) {
    CUdeviceptr p = 0;
    return f(&p, nullptr, 64, 64, 4);
  });
  add<decltype(cuMemAllocPitch_v2)>(c, {"cuMemAllocPitch_v2"}, "element size 3", kValue, [](auto f, Env&) {
    CUdeviceptr p = 0;
    size_t pitch = 0;
    return f(&p, &pitch, 64, 64, 3);
  });
  add<decltype(cuMemAllocPitch_v2)>(c, {"cuMemAllocPitch_v2"}, "width that wraps when pitched", kMemory,
                                    [](auto f, Env&) {
                                      CUdeviceptr p = 0;
                                      size_t pitch = 0;
                                      return f(&p, &pitch, kHuge, 1, 4);
                                    });
  add<decltype(cuMemAllocPitch_v2)>(c, {"cuMemAllocPitch_v2"}, "pitch x height beyond 64 bits", kMemory,
                                    [](auto f, Env&) {
                                      CUdeviceptr p = 0;
                                      size_t pitch = 0;
                                      return f(&p, &pitch, 1ULL << 33, 1ULL << 31, 4);  // 2^64 bytes
                                    });
  add<decltype(cuMemAllocManaged)>(c, {"cuMemAllocManaged"}, "NULL dptr", kValue,
                                   [](auto f, Env&) { return f(nullptr, 4096, CU_MEM_ATTACH_GLOBAL); });
  add<decltype(cuMemAllocManaged)>(c, {"cuMemAllocManaged"}, "size 0", kValue, [](auto f, Env&) {
    CUdeviceptr p = 0;
    return f(&p, 0, CU_MEM_ATTACH_GLOBAL);
  });
  add<decltype(cuMemAllocManaged)>(c, {"cuMemAllocManaged"}, "flags 0", kValue, [](auto f, Env&) {
    CUdeviceptr p = 0;
    return f(&p, 4096, 0);
  });
  add<decltype(cuMemAllocManaged)>(c, {"cuMemAllocManaged"}, "both attach flags", kValue, [](auto f, Env&) {
    CUdeviceptr p = 0;
    return f(&p, 4096, CU_MEM_ATTACH_GLOBAL | CU_MEM_ATTACH_HOST);
  });
  add<decltype(cuMemAllocManaged)>(c, {"cuMemAllocManaged"}, "SIZE_MAX", kMemory, [](auto f, Env&) {
    CUdeviceptr p = 0;
    return f(&p, kHuge, CU_MEM_ATTACH_GLOBAL);
  });
  add<decltype(cuMemFree_v2)>(c, {"cuMemFree_v2"}, "unknown pointer", kValue,
                              [](auto f, Env& e) { return f(e.alloc + 16); });
  add<decltype(cuMemFree_v2)>(c, {"cuMemFree_v2"}, "VMM address", kValue, [](auto f, Env& e) { return f(e.va); });
  add<decltype(cuMemAllocAsync)>(c, {"cuMemAllocAsync", "cuMemAllocAsync_ptsz"}, "NULL dptr", kValue,
                                 [](auto f, Env& e) { return f(nullptr, 4096, e.stream); });
  add<decltype(cuMemAllocAsync)>(c, {"cuMemAllocAsync", "cuMemAllocAsync_ptsz"}, "SIZE_MAX", kMemory,
                                 [](auto f, Env& e) {
                                   CUdeviceptr p = 0;
                                   return f(&p, kHuge, e.stream);
                                 });
  add<decltype(cuMemAllocAsync)>(c, {"cuMemAllocAsync", "cuMemAllocAsync_ptsz"}, "unknown stream", kHandle,
                                 [](auto f, Env& e) {
                                   CUdeviceptr p = 0;
                                   return f(&p, 4096, e.bogus<CUstream>());
                                 });
  add<decltype(cuMemFreeAsync)>(c, {"cuMemFreeAsync", "cuMemFreeAsync_ptsz"}, "unknown pointer", kValue,
                                [](auto f, Env& e) { return f(e.alloc + 16, e.stream); });
  add<decltype(cuMemFreeAsync)>(c, {"cuMemFreeAsync", "cuMemFreeAsync_ptsz"}, "unknown stream", kHandle,
                                [](auto f, Env& e) { return f(e.alloc, e.bogus<CUstream>()); });
  add<decltype(cuMemGetInfo_v2)>(c, {"cuMemGetInfo_v2"}, "NULL free", kValue, [](auto f, Env&) {
    size_t total = 0;
    return f(nullptr, &total);
  });
  add<decltype(cuMemGetInfo_v2)>(c, {"cuMemGetInfo_v2"}, "NULL total", kValue, [](auto f, Env&) {
    size_t free_bytes = 0;
    return f(&free_bytes, nullptr);
  });

  // memset and memcpy: unknown device memory, ranges past the end, SIZE_MAX, unknown streams.
  add<decltype(cuMemsetD8_v2)>(c, {"cuMemsetD8_v2", "cuMemsetD8_v2_ptds"}, "NULL destination", kValue,
                               [](auto f, Env&) { return f(0, 0, 16); });
  add<decltype(cuMemsetD8_v2)>(c, {"cuMemsetD8_v2", "cuMemsetD8_v2_ptds"}, "host destination", kValue,
                               [](auto f, Env& e) { return f(reinterpret_cast<CUdeviceptr>(e.host), 1, 16); });
  add<decltype(cuMemsetD8_v2)>(c, {"cuMemsetD8_v2", "cuMemsetD8_v2_ptds"}, "SIZE_MAX", kValue,
                               [](auto f, Env& e) { return f(e.alloc, 1, kHuge); });
  add<decltype(cuMemsetD8_v2)>(c, {"cuMemsetD8_v2", "cuMemsetD8_v2_ptds"}, "range past the allocation", kValue,
                               [](auto f, Env& e) { return f(e.alloc, 1, kPastEverything); });
  add<decltype(cuMemsetD8_v2)>(c, {"cuMemsetD8_v2", "cuMemsetD8_v2_ptds"}, "range past the reservation", kValue,
                               [](auto f, Env& e) { return f(e.va, 0, kPastEverything); });
  add<decltype(cuMemsetD8Async)>(c, {"cuMemsetD8Async", "cuMemsetD8Async_ptsz"}, "NULL destination", kValue,
                                 [](auto f, Env& e) { return f(0, 0, 16, e.stream); });
  add<decltype(cuMemsetD8Async)>(c, {"cuMemsetD8Async", "cuMemsetD8Async_ptsz"}, "SIZE_MAX", kValue,
                                 [](auto f, Env& e) { return f(e.alloc, 1, kHuge, e.stream); });
  add<decltype(cuMemsetD8Async)>(c, {"cuMemsetD8Async", "cuMemsetD8Async_ptsz"}, "unknown stream", kHandle,
                                 [](auto f, Env& e) { return f(e.alloc, 1, 16, e.bogus<CUstream>()); });

  add<decltype(cuMemcpy)>(c, {"cuMemcpy", "cuMemcpy_ptds"}, "NULL destination", kValue,
                          [](auto f, Env& e) { return f(0, e.alloc, 16); });
  add<decltype(cuMemcpy)>(c, {"cuMemcpy", "cuMemcpy_ptds"}, "NULL source", kValue,
                          [](auto f, Env& e) { return f(e.alloc, 0, 16); });
  add<decltype(cuMemcpy)>(c, {"cuMemcpy", "cuMemcpy_ptds"}, "SIZE_MAX", kValue,
                          [](auto f, Env& e) { return f(e.alloc, reinterpret_cast<CUdeviceptr>(e.host), kHuge); });
  add<decltype(cuMemcpy)>(c, {"cuMemcpy", "cuMemcpy_ptds"}, "host-to-host SIZE_MAX", kValue, [](auto f, Env& e) {
    return f(reinterpret_cast<CUdeviceptr>(e.host), reinterpret_cast<CUdeviceptr>(e.host + 1), kHuge);
  });
  add<decltype(cuMemcpy)>(c, {"cuMemcpy", "cuMemcpy_ptds"}, "range past the allocation", kValue, [](auto f, Env& e) {
    return f(e.alloc, reinterpret_cast<CUdeviceptr>(e.host), kPastEverything);
  });
  add<decltype(cuMemcpyHtoD_v2)>(c, {"cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds"}, "NULL source", kValue,
                                 [](auto f, Env& e) { return f(e.alloc, nullptr, 16); });
  add<decltype(cuMemcpyHtoD_v2)>(c, {"cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds"}, "host destination", kValue,
                                 [](auto f, Env& e) { return f(reinterpret_cast<CUdeviceptr>(e.host), e.host, 16); });
  add<decltype(cuMemcpyHtoD_v2)>(c, {"cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds"}, "SIZE_MAX", kValue,
                                 [](auto f, Env& e) { return f(e.alloc, e.host, kHuge); });
  add<decltype(cuMemcpyDtoH_v2)>(c, {"cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds"}, "NULL destination", kValue,
                                 [](auto f, Env& e) { return f(nullptr, e.alloc, 16); });
  add<decltype(cuMemcpyDtoH_v2)>(c, {"cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds"}, "host source", kValue,
                                 [](auto f, Env& e) { return f(e.host, reinterpret_cast<CUdeviceptr>(e.host), 16); });
  add<decltype(cuMemcpyDtoH_v2)>(c, {"cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds"}, "range past the allocation", kValue,
                                 [](auto f, Env& e) { return f(e.host, e.alloc, kPastEverything); });
  add<decltype(cuMemcpyDtoD_v2)>(c, {"cuMemcpyDtoD_v2", "cuMemcpyDtoD_v2_ptds"}, "NULL source", kValue,
                                 [](auto f, Env& e) { return f(e.alloc, 0, 16); });
  add<decltype(cuMemcpyDtoD_v2)>(c, {"cuMemcpyDtoD_v2", "cuMemcpyDtoD_v2_ptds"}, "SIZE_MAX", kValue,
                                 [](auto f, Env& e) { return f(e.alloc, e.va, kHuge); });
  add<decltype(cuMemcpyAsync)>(c, {"cuMemcpyAsync", "cuMemcpyAsync_ptsz"}, "NULL destination", kValue,
                               [](auto f, Env& e) { return f(0, e.alloc, 16, e.stream); });
  add<decltype(cuMemcpyAsync)>(c, {"cuMemcpyAsync", "cuMemcpyAsync_ptsz"}, "SIZE_MAX", kValue, [](auto f, Env& e) {
    return f(reinterpret_cast<CUdeviceptr>(e.host), e.alloc, kHuge, e.stream);
  });
  add<decltype(cuMemcpyAsync)>(c, {"cuMemcpyAsync", "cuMemcpyAsync_ptsz"}, "unknown stream", kHandle,
                               [](auto f, Env& e) { return f(e.va, e.alloc, 16, e.bogus<CUstream>()); });
  add<decltype(cuMemcpyHtoDAsync_v2)>(c, {"cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync_v2_ptsz"}, "NULL source", kValue,
                                      [](auto f, Env& e) { return f(e.alloc, nullptr, 16, e.stream); });
  add<decltype(cuMemcpyHtoDAsync_v2)>(c, {"cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync_v2_ptsz"}, "SIZE_MAX", kValue,
                                      [](auto f, Env& e) { return f(e.alloc, e.host, kHuge, e.stream); });
  add<decltype(cuMemcpyHtoDAsync_v2)>(c, {"cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync_v2_ptsz"}, "unknown stream",
                                      kHandle,
                                      [](auto f, Env& e) { return f(e.alloc, e.host, 16, e.bogus<CUstream>()); });
  add<decltype(cuMemcpyDtoHAsync_v2)>(c, {"cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync_v2_ptsz"}, "NULL destination",
                                      kValue, [](auto f, Env& e) { return f(nullptr, e.alloc, 16, e.stream); });
  add<decltype(cuMemcpyDtoHAsync_v2)>(c, {"cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync_v2_ptsz"}, "SIZE_MAX", kValue,
                                      [](auto f, Env& e) { return f(e.host, e.alloc, kHuge, e.stream); });
  add<decltype(cuMemcpyDtoHAsync_v2)>(c, {"cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync_v2_ptsz"}, "unknown stream",
                                      kHandle,
                                      [](auto f, Env& e) { return f(e.host, e.alloc, 16, e.bogus<CUstream>()); });
  add<decltype(cuMemcpyDtoDAsync_v2)>(
      c, {"cuMemcpyDtoDAsync_v2", "cuMemcpyDtoDAsync_v2_ptsz"}, "host source", kValue,
      [](auto f, Env& e) { return f(e.alloc, reinterpret_cast<CUdeviceptr>(e.host), 16, e.stream); });
  add<decltype(cuMemcpyDtoDAsync_v2)>(c, {"cuMemcpyDtoDAsync_v2", "cuMemcpyDtoDAsync_v2_ptsz"}, "SIZE_MAX", kValue,
                                      [](auto f, Env& e) { return f(e.va, e.alloc, kHuge, e.stream); });
  add<decltype(cuMemcpyDtoDAsync_v2)>(c, {"cuMemcpyDtoDAsync_v2", "cuMemcpyDtoDAsync_v2_ptsz"}, "unknown stream",
                                      kHandle,
                                      [](auto f, Env& e) { return f(e.va, e.alloc, 16, e.bogus<CUstream>()); });

  // Virtual memory management.
  add<decltype(cuMemGetAllocationGranularity)>(c, {"cuMemGetAllocationGranularity"}, "NULL granularity", kValue,
                                               [](auto f, Env&) {
                                                 CUmemAllocationProp prop = device_prop();
                                                 return f(nullptr, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
                                               });
  add<decltype(cuMemGetAllocationGranularity)>(c, {"cuMemGetAllocationGranularity"}, "NULL prop", kValue,
                                               [](auto f, Env&) {
                                                 size_t g = 0;
                                                 return f(&g, nullptr, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
                                               });
  add<decltype(cuMemGetAllocationGranularity)>(c, {"cuMemGetAllocationGranularity"}, "option out of range", kValue,
                                               [](auto f, Env&) {
                                                 CUmemAllocationProp prop = device_prop();
                                                 size_t g = 0;
                                                 return f(&g, &prop, out_of_range<CUmemAllocationGranularity_flags>());
                                               });
  add<decltype(cuMemGetAllocationGranularity)>(c, {"cuMemGetAllocationGranularity"}, "bad device ordinal", kDevice,
                                               [](auto f, Env&) {
                                                 CUmemAllocationProp prop = device_prop(5);
                                                 size_t g = 0;
                                                 return f(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
                                               });
  add<decltype(cuMemGetAllocationGranularity)>(c, {"cuMemGetAllocationGranularity"}, "location type out of range",
                                               kValue, [](auto f, Env&) {
                                                 CUmemAllocationProp prop = device_prop();
                                                 prop.location.type = out_of_range<CUmemLocationType>();
                                                 size_t g = 0;
                                                 return f(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
                                               });
  add<decltype(cuMemAddressReserve)>(c, {"cuMemAddressReserve"}, "NULL ptr", kValue,
                                     [](auto f, Env&) { return f(nullptr, kGranule, 0, 0, 0); });
  add<decltype(cuMemAddressReserve)>(c, {"cuMemAddressReserve"}, "size 0", kValue, [](auto f, Env&) {
    CUdeviceptr p = 0;
    return f(&p, 0, 0, 0, 0);
  });
  add<decltype(cuMemAddressReserve)>(c, {"cuMemAddressReserve"}, "SIZE_MAX", kValue, [](auto f, Env&) {
    CUdeviceptr p = 0;
    return f(&p, kHuge, 0, 0, 0);
  });
  add<decltype(cuMemAddressReserve)>(c, {"cuMemAddressReserve"}, "granules that wrap when aligned", kMemory,
                                     [](auto f, Env&) {
                                       CUdeviceptr p = 0;
                                       return f(&p, kHugeGranules, 2 * kGranule, 0, 0);
                                     });
  add<decltype(cuMemAddressReserve)>(c, {"cuMemAddressReserve"}, "alignment not a power of two", kValue,
                                     [](auto f, Env&) {
                                       CUdeviceptr p = 0;
                                       return f(&p, kGranule, 3 * kGranule, 0, 0);
                                     });
  add<decltype(cuMemAddressReserve)>(c, {"cuMemAddressReserve"}, "unknown flags", kValue, [](auto f, Env&) {
    CUdeviceptr p = 0;
    return f(&p, kGranule, 0, 0, 4);
  });
  add<decltype(cuMemAddressFree)>(c, {"cuMemAddressFree"}, "unknown address", kValue,
                                  [](auto f, Env& e) { return f(e.alloc, kGranule); });
  add<decltype(cuMemAddressFree)>(c, {"cuMemAddressFree"}, "SIZE_MAX", kValue,
                                  [](auto f, Env& e) { return f(e.va, kHuge); });
  add<decltype(cuMemCreate)>(c, {"cuMemCreate"}, "NULL handle", kValue, [](auto f, Env&) {
    CUmemAllocationProp prop = device_prop();
    return f(nullptr, kGranule, &prop, 0);
  });
  add<decltype(cuMemCreate)>(c, {"cuMemCreate"}, "NULL prop", kValue, [](auto f, Env&) {
    CUmemGenericAllocationHandle h = 0;
    return f(&h, kGranule, nullptr, 0);
  });
  add<decltype(cuMemCreate)>(c, {"cuMemCreate"}, "size 0", kValue, [](auto f, Env&) {
    CUmemAllocationProp prop = device_prop();
    CUmemGenericAllocationHandle h = 0;
    return f(&h, 0, &prop, 0);
  });
  add<decltype(cuMemCreate)>(c, {"cuMemCreate"}, "SIZE_MAX", kValue, [](auto f, Env&) {
    CUmemAllocationProp prop = device_prop();
    CUmemGenericAllocationHandle h = 0;
    return f(&h, kHuge, &prop, 0);
  });
  add<decltype(cuMemCreate)>(c, {"cuMemCreate"}, "granules beyond the device", kMemory, [](auto f, Env&) {
    CUmemAllocationProp prop = device_prop();
    CUmemGenericAllocationHandle h = 0;
    return f(&h, kHugeGranules, &prop, 0);
  });
  add<decltype(cuMemCreate)>(c, {"cuMemCreate"}, "allocation type out of range", kValue, [](auto f, Env&) {
    CUmemAllocationProp prop = device_prop();
    prop.type = out_of_range<CUmemAllocationType>();
    CUmemGenericAllocationHandle h = 0;
    return f(&h, kGranule, &prop, 0);
  });
  add<decltype(cuMemCreate)>(c, {"cuMemCreate"}, "bad device ordinal", kDevice, [](auto f, Env&) {
    CUmemAllocationProp prop = device_prop(-1);
    CUmemGenericAllocationHandle h = 0;
    return f(&h, kGranule, &prop, 0);
  });
  add<decltype(cuMemCreate)>(c, {"cuMemCreate"}, "unknown flags", kValue, [](auto f, Env&) {
    CUmemAllocationProp prop = device_prop();
    CUmemGenericAllocationHandle h = 0;
    return f(&h, kGranule, &prop, 1);
  });
  add<decltype(cuMemRelease)>(c, {"cuMemRelease"}, "unknown handle", kValue,
                              [](auto f, Env& e) { return f(e.handle + 1000); });
  add<decltype(cuMemRelease)>(c, {"cuMemRelease"}, "handle 0", kValue, [](auto f, Env&) { return f(0); });
  add<decltype(cuMemMap)>(c, {"cuMemMap"}, "unknown handle", kValue,
                          [](auto f, Env& e) { return f(e.va + kGranule, kGranule, 0, e.handle + 1000, 0); });
  add<decltype(cuMemMap)>(c, {"cuMemMap"}, "SIZE_MAX", kValue,
                          [](auto f, Env& e) { return f(e.va + kGranule, kHuge, 0, e.handle, 0); });
  add<decltype(cuMemMap)>(c, {"cuMemMap"}, "offset", kValue,
                          [](auto f, Env& e) { return f(e.va + kGranule, kGranule, kGranule, e.handle, 0); });
  add<decltype(cuMemMap)>(c, {"cuMemMap"}, "address outside any reservation", kValue,
                          [](auto f, Env& e) { return f(e.alloc, kGranule, 0, e.handle, 0); });
  add<decltype(cuMemMap)>(c, {"cuMemMap"}, "unknown flags", kValue,
                          [](auto f, Env& e) { return f(e.va + kGranule, kGranule, 0, e.handle, 1); });
  add<decltype(cuMemUnmap)>(c, {"cuMemUnmap"}, "size 0", kValue, [](auto f, Env& e) { return f(e.va, 0); });
  add<decltype(cuMemUnmap)>(c, {"cuMemUnmap"}, "SIZE_MAX", kValue, [](auto f, Env& e) { return f(e.va, kHuge); });
  add<decltype(cuMemUnmap)>(c, {"cuMemUnmap"}, "unmapped range", kValue,
                            [](auto f, Env& e) { return f(e.va + kGranule, kGranule); });
  add<decltype(cuMemSetAccess)>(c, {"cuMemSetAccess"}, "NULL desc", kValue,
                                [](auto f, Env& e) { return f(e.va, kGranule, nullptr, 1); });
  add<decltype(cuMemSetAccess)>(c, {"cuMemSetAccess"}, "count 0", kValue, [](auto f, Env& e) {
    CUmemAccessDesc d{};
    return f(e.va, kGranule, &d, 0);
  });
  add<decltype(cuMemSetAccess)>(c, {"cuMemSetAccess"}, "SIZE_MAX", kValue, [](auto f, Env& e) {
    CUmemAccessDesc d{{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READ};
    return f(e.va, kHuge, &d, 1);
  });
  add<decltype(cuMemSetAccess)>(c, {"cuMemSetAccess"}, "access flags out of range", kValue, [](auto f, Env& e) {
    CUmemAccessDesc d{{CU_MEM_LOCATION_TYPE_DEVICE, 0}, out_of_range<CUmemAccess_flags>()};
    return f(e.va, kGranule, &d, 1);
  });
  add<decltype(cuMemSetAccess)>(c, {"cuMemSetAccess"}, "location type out of range", kValue, [](auto f, Env& e) {
    CUmemAccessDesc d{{out_of_range<CUmemLocationType>(), 0}, CU_MEM_ACCESS_FLAGS_PROT_READ};
    return f(e.va, kGranule, &d, 1);
  });
  add<decltype(cuMemSetAccess)>(c, {"cuMemSetAccess"}, "bad device ordinal", kDevice, [](auto f, Env& e) {
    CUmemAccessDesc d{{CU_MEM_LOCATION_TYPE_DEVICE, 3}, CU_MEM_ACCESS_FLAGS_PROT_READ};
    return f(e.va, kGranule, &d, 1);
  });
  add<decltype(cuMemGetAddressRange_v2)>(c, {"cuMemGetAddressRange_v2"}, "unknown pointer", CUDA_ERROR_NOT_FOUND,
                                         [](auto f, Env& e) {
                                           CUdeviceptr base = 0;
                                           size_t size = 0;
                                           return f(&base, &size, reinterpret_cast<CUdeviceptr>(e.host));
                                         });
  add<decltype(cuMemRetainAllocationHandle)>(c, {"cuMemRetainAllocationHandle"}, "NULL handle", kValue,
                                             [](auto f, Env& e) { return f(nullptr, reinterpret_cast<void*>(e.va)); });
  add<decltype(cuMemRetainAllocationHandle)>(c, {"cuMemRetainAllocationHandle"}, "unmapped address", kValue,
                                             [](auto f, Env& e) {
                                               CUmemGenericAllocationHandle h = 0;
                                               return f(&h, reinterpret_cast<void*>(e.va + kGranule));
                                             });
  add<decltype(cuMemRetainAllocationHandle)>(c, {"cuMemRetainAllocationHandle"}, "NULL address", kValue,
                                             [](auto f, Env&) {
                                               CUmemGenericAllocationHandle h = 0;
                                               return f(&h, nullptr);
                                             });
  // e.handle was created without requestedHandleTypes: nothing to export.
  add<decltype(cuMemExportToShareableHandle)>(
      c, {"cuMemExportToShareableHandle"}, "NULL output", kValue,
      [](auto f, Env& e) { return f(nullptr, e.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0); });
  add<decltype(cuMemExportToShareableHandle)>(
      c, {"cuMemExportToShareableHandle"}, "unknown handle", kValue, [](auto f, Env& e) {
        int fd = -1;
        return f(&fd, e.handle + 1000, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
      });
  add<decltype(cuMemExportToShareableHandle)>(c, {"cuMemExportToShareableHandle"}, "a type not requested", kValue,
                                              [](auto f, Env& e) {
                                                int fd = -1;
                                                return f(&fd, e.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
                                              });
  add<decltype(cuMemExportToShareableHandle)>(c, {"cuMemExportToShareableHandle"}, "unknown flags", kValue,
                                              [](auto f, Env& e) {
                                                int fd = -1;
                                                return f(&fd, e.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1);
                                              });
  add<decltype(cuMemGetAllocationPropertiesFromHandle)>(c, {"cuMemGetAllocationPropertiesFromHandle"}, "NULL prop",
                                                        kValue, [](auto f, Env& e) { return f(nullptr, e.handle); });
  add<decltype(cuMemGetAllocationPropertiesFromHandle)>(c, {"cuMemGetAllocationPropertiesFromHandle"},
                                                        "unknown handle", kValue, [](auto f, Env& e) {
                                                          CUmemAllocationProp prop{};
                                                          return f(&prop, e.handle + 1000);
                                                        });
  add<decltype(cuMemGetAllocationPropertiesFromHandle)>(c, {"cuMemGetAllocationPropertiesFromHandle"}, "handle 0",
                                                        kValue, [](auto f, Env&) {
                                                          CUmemAllocationProp prop{};
                                                          return f(&prop, 0);
                                                        });
  add<decltype(cuMemGetAccess)>(c, {"cuMemGetAccess"}, "NULL flags", kValue, [](auto f, Env& e) {
    CUmemLocation loc{CU_MEM_LOCATION_TYPE_DEVICE, 0};
    return f(nullptr, &loc, e.va);
  });
  add<decltype(cuMemGetAccess)>(c, {"cuMemGetAccess"}, "NULL location", kValue, [](auto f, Env& e) {
    unsigned long long flags = 0;
    return f(&flags, nullptr, e.va);
  });
  add<decltype(cuMemGetAccess)>(c, {"cuMemGetAccess"}, "location type out of range", kValue, [](auto f, Env& e) {
    unsigned long long flags = 0;
    CUmemLocation loc{out_of_range<CUmemLocationType>(), 0};
    return f(&flags, &loc, e.va);
  });
  add<decltype(cuMemGetAccess)>(c, {"cuMemGetAccess"}, "bad device ordinal", kDevice, [](auto f, Env& e) {
    unsigned long long flags = 0;
    CUmemLocation loc{CU_MEM_LOCATION_TYPE_DEVICE, 3};
    return f(&flags, &loc, e.va);
  });
  add<decltype(cuMemGetAccess)>(c, {"cuMemGetAccess"}, "unmapped address", kValue, [](auto f, Env& e) {
    unsigned long long flags = 0;
    CUmemLocation loc{CU_MEM_LOCATION_TYPE_DEVICE, 0};
    return f(&flags, &loc, e.va + kGranule);
  });
  add<decltype(cuMemGetAccess)>(c, {"cuMemGetAccess"}, "cuMemAlloc memory", kValue, [](auto f, Env& e) {
    unsigned long long flags = 0;
    CUmemLocation loc{CU_MEM_LOCATION_TYPE_DEVICE, 0};
    return f(&flags, &loc, e.alloc);
  });
  add<decltype(cuMemImportFromShareableHandle)>(
      c, {"cuMemImportFromShareableHandle"}, "NULL handle", kValue, [](auto f, Env&) {
        return f(nullptr, reinterpret_cast<void*>(std::intptr_t{0}), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
      });
  add<decltype(cuMemImportFromShareableHandle)>(
      c, {"cuMemImportFromShareableHandle"}, "closed descriptor", kValue, [](auto f, Env&) {
        CUmemGenericAllocationHandle h = 0;
        return f(&h, reinterpret_cast<void*>(std::intptr_t{-1}), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
      });
  add<decltype(cuMemImportFromShareableHandle)>(
      c, {"cuMemImportFromShareableHandle"}, "another handle type", kValue, [](auto f, Env&) {
        CUmemGenericAllocationHandle h = 0;
        return f(&h, reinterpret_cast<void*>(std::intptr_t{0}), CU_MEM_HANDLE_TYPE_FABRIC);
      });
  add<decltype(cuMemGetHandleForAddressRange)>(
      c, {"cuMemGetHandleForAddressRange"}, "NULL handle", kValue,
      [](auto f, Env& e) { return f(nullptr, e.va, kGranule, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0); });
  add<decltype(cuMemGetHandleForAddressRange)>(c, {"cuMemGetHandleForAddressRange"}, "handle type out of range", kValue,
                                               [](auto f, Env& e) {
                                                 int fd = -1;
                                                 return f(&fd, e.va, kGranule, out_of_range<CUmemRangeHandleType>(), 0);
                                               });
  add<decltype(cuMemGetHandleForAddressRange)>(
      c, {"cuMemGetHandleForAddressRange"}, "unknown flags", kValue, [](auto f, Env& e) {
        int fd = -1;
        return f(&fd, e.va, kGranule, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 1ULL << 20);
      });
  add<decltype(cuPointerGetAttribute)>(c, {"cuPointerGetAttribute"}, "NULL data", kValue, [](auto f, Env& e) {
    return f(nullptr, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, e.alloc);
  });
  add<decltype(cuPointerGetAttribute)>(c, {"cuPointerGetAttribute"}, "attribute out of range", kValue,
                                       [](auto f, Env& e) {
                                         unsigned long long v = 0;
                                         return f(&v, out_of_range<CUpointer_attribute>(), e.alloc);
                                       });
  add<decltype(cuPointerGetAttribute)>(c, {"cuPointerGetAttribute"}, "unknown pointer", kValue, [](auto f, Env& e) {
    int v = 0;
    return f(&v, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, reinterpret_cast<CUdeviceptr>(e.host));
  });
  add<decltype(cuPointerGetAttributes)>(c, {"cuPointerGetAttributes"}, "NULL attributes", kValue, [](auto f, Env& e) {
    void* data[1] = {nullptr};
    return f(1, nullptr, data, e.alloc);
  });
  add<decltype(cuPointerGetAttributes)>(c, {"cuPointerGetAttributes"}, "NULL data", kValue, [](auto f, Env& e) {
    CUpointer_attribute a[1] = {CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    return f(1, a, nullptr, e.alloc);
  });
  add<decltype(cuPointerGetAttributes)>(c, {"cuPointerGetAttributes"}, "NULL data entry", kValue, [](auto f, Env& e) {
    CUpointer_attribute a[1] = {CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    void* data[1] = {nullptr};
    return f(1, a, data, e.alloc);
  });
  add<decltype(cuIpcGetMemHandle)>(c, {"cuIpcGetMemHandle"}, "NULL handle", kValue,
                                   [](auto f, Env& e) { return f(nullptr, e.alloc); });
  add<decltype(cuIpcGetMemHandle)>(c, {"cuIpcGetMemHandle"}, "unknown pointer", kValue, [](auto f, Env& e) {
    CUipcMemHandle h{};
    return f(&h, reinterpret_cast<CUdeviceptr>(e.host));
  });
}

void add_execution_cases(std::vector<Case>& c) {
  add<decltype(cuStreamCreate)>(c, {"cuStreamCreate"}, "NULL stream", kValue,
                                [](auto f, Env&) { return f(nullptr, 0); });
  add<decltype(cuStreamCreate)>(c, {"cuStreamCreate"}, "unknown flags", kValue, [](auto f, Env&) {
    CUstream s = nullptr;
    return f(&s, 0x80);
  });
  add<decltype(cuStreamDestroy_v2)>(c, {"cuStreamDestroy_v2"}, "unknown stream", kHandle,
                                    [](auto f, Env& e) { return f(e.bogus<CUstream>()); });
  add<decltype(cuStreamDestroy_v2)>(c, {"cuStreamDestroy_v2"}, "destroyed stream", kHandle, [](auto f, Env&) {
    CUstream s = nullptr;
    if (cuStreamCreate(&s, 0) != CUDA_SUCCESS || f(s) != CUDA_SUCCESS) return CUDA_ERROR_UNKNOWN;
    return f(s);
  });
  add<decltype(cuStreamSynchronize)>(c, {"cuStreamSynchronize", "cuStreamSynchronize_ptsz"}, "unknown stream", kHandle,
                                     [](auto f, Env& e) { return f(e.bogus<CUstream>()); });
  add<decltype(cuStreamQuery)>(c, {"cuStreamQuery", "cuStreamQuery_ptsz"}, "unknown stream", kHandle,
                               [](auto f, Env& e) { return f(e.bogus<CUstream>()); });
  add<decltype(cuStreamBeginCapture_v2)>(
      c, {"cuStreamBeginCapture_v2", "cuStreamBeginCapture_v2_ptsz"}, "unknown stream", kHandle,
      [](auto f, Env& e) { return f(e.bogus<CUstream>(), CU_STREAM_CAPTURE_MODE_GLOBAL); });
  add<decltype(cuStreamBeginCapture_v2)>(
      c, {"cuStreamBeginCapture_v2", "cuStreamBeginCapture_v2_ptsz"}, "mode out of range", kValue,
      [](auto f, Env& e) { return f(e.stream, out_of_range<CUstreamCaptureMode>()); });
  add<decltype(cuStreamEndCapture)>(c, {"cuStreamEndCapture", "cuStreamEndCapture_ptsz"}, "NULL graph", kValue,
                                    [](auto f, Env& e) { return f(e.stream, nullptr); });
  add<decltype(cuStreamEndCapture)>(c, {"cuStreamEndCapture", "cuStreamEndCapture_ptsz"}, "unknown stream", kHandle,
                                    [](auto f, Env& e) {
                                      CUgraph g = nullptr;
                                      return f(e.bogus<CUstream>(), &g);
                                    });
  add<decltype(cuStreamIsCapturing)>(c, {"cuStreamIsCapturing", "cuStreamIsCapturing_ptsz"}, "NULL status", kValue,
                                     [](auto f, Env& e) { return f(e.stream, nullptr); });
  add<decltype(cuStreamIsCapturing)>(c, {"cuStreamIsCapturing", "cuStreamIsCapturing_ptsz"}, "unknown stream", kHandle,
                                     [](auto f, Env& e) {
                                       CUstreamCaptureStatus s{};
                                       return f(e.bogus<CUstream>(), &s);
                                     });
  add<decltype(cuStreamGetCaptureInfo_v3)>(
      c, {"cuStreamGetCaptureInfo_v3", "cuStreamGetCaptureInfo_v3_ptsz"}, "NULL status", kValue,
      [](auto f, Env& e) { return f(e.stream, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr); });
  add<decltype(cuStreamGetCaptureInfo_v3)>(c, {"cuStreamGetCaptureInfo_v3", "cuStreamGetCaptureInfo_v3_ptsz"},
                                           "unknown stream", kHandle, [](auto f, Env& e) {
                                             CUstreamCaptureStatus s{};
                                             return f(e.bogus<CUstream>(), &s, nullptr, nullptr, nullptr, nullptr,
                                                      nullptr);
                                           });
  add<CaptureInfoV2Fn>(c, {"cuStreamGetCaptureInfo_v2", "cuStreamGetCaptureInfo_v2_ptsz"}, "NULL status", kValue,
                       [](auto f, Env& e) { return f(e.stream, nullptr, nullptr, nullptr, nullptr, nullptr); });
  add<CaptureInfoV2Fn>(c, {"cuStreamGetCaptureInfo_v2", "cuStreamGetCaptureInfo_v2_ptsz"}, "unknown stream", kHandle,
                       [](auto f, Env& e) {
                         CUstreamCaptureStatus s{};
                         return f(e.bogus<CUstream>(), &s, nullptr, nullptr, nullptr, nullptr);
                       });
  add<decltype(cuThreadExchangeStreamCaptureMode)>(c, {"cuThreadExchangeStreamCaptureMode"}, "NULL mode", kValue,
                                                   [](auto f, Env&) { return f(nullptr); });
  add<decltype(cuThreadExchangeStreamCaptureMode)>(c, {"cuThreadExchangeStreamCaptureMode"}, "mode out of range",
                                                   kValue, [](auto f, Env&) {
                                                     CUstreamCaptureMode m = out_of_range<CUstreamCaptureMode>();
                                                     return f(&m);
                                                   });

  // Graphs: cuda.h documents CUDA_ERROR_INVALID_VALUE for unknown graphs and execs.
  add<decltype(cuGraphInstantiateWithFlags)>(c, {"cuGraphInstantiateWithFlags"}, "NULL exec", kValue,
                                             [](auto f, Env& e) { return f(nullptr, e.graph, 0); });
  add<decltype(cuGraphInstantiateWithFlags)>(c, {"cuGraphInstantiateWithFlags"}, "unknown graph", kValue,
                                             [](auto f, Env& e) {
                                               CUgraphExec x = nullptr;
                                               return f(&x, e.bogus<CUgraph>(), 0);
                                             });
  add<decltype(cuGraphInstantiateWithFlags)>(c, {"cuGraphInstantiateWithFlags"}, "unknown flags", kValue,
                                             [](auto f, Env& e) {
                                               CUgraphExec x = nullptr;
                                               return f(&x, e.graph, 1ULL << 40);
                                             });
  add<decltype(cuGraphInstantiateWithParams)>(c, {"cuGraphInstantiateWithParams", "cuGraphInstantiateWithParams_ptsz"},
                                              "NULL params", kValue, [](auto f, Env& e) {
                                                CUgraphExec x = nullptr;
                                                return f(&x, e.graph, nullptr);
                                              });
  add<decltype(cuGraphInstantiateWithParams)>(c, {"cuGraphInstantiateWithParams", "cuGraphInstantiateWithParams_ptsz"},
                                              "NULL exec", kValue, [](auto f, Env& e) {
                                                CUDA_GRAPH_INSTANTIATE_PARAMS p{};
                                                return f(nullptr, e.graph, &p);
                                              });
  add<decltype(cuGraphInstantiateWithParams)>(c, {"cuGraphInstantiateWithParams", "cuGraphInstantiateWithParams_ptsz"},
                                              "unknown graph", kValue, [](auto f, Env& e) {
                                                CUgraphExec x = nullptr;
                                                CUDA_GRAPH_INSTANTIATE_PARAMS p{};
                                                return f(&x, e.bogus<CUgraph>(), &p);
                                              });
  add<decltype(cuGraphInstantiateWithParams)>(c, {"cuGraphInstantiateWithParams", "cuGraphInstantiateWithParams_ptsz"},
                                              "unknown flags", kValue, [](auto f, Env& e) {
                                                CUgraphExec x = nullptr;
                                                CUDA_GRAPH_INSTANTIATE_PARAMS p{};
                                                p.flags = 1ULL << 40;
                                                return f(&x, e.graph, &p);
                                              });
  add<GraphInstantiateLegacyFn>(c, {"cuGraphInstantiate", "cuGraphInstantiate_v2"}, "NULL exec", kValue,
                                [](auto f, Env& e) { return f(nullptr, e.graph, nullptr, nullptr, 0); });
  add<GraphInstantiateLegacyFn>(c, {"cuGraphInstantiate", "cuGraphInstantiate_v2"}, "unknown graph", kValue,
                                [](auto f, Env& e) {
                                  CUgraphExec x = nullptr;
                                  return f(&x, e.bogus<CUgraph>(), nullptr, nullptr, 0);
                                });
  add<decltype(cuGraphLaunch)>(c, {"cuGraphLaunch", "cuGraphLaunch_ptsz"}, "unknown exec", kValue,
                               [](auto f, Env& e) { return f(e.bogus<CUgraphExec>(), e.stream); });
  add<decltype(cuGraphLaunch)>(c, {"cuGraphLaunch", "cuGraphLaunch_ptsz"}, "unknown stream", kHandle,
                               [](auto f, Env& e) { return f(e.exec, e.bogus<CUstream>()); });
  add<decltype(cuGraphExecDestroy)>(c, {"cuGraphExecDestroy"}, "unknown exec", kValue,
                                    [](auto f, Env& e) { return f(e.bogus<CUgraphExec>()); });
  add<decltype(cuGraphExecDestroy)>(c, {"cuGraphExecDestroy"}, "NULL exec", kValue,
                                    [](auto f, Env&) { return f(nullptr); });
  add<decltype(cuGraphDestroy)>(c, {"cuGraphDestroy"}, "unknown graph", kValue,
                                [](auto f, Env& e) { return f(e.bogus<CUgraph>()); });
  add<decltype(cuGraphDestroy)>(c, {"cuGraphDestroy"}, "NULL graph", kValue, [](auto f, Env&) { return f(nullptr); });
  add<decltype(cuGraphGetNodes)>(c, {"cuGraphGetNodes"}, "NULL numNodes", kValue,
                                 [](auto f, Env& e) { return f(e.graph, nullptr, nullptr); });
  add<decltype(cuGraphGetNodes)>(c, {"cuGraphGetNodes"}, "unknown graph", kValue, [](auto f, Env& e) {
    size_t n = 0;
    return f(e.bogus<CUgraph>(), nullptr, &n);
  });
  add<decltype(cuGraphGetNodes)>(c, {"cuGraphGetNodes"}, "NULL graph", kValue, [](auto f, Env&) {
    size_t n = 0;
    return f(nullptr, nullptr, &n);
  });

  // Modules, libraries and kernels.
  add<decltype(cuModuleLoadData)>(c, {"cuModuleLoadData"}, "NULL module", kValue,
                                  [](auto f, Env&) { return f(nullptr, kPtx); });
  add<decltype(cuModuleLoadData)>(c, {"cuModuleLoadData"}, "NULL image", kValue, [](auto f, Env&) {
    CUmodule m = nullptr;
    return f(&m, nullptr);
  });
  add<decltype(cuModuleLoadDataEx)>(c, {"cuModuleLoadDataEx"}, "NULL module", kValue,
                                    [](auto f, Env&) { return f(nullptr, kPtx, 0, nullptr, nullptr); });
  add<decltype(cuModuleLoadDataEx)>(c, {"cuModuleLoadDataEx"}, "NULL image", kValue, [](auto f, Env&) {
    CUmodule m = nullptr;
    return f(&m, nullptr, 0, nullptr, nullptr);
  });
  add<decltype(cuModuleLoadDataEx)>(c, {"cuModuleLoadDataEx"}, "options count without options", kValue,
                                    [](auto f, Env&) {
                                      CUmodule m = nullptr;
                                      return f(&m, kPtx, 3, nullptr, nullptr);
                                    });
  add<decltype(cuModuleGetFunction)>(c, {"cuModuleGetFunction"}, "NULL function", kValue,
                                     [](auto f, Env& e) { return f(nullptr, e.module, "arguments_noop"); });
  add<decltype(cuModuleGetFunction)>(c, {"cuModuleGetFunction"}, "NULL name", kValue, [](auto f, Env& e) {
    CUfunction fn = nullptr;
    return f(&fn, e.module, nullptr);
  });
  add<decltype(cuModuleGetFunction)>(c, {"cuModuleGetFunction"}, "unknown module", kHandle, [](auto f, Env& e) {
    CUfunction fn = nullptr;
    return f(&fn, e.bogus<CUmodule>(), "arguments_noop");
  });
  add<decltype(cuModuleGetFunction)>(c, {"cuModuleGetFunction"}, "a library as module", kHandle, [](auto f, Env& e) {
    CUfunction fn = nullptr;
    return f(&fn, reinterpret_cast<CUmodule>(e.library), "arguments_noop");
  });
  add<decltype(cuModuleUnload)>(c, {"cuModuleUnload"}, "unknown module", kHandle,
                                [](auto f, Env& e) { return f(e.bogus<CUmodule>()); });
  add<decltype(cuModuleUnload)>(c, {"cuModuleUnload"}, "NULL module", kHandle, [](auto f, Env&) { return f(nullptr); });
  add<decltype(cuLibraryLoadData)>(c, {"cuLibraryLoadData"}, "NULL library", kValue, [](auto f, Env&) {
    return f(nullptr, kPtx, nullptr, nullptr, 0, nullptr, nullptr, 0);
  });
  add<decltype(cuLibraryLoadData)>(c, {"cuLibraryLoadData"}, "NULL code", kValue, [](auto f, Env&) {
    CUlibrary l = nullptr;
    return f(&l, nullptr, nullptr, nullptr, 0, nullptr, nullptr, 0);
  });
  add<decltype(cuLibraryLoadData)>(c, {"cuLibraryLoadData"}, "JIT count without options", kValue, [](auto f, Env&) {
    CUlibrary l = nullptr;
    return f(&l, kPtx, nullptr, nullptr, 2, nullptr, nullptr, 0);
  });
  add<decltype(cuLibraryLoadData)>(c, {"cuLibraryLoadData"}, "library option count without options", kValue,
                                   [](auto f, Env&) {
                                     CUlibrary l = nullptr;
                                     return f(&l, kPtx, nullptr, nullptr, 0, nullptr, nullptr, 2);
                                   });
  add<decltype(cuLibraryGetKernel)>(c, {"cuLibraryGetKernel"}, "NULL kernel", kValue,
                                    [](auto f, Env& e) { return f(nullptr, e.library, "arguments_noop"); });
  add<decltype(cuLibraryGetKernel)>(c, {"cuLibraryGetKernel"}, "NULL name", kValue, [](auto f, Env& e) {
    CUkernel k = nullptr;
    return f(&k, e.library, nullptr);
  });
  add<decltype(cuLibraryGetKernel)>(c, {"cuLibraryGetKernel"}, "unknown library", kHandle, [](auto f, Env& e) {
    CUkernel k = nullptr;
    return f(&k, e.bogus<CUlibrary>(), "arguments_noop");
  });
  add<decltype(cuKernelGetFunction)>(c, {"cuKernelGetFunction"}, "NULL function", kValue,
                                     [](auto f, Env& e) { return f(nullptr, e.kernel); });
  add<decltype(cuKernelGetFunction)>(c, {"cuKernelGetFunction"}, "unknown kernel", kHandle, [](auto f, Env& e) {
    CUfunction fn = nullptr;
    return f(&fn, e.bogus<CUkernel>());
  });
  // Parameter layouts and names: cuda.h documents CUDA_ERROR_INVALID_VALUE for every misuse.
  add<decltype(cuFuncGetParamInfo)>(c, {"cuFuncGetParamInfo"}, "NULL offset", kValue,
                                    [](auto f, Env& e) { return f(e.function, 0, nullptr, nullptr); });
  add<decltype(cuFuncGetParamInfo)>(c, {"cuFuncGetParamInfo"}, "index past the last", kValue, [](auto f, Env& e) {
    size_t offset = 0, size = 0;
    return f(e.function, 99, &offset, &size);
  });
  add<decltype(cuFuncGetParamInfo)>(c, {"cuFuncGetParamInfo"}, "unknown function", kValue, [](auto f, Env& e) {
    size_t offset = 0;
    return f(e.bogus<CUfunction>(), 0, &offset, nullptr);
  });
  add<decltype(cuKernelGetParamInfo)>(c, {"cuKernelGetParamInfo"}, "index past the last", kValue, [](auto f, Env& e) {
    size_t offset = 0;
    return f(e.kernel, 99, &offset, nullptr);
  });
  add<decltype(cuKernelGetParamInfo)>(c, {"cuKernelGetParamInfo"}, "unknown kernel", kValue, [](auto f, Env& e) {
    size_t offset = 0;
    return f(e.bogus<CUkernel>(), 0, &offset, nullptr);
  });
  add<decltype(cuFuncGetName)>(c, {"cuFuncGetName"}, "NULL name", kValue,
                               [](auto f, Env& e) { return f(nullptr, e.function); });
  add<decltype(cuFuncGetName)>(c, {"cuFuncGetName"}, "unknown function", kValue, [](auto f, Env& e) {
    const char* name = nullptr;
    return f(&name, e.bogus<CUfunction>());
  });
  add<decltype(cuKernelGetName)>(c, {"cuKernelGetName"}, "NULL name", kValue,
                                 [](auto f, Env& e) { return f(nullptr, e.kernel); });
  add<decltype(cuKernelGetName)>(c, {"cuKernelGetName"}, "unknown kernel", kValue, [](auto f, Env& e) {
    const char* name = nullptr;
    return f(&name, e.bogus<CUkernel>());
  });
  add<decltype(cuLibraryUnload)>(c, {"cuLibraryUnload"}, "unknown library", kHandle,
                                 [](auto f, Env& e) { return f(e.bogus<CUlibrary>()); });
  add<decltype(cuLibraryUnload)>(c, {"cuLibraryUnload"}, "a module as library", kHandle,
                                 [](auto f, Env& e) { return f(reinterpret_cast<CUlibrary>(e.module)); });

  // Launches: unknown functions and streams, bad dimensions, missing parameters.
  using LaunchFn = decltype(cuLaunchKernel);
  const auto launch_names = {"cuLaunchKernel", "cuLaunchKernel_ptsz"};
  add<LaunchFn>(c, launch_names, "unknown function", kHandle, [](auto f, Env& e) {
    void* arg = nullptr;
    void* params[] = {&arg};
    return f(e.bogus<CUfunction>(), 1, 1, 1, 1, 1, 1, 0, e.stream, params, nullptr);
  });
  add<LaunchFn>(c, launch_names, "unknown stream", kHandle, [](auto f, Env& e) {
    void* arg = nullptr;
    void* params[] = {&arg};
    return f(e.function, 1, 1, 1, 1, 1, 1, 0, e.bogus<CUstream>(), params, nullptr);
  });
  add<LaunchFn>(c, launch_names, "NULL params", kValue,
                [](auto f, Env& e) { return f(e.function, 1, 1, 1, 1, 1, 1, 0, e.stream, nullptr, nullptr); });
  add<LaunchFn>(c, launch_names, "NULL parameter", kValue, [](auto f, Env& e) {
    void* params[] = {nullptr};
    return f(e.function, 1, 1, 1, 1, 1, 1, 0, e.stream, params, nullptr);
  });
  add<LaunchFn>(c, launch_names, "grid 0", kValue, [](auto f, Env& e) {
    void* arg = nullptr;
    void* params[] = {&arg};
    return f(e.function, 0, 1, 1, 1, 1, 1, 0, e.stream, params, nullptr);
  });
  add<LaunchFn>(c, launch_names, "grid y beyond 65535", kValue, [](auto f, Env& e) {
    void* arg = nullptr;
    void* params[] = {&arg};
    return f(e.function, 1, 65536, 1, 1, 1, 1, 0, e.stream, params, nullptr);
  });
  add<LaunchFn>(c, launch_names, "block of 2^32 threads (wraps in 32 bits)", kValue, [](auto f, Env& e) {
    void* arg = nullptr;
    void* params[] = {&arg};
    return f(e.function, 1, 1, 1, 65536, 65536, 1, 0, e.stream, params, nullptr);
  });
  add<LaunchFn>(c, launch_names, "block z beyond 64", kValue, [](auto f, Env& e) {
    void* arg = nullptr;
    void* params[] = {&arg};
    return f(e.function, 1, 1, 1, 1, 1, 128, 0, e.stream, params, nullptr);
  });
  using LaunchExFn = decltype(cuLaunchKernelEx);
  const auto launch_ex_names = {"cuLaunchKernelEx", "cuLaunchKernelEx_ptsz"};
  add<LaunchExFn>(c, launch_ex_names, "NULL config", kValue, [](auto f, Env& e) {
    void* arg = nullptr;
    void* params[] = {&arg};
    return f(nullptr, e.function, params, nullptr);
  });
  add<LaunchExFn>(c, launch_ex_names, "attribute count without attributes", kValue, [](auto f, Env& e) {
    CUlaunchConfig config{};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = config.blockDimY = config.blockDimZ = 1;
    config.hStream = e.stream;
    config.numAttrs = 4;
    void* arg = nullptr;
    void* params[] = {&arg};
    return f(&config, e.function, params, nullptr);
  });
  add<LaunchExFn>(c, launch_ex_names, "unknown function", kHandle, [](auto f, Env& e) {
    CUlaunchConfig config{};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = config.blockDimY = config.blockDimZ = 1;
    config.hStream = e.stream;
    void* arg = nullptr;
    void* params[] = {&arg};
    return f(&config, e.bogus<CUfunction>(), params, nullptr);
  });
  add<LaunchExFn>(c, launch_ex_names, "block of 2^32 threads (wraps in 32 bits)", kValue, [](auto f, Env& e) {
    CUlaunchConfig config{};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = config.blockDimY = 65536;
    config.blockDimZ = 1;
    config.hStream = e.stream;
    void* arg = nullptr;
    void* params[] = {&arg};
    return f(&config, e.function, params, nullptr);
  });
}

// The API breadth beyond kvremap's own calls: devices, contexts, events, streams, host memory, copies, IPC.
using EventRecordFn = CUresult(CUevent, CUstream);
using EventRecordFlagsFn = CUresult(CUevent, CUstream, unsigned);
using StreamWaitFn = CUresult(CUstream, CUevent, unsigned);
using HostFuncFn = CUresult(CUstream, CUhostFn, void*);
using AddCallbackFn = CUresult(CUstream, CUstreamCallback, void*, unsigned);
using PriorityFn = CUresult(CUstream, int*);
using FlagsFn = CUresult(CUstream, unsigned*);
using StreamCtxFn = CUresult(CUstream, CUcontext*);
using StreamCtxV2Fn = CUresult(CUstream, CUcontext*, CUgreenCtx*);
using Copy2DFn = CUresult(const CUDA_MEMCPY2D*);
using Copy2DAsyncFn = CUresult(const CUDA_MEMCPY2D*, CUstream);
using PeerFn = CUresult(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
using PeerAsyncFn = CUresult(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
using D16Fn = CUresult(CUdeviceptr, unsigned short, size_t);
using D32Fn = CUresult(CUdeviceptr, unsigned int, size_t);
using D16AsyncFn = CUresult(CUdeviceptr, unsigned short, size_t, CUstream);
using D32AsyncFn = CUresult(CUdeviceptr, unsigned int, size_t, CUstream);
using D2D8Fn = CUresult(CUdeviceptr, size_t, unsigned char, size_t, size_t);
using D2D16Fn = CUresult(CUdeviceptr, size_t, unsigned short, size_t, size_t);
using D2D32Fn = CUresult(CUdeviceptr, size_t, unsigned int, size_t, size_t);
using D2D8AsyncFn = CUresult(CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream);
using D2D16AsyncFn = CUresult(CUdeviceptr, size_t, unsigned short, size_t, size_t, CUstream);
using D2D32AsyncFn = CUresult(CUdeviceptr, size_t, unsigned int, size_t, size_t, CUstream);
using UuidFn = CUresult(CUuuid*, CUdevice);
using IpcOpenFn = CUresult(CUdeviceptr*, CUipcMemHandle, unsigned);
using ElapsedFn = CUresult(float*, CUevent, CUevent);
using DeviceFlagsFn = CUresult(CUdevice, unsigned);
using DeviceFn = CUresult(CUdevice);

void add_breadth_cases(std::vector<Case>& c) {
  add<UuidFn>(c, {"cuDeviceGetUuid", "cuDeviceGetUuid_v2"}, "NULL uuid", kValue,
              [](auto f, Env&) { return f(nullptr, 0); });
  add<UuidFn>(c, {"cuDeviceGetUuid", "cuDeviceGetUuid_v2"}, "bad ordinal", kDevice, [](auto f, Env&) {
    CUuuid u{};
    return f(&u, 3);
  });
  add<decltype(cuDeviceGetPCIBusId)>(c, {"cuDeviceGetPCIBusId"}, "length 0", kValue, [](auto f, Env&) {
    char id[16];
    return f(id, 0, 0);
  });
  add<decltype(cuDeviceGetPCIBusId)>(c, {"cuDeviceGetPCIBusId"}, "bad ordinal", kDevice, [](auto f, Env&) {
    char id[16];
    return f(id, 16, 5);
  });
  add<decltype(cuDeviceGetByPCIBusId)>(c, {"cuDeviceGetByPCIBusId"}, "not a bus id", kValue, [](auto f, Env&) {
    CUdevice d = 0;
    return f(&d, "GPU zero");
  });
  add<decltype(cuDeviceGetByPCIBusId)>(c, {"cuDeviceGetByPCIBusId"}, "no device on that bus", kDevice,
                                       [](auto f, Env&) {
                                         CUdevice d = 0;
                                         return f(&d, "0000:99:00.0");
                                       });
  add<decltype(cuDeviceCanAccessPeer)>(c, {"cuDeviceCanAccessPeer"}, "NULL result", kValue,
                                       [](auto f, Env&) { return f(nullptr, 0, 0); });
  add<decltype(cuDeviceCanAccessPeer)>(c, {"cuDeviceCanAccessPeer"}, "bad peer ordinal", kDevice, [](auto f, Env&) {
    int can = 0;
    return f(&can, 0, 4);
  });
  add<decltype(cuDeviceGetP2PAttribute)>(c, {"cuDeviceGetP2PAttribute"}, "device with itself", kDevice,
                                         [](auto f, Env&) {
                                           int v = 0;
                                           return f(&v, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 0);
                                         });
  add<decltype(cuCtxEnablePeerAccess)>(c, {"cuCtxEnablePeerAccess"}, "unknown context", kContext,
                                       [](auto f, Env& e) { return f(e.bogus<CUcontext>(), 0); });
  add<decltype(cuCtxEnablePeerAccess)>(c, {"cuCtxEnablePeerAccess"}, "its own context", kDevice,
                                       [](auto f, Env& e) { return f(e.ctx, 0); });
  add<decltype(cuCtxEnablePeerAccess)>(c, {"cuCtxEnablePeerAccess"}, "flags 1", kValue,
                                       [](auto f, Env& e) { return f(e.ctx, 1); });
  add<decltype(cuCtxDisablePeerAccess)>(c, {"cuCtxDisablePeerAccess"}, "never enabled",
                                        CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, [](auto f, Env& e) { return f(e.ctx); });
  add<decltype(cuCtxPushCurrent_v2)>(c, {"cuCtxPushCurrent_v2"}, "unknown context", kContext,
                                     [](auto f, Env& e) { return f(e.bogus<CUcontext>()); });
  add<decltype(cuCtxCreate_v4)>(c, {"cuCtxCreate_v4"}, "NULL pctx", kValue,
                                [](auto f, Env&) { return f(nullptr, nullptr, 0, 0); });
  add<decltype(cuCtxCreate_v4)>(c, {"cuCtxCreate_v4"}, "bad ordinal", kDevice, [](auto f, Env&) {
    CUcontext ctx = nullptr;
    return f(&ctx, nullptr, 0, 1);
  });
  add<decltype(cuCtxCreate_v4)>(c, {"cuCtxCreate_v4"}, "unknown flag bits", kValue, [](auto f, Env&) {
    CUcontext ctx = nullptr;
    return f(&ctx, nullptr, 1u << 30, 0);
  });
  add<decltype(cuCtxCreate_v4)>(c, {"cuCtxCreate_v4"}, "SM-count affinity without MPS",
                                CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, [](auto f, Env&) {
                                  CUexecAffinityParam affinity{};
                                  affinity.type = CU_EXEC_AFFINITY_TYPE_SM_COUNT;
                                  affinity.param.smCount.val = 8;
                                  CUctxCreateParams params{};
                                  params.execAffinityParams = &affinity;
                                  params.numExecAffinityParams = 1;
                                  CUcontext ctx = nullptr;
                                  return f(&ctx, &params, 0, 0);
                                });
  add<decltype(cuCtxCreate_v4)>(c, {"cuCtxCreate_v4"}, "CIG mode", CUDA_ERROR_NOT_SUPPORTED, [](auto f, Env&) {
    CUctxCigParam cig{};
    CUctxCreateParams params{};
    params.cigParams = &cig;
    CUcontext ctx = nullptr;
    return f(&ctx, &params, 0, 0);
  });
  add<CtxCreateV3Fn>(c, {"cuCtxCreate_v3"}, "NULL pctx", kValue,
                     [](auto f, Env&) { return f(nullptr, nullptr, 0, 0, 0); });
  add<CtxCreateV3Fn>(c, {"cuCtxCreate_v3"}, "negative affinity count", kValue, [](auto f, Env&) {
    CUcontext ctx = nullptr;
    return f(&ctx, nullptr, -1, 0, 0);
  });
  add<CtxCreateV3Fn>(c, {"cuCtxCreate_v3"}, "SM-count affinity without MPS", CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY,
                     [](auto f, Env&) {
                       CUexecAffinityParam affinity{};
                       affinity.type = CU_EXEC_AFFINITY_TYPE_SM_COUNT;
                       affinity.param.smCount.val = 8;
                       CUcontext ctx = nullptr;
                       return f(&ctx, &affinity, 1, 0, 0);
                     });
  add<CtxCreateV2Fn>(c, {"cuCtxCreate", "cuCtxCreate_v2"}, "NULL pctx", kValue,
                     [](auto f, Env&) { return f(nullptr, 0, 0); });
  add<CtxCreateV2Fn>(c, {"cuCtxCreate", "cuCtxCreate_v2"}, "bad ordinal", kDevice, [](auto f, Env&) {
    CUcontext ctx = nullptr;
    return f(&ctx, 0, -1);
  });
  add<CtxCreateV2Fn>(c, {"cuCtxCreate", "cuCtxCreate_v2"}, "two scheduling policies", kValue, [](auto f, Env&) {
    CUcontext ctx = nullptr;
    return f(&ctx, CU_CTX_SCHED_MASK, 0);
  });
  add<decltype(cuCtxDestroy_v2)>(c, {"cuCtxDestroy", "cuCtxDestroy_v2"}, "unknown context", kContext,
                                 [](auto f, Env& e) { return f(e.bogus<CUcontext>()); });
  add<decltype(cuCtxDestroy_v2)>(c, {"cuCtxDestroy", "cuCtxDestroy_v2"}, "a primary context", kContext,
                                 [](auto f, Env& e) { return f(e.ctx); });
  add<decltype(cuCtxPopCurrent_v2)>(c, {"cuCtxPopCurrent_v2"}, "no current context", kContext, [](auto f, Env&) {
    cuCtxSetCurrent(nullptr);
    CUcontext ctx = nullptr;
    return f(&ctx);
  });
  add<decltype(cuCtxGetApiVersion)>(c, {"cuCtxGetApiVersion"}, "NULL version", kValue,
                                    [](auto f, Env& e) { return f(e.ctx, nullptr); });
  add<decltype(cuCtxGetApiVersion)>(c, {"cuCtxGetApiVersion"}, "unknown context", kContext, [](auto f, Env& e) {
    unsigned v = 0;
    return f(e.bogus<CUcontext>(), &v);
  });
  add<decltype(cuCtxGetFlags)>(c, {"cuCtxGetFlags"}, "NULL flags", kValue, [](auto f, Env&) { return f(nullptr); });
  add<decltype(cuCtxSetFlags)>(c, {"cuCtxSetFlags"}, "unknown flag bits", kValue,
                               [](auto f, Env&) { return f(1u << 30); });
  add<decltype(cuCtxGetStreamPriorityRange)>(c, {"cuCtxGetStreamPriorityRange"}, "no current context", kContext,
                                             [](auto f, Env&) {
                                               cuCtxSetCurrent(nullptr);
                                               int least = 0, greatest = 0;
                                               return f(&least, &greatest);
                                             });
  add<decltype(cuDevicePrimaryCtxGetState)>(c, {"cuDevicePrimaryCtxGetState"}, "NULL active", kValue, [](auto f, Env&) {
    unsigned flags = 0;
    return f(0, &flags, nullptr);
  });
  add<decltype(cuDevicePrimaryCtxGetState)>(c, {"cuDevicePrimaryCtxGetState"}, "bad ordinal", kDevice,
                                            [](auto f, Env&) {
                                              unsigned flags = 0;
                                              int active = 0;
                                              return f(2, &flags, &active);
                                            });
  add<DeviceFlagsFn>(c, {"cuDevicePrimaryCtxSetFlags_v2"}, "two scheduling policies", kValue,
                     [](auto f, Env&) { return f(0, CU_CTX_SCHED_MASK); });
  add<DeviceFlagsFn>(c, {"cuDevicePrimaryCtxSetFlags_v2"}, "bad ordinal", kDevice,
                     [](auto f, Env&) { return f(9, 0); });
  add<DeviceFlagsFn>(c, {"cuDevicePrimaryCtxSetFlags"}, "active context (7.0 ABI)", CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE,
                     [](auto f, Env&) { return f(0, 0); });
  add<DeviceFn>(c, {"cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2"}, "bad ordinal", kDevice,
                [](auto f, Env&) { return f(-1); });

  add<decltype(cuEventCreate)>(c, {"cuEventCreate"}, "NULL event", kValue, [](auto f, Env&) { return f(nullptr, 0); });
  add<decltype(cuEventCreate)>(c, {"cuEventCreate"}, "interprocess with timing", kValue, [](auto f, Env&) {
    CUevent ev = nullptr;
    return f(&ev, CU_EVENT_INTERPROCESS);
  });
  add<decltype(cuEventCreate)>(c, {"cuEventCreate"}, "unknown flags", kValue, [](auto f, Env&) {
    CUevent ev = nullptr;
    return f(&ev, 0x100);
  });
  add<decltype(cuEventDestroy_v2)>(c, {"cuEventDestroy_v2", "cuEventDestroy"}, "unknown event", kHandle,
                                   [](auto f, Env& e) { return f(e.bogus<CUevent>()); });
  add<decltype(cuEventQuery)>(c, {"cuEventQuery", "cuEventSynchronize"}, "unknown event", kHandle,
                              [](auto f, Env& e) { return f(e.bogus<CUevent>()); });
  add<EventRecordFn>(c, {"cuEventRecord", "cuEventRecord_ptsz"}, "unknown event", kHandle,
                     [](auto f, Env& e) { return f(e.bogus<CUevent>(), e.stream); });
  add<EventRecordFlagsFn>(c, {"cuEventRecordWithFlags", "cuEventRecordWithFlags_ptsz"}, "unknown event", kHandle,
                          [](auto f, Env& e) { return f(e.bogus<CUevent>(), e.stream, 0); });
  add<ElapsedFn>(c, {"cuEventElapsedTime", "cuEventElapsedTime_v2"}, "NULL result", kValue,
                 [](auto f, Env& e) { return f(nullptr, e.bogus<CUevent>(), e.bogus<CUevent>()); });
  add<ElapsedFn>(c, {"cuEventElapsedTime", "cuEventElapsedTime_v2"}, "unknown events", kHandle, [](auto f, Env& e) {
    float ms = 0;
    return f(&ms, e.bogus<CUevent>(), e.bogus<CUevent>());
  });
  add<StreamWaitFn>(c, {"cuStreamWaitEvent", "cuStreamWaitEvent_ptsz"}, "unknown event", kHandle,
                    [](auto f, Env& e) { return f(e.stream, e.bogus<CUevent>(), 0); });
  add<decltype(cuIpcGetEventHandle)>(c, {"cuIpcGetEventHandle"}, "NULL handle", kValue,
                                     [](auto f, Env& e) { return f(nullptr, e.bogus<CUevent>()); });
  add<decltype(cuIpcGetEventHandle)>(c, {"cuIpcGetEventHandle"}, "unknown event", kHandle, [](auto f, Env& e) {
    CUipcEventHandle h{};
    return f(&h, e.bogus<CUevent>());
  });
  add<decltype(cuIpcOpenEventHandle)>(c, {"cuIpcOpenEventHandle"}, "zeroed handle", kHandle, [](auto f, Env&) {
    CUevent ev = nullptr;
    return f(&ev, CUipcEventHandle{});
  });

  add<decltype(cuStreamCreateWithPriority)>(c, {"cuStreamCreateWithPriority"}, "NULL stream", kValue,
                                            [](auto f, Env&) { return f(nullptr, 0, 0); });
  add<PriorityFn>(c, {"cuStreamGetPriority", "cuStreamGetPriority_ptsz"}, "unknown stream", kHandle,
                  [](auto f, Env& e) {
                    int p = 0;
                    return f(e.bogus<CUstream>(), &p);
                  });
  add<FlagsFn>(c, {"cuStreamGetFlags", "cuStreamGetFlags_ptsz"}, "NULL flags", kValue,
               [](auto f, Env& e) { return f(e.stream, nullptr); });
  add<StreamCtxFn>(c, {"cuStreamGetCtx", "cuStreamGetCtx_ptsz"}, "NULL context", kValue,
                   [](auto f, Env& e) { return f(e.stream, nullptr); });
  add<StreamCtxFn>(c, {"cuStreamGetCtx", "cuStreamGetCtx_ptsz"}, "unknown stream", kHandle, [](auto f, Env& e) {
    CUcontext ctx = nullptr;
    return f(e.bogus<CUstream>(), &ctx);
  });
  add<StreamCtxFn>(c, {"cuStreamGetCtx", "cuStreamGetCtx_ptsz"}, "NULL stream without a current context", kContext,
                   [](auto f, Env&) {
                     CUcontext ctx = nullptr;
                     cuCtxSetCurrent(nullptr);
                     return f(nullptr, &ctx);
                   });
  add<StreamCtxV2Fn>(c, {"cuStreamGetCtx_v2", "cuStreamGetCtx_v2_ptsz"}, "NULL context", kValue, [](auto f, Env& e) {
    CUgreenCtx green = nullptr;
    return f(e.stream, nullptr, &green);
  });
  add<StreamCtxV2Fn>(c, {"cuStreamGetCtx_v2", "cuStreamGetCtx_v2_ptsz"}, "NULL green context", kValue,
                     [](auto f, Env& e) {
                       CUcontext ctx = nullptr;
                       return f(e.stream, &ctx, nullptr);
                     });
  add<StreamCtxV2Fn>(c, {"cuStreamGetCtx_v2", "cuStreamGetCtx_v2_ptsz"}, "unknown stream", kHandle,
                     [](auto f, Env& e) {
                       CUcontext ctx = nullptr;
                       CUgreenCtx green = nullptr;
                       return f(e.bogus<CUstream>(), &ctx, &green);
                     });
  add<StreamCtxV2Fn>(c, {"cuStreamGetCtx_v2", "cuStreamGetCtx_v2_ptsz"}, "PER_THREAD without a current context",
                     kContext, [](auto f, Env&) {
                       CUcontext ctx = nullptr;
                       CUgreenCtx green = nullptr;
                       cuCtxSetCurrent(nullptr);
                       return f(CU_STREAM_PER_THREAD, &ctx, &green);
                     });
  add<AddCallbackFn>(c, {"cuStreamAddCallback", "cuStreamAddCallback_ptsz"}, "NULL callback", kValue,
                     [](auto f, Env& e) { return f(e.stream, nullptr, nullptr, 0); });
  add<HostFuncFn>(c, {"cuLaunchHostFunc", "cuLaunchHostFunc_ptsz"}, "unknown stream", kHandle, [](auto f, Env& e) {
    return f(
        e.bogus<CUstream>(), [](void*) {}, nullptr);
  });

  add<decltype(cuMemHostAlloc)>(c, {"cuMemHostAlloc"}, "unknown flags", kValue, [](auto f, Env&) {
    void* p = nullptr;
    return f(&p, 4096, 0x80);
  });
  add<decltype(cuMemAllocHost_v2)>(c, {"cuMemAllocHost_v2"}, "size 0", kValue, [](auto f, Env&) {
    void* p = nullptr;
    return f(&p, 0);
  });
  add<decltype(cuMemFreeHost)>(c, {"cuMemFreeHost"}, "not pinned memory", kValue,
                               [](auto f, Env& e) { return f(e.host); });
  add<decltype(cuMemHostRegister_v2)>(c, {"cuMemHostRegister_v2"}, "device memory", kValue,
                                      [](auto f, Env& e) { return f(reinterpret_cast<void*>(e.alloc), 4096, 0); });
  add<decltype(cuMemHostUnregister)>(c, {"cuMemHostUnregister"}, "never registered",
                                     CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, [](auto f, Env& e) { return f(e.host); });
  add<decltype(cuMemHostGetDevicePointer_v2)>(c, {"cuMemHostGetDevicePointer_v2"}, "not pinned memory", kValue,
                                              [](auto f, Env& e) {
                                                CUdeviceptr d = 0;
                                                return f(&d, e.host, 0);
                                              });
  add<decltype(cuMemHostGetFlags)>(c, {"cuMemHostGetFlags"}, "not pinned memory", kValue, [](auto f, Env& e) {
    unsigned flags = 0;
    return f(&flags, e.host);
  });

  add<Copy2DFn>(c, {"cuMemcpy2D_v2", "cuMemcpy2D_v2_ptds", "cuMemcpy2DUnaligned_v2", "cuMemcpy2DUnaligned_v2_ptds"},
                "NULL parameters", kValue, [](auto f, Env&) { return f(nullptr); });
  add<Copy2DFn>(c, {"cuMemcpy2D_v2", "cuMemcpy2D_v2_ptds", "cuMemcpy2DUnaligned_v2", "cuMemcpy2DUnaligned_v2_ptds"},
                "rows past the allocation", kValue, [](auto f, Env& e) {
                  CUDA_MEMCPY2D m{};
                  m.srcMemoryType = CU_MEMORYTYPE_HOST;
                  m.srcHost = e.host;
                  m.srcPitch = 16;
                  m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
                  m.dstDevice = e.alloc;
                  m.dstPitch = kPastEverything;
                  m.WidthInBytes = 16;
                  m.Height = 2;
                  return f(&m);
                });
  add<Copy2DAsyncFn>(c, {"cuMemcpy2DAsync_v2", "cuMemcpy2DAsync_v2_ptsz"}, "unknown memory type", kValue,
                     [](auto f, Env& e) {
                       CUDA_MEMCPY2D m{};
                       m.srcMemoryType = out_of_range<CUmemorytype>();
                       m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
                       m.dstDevice = e.alloc;
                       m.WidthInBytes = 16;
                       m.Height = 1;
                       return f(&m, e.stream);
                     });
  add<PeerFn>(c, {"cuMemcpyPeer", "cuMemcpyPeer_ptds"}, "unknown context", kContext,
              [](auto f, Env& e) { return f(e.alloc, e.bogus<CUcontext>(), e.alloc, e.ctx, 16); });
  add<PeerAsyncFn>(c, {"cuMemcpyPeerAsync", "cuMemcpyPeerAsync_ptsz"}, "range past the allocation", kValue,
                   [](auto f, Env& e) { return f(e.alloc, e.ctx, e.alloc, e.ctx, kPastEverything, e.stream); });
  add<D16Fn>(c, {"cuMemsetD16_v2", "cuMemsetD16_v2_ptds"}, "unaligned destination", kValue,
             [](auto f, Env& e) { return f(e.alloc + 1, 0, 4); });
  add<D32Fn>(c, {"cuMemsetD32_v2", "cuMemsetD32_v2_ptds"}, "range past the allocation", kValue,
             [](auto f, Env& e) { return f(e.alloc, 0, kPastEverything); });
  add<D16AsyncFn>(c, {"cuMemsetD16Async", "cuMemsetD16Async_ptsz"}, "unknown stream", kHandle,
                  [](auto f, Env& e) { return f(e.alloc, 0, 4, e.bogus<CUstream>()); });
  add<D32AsyncFn>(c, {"cuMemsetD32Async", "cuMemsetD32Async_ptsz"}, "unaligned destination", kValue,
                  [](auto f, Env& e) { return f(e.alloc + 2, 0, 4, e.stream); });
  add<D2D8Fn>(c, {"cuMemsetD2D8_v2", "cuMemsetD2D8_v2_ptds"}, "pitch below the width", kValue,
              [](auto f, Env& e) { return f(e.alloc, 8, 0, 16, 2); });
  add<D2D16Fn>(c, {"cuMemsetD2D16_v2", "cuMemsetD2D16_v2_ptds"}, "rows past the allocation", kValue,
               [](auto f, Env& e) { return f(e.alloc, kPastEverything, 0, 4, 2); });
  add<D2D32Fn>(c, {"cuMemsetD2D32_v2", "cuMemsetD2D32_v2_ptds"}, "unaligned destination", kValue,
               [](auto f, Env& e) { return f(e.alloc + 2, 64, 0, 4, 2); });
  add<D2D8AsyncFn>(c, {"cuMemsetD2D8Async", "cuMemsetD2D8Async_ptsz"}, "unknown stream", kHandle,
                   [](auto f, Env& e) { return f(e.alloc, 64, 0, 16, 2, e.bogus<CUstream>()); });
  add<D2D16AsyncFn>(c, {"cuMemsetD2D16Async", "cuMemsetD2D16Async_ptsz"}, "pitch below the width", kValue,
                    [](auto f, Env& e) { return f(e.alloc, 4, 0, 16, 2, e.stream); });
  add<D2D32AsyncFn>(c, {"cuMemsetD2D32Async", "cuMemsetD2D32Async_ptsz"}, "rows past the allocation", kValue,
                    [](auto f, Env& e) { return f(e.alloc, kPastEverything, 0, 4, 2, e.stream); });

  add<IpcOpenFn>(c, {"cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2"}, "zeroed handle", kHandle, [](auto f, Env&) {
    CUdeviceptr p = 0;
    return f(&p, CUipcMemHandle{}, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  });
  add<IpcOpenFn>(c, {"cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2"}, "unknown flags", kValue, [](auto f, Env&) {
    CUdeviceptr p = 0;
    return f(&p, CUipcMemHandle{}, 0x10);
  });
  add<decltype(cuIpcCloseMemHandle)>(c, {"cuIpcCloseMemHandle"}, "memory this process allocated", kValue,
                                     [](auto f, Env& e) { return f(e.alloc); });

  add<decltype(cuMemPoolCreate)>(c, {"cuMemPoolCreate"}, "NULL properties", kValue, [](auto f, Env&) {
    CUmemoryPool pool = nullptr;
    return f(&pool, nullptr);
  });
  add<decltype(cuMemPoolCreate)>(c, {"cuMemPoolCreate"}, "bad ordinal", kDevice, [](auto f, Env&) {
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 8;
    CUmemoryPool pool = nullptr;
    return f(&pool, &props);
  });
  add<decltype(cuMemPoolDestroy)>(c, {"cuMemPoolDestroy"}, "unknown pool", kValue,
                                  [](auto f, Env& e) { return f(e.bogus<CUmemoryPool>()); });
  add<decltype(cuMemPoolTrimTo)>(c, {"cuMemPoolTrimTo"}, "unknown pool", kValue,
                                 [](auto f, Env& e) { return f(e.bogus<CUmemoryPool>(), 0); });
  add<decltype(cuMemPoolSetAttribute)>(c, {"cuMemPoolSetAttribute"}, "read-only attribute", kValue, [](auto f, Env&) {
    CUmemoryPool pool = nullptr;
    cuDeviceGetDefaultMemPool(&pool, 0);
    cuuint64_t v = 0;
    return f(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v);
  });
  add<decltype(cuMemPoolGetAttribute)>(c, {"cuMemPoolGetAttribute"}, "attribute out of range", kValue,
                                       [](auto f, Env&) {
                                         CUmemoryPool pool = nullptr;
                                         cuDeviceGetDefaultMemPool(&pool, 0);
                                         cuuint64_t v = 0;
                                         return f(pool, out_of_range<CUmemPool_attribute>(), &v);
                                       });
  add<decltype(cuDeviceGetDefaultMemPool)>(c, {"cuDeviceGetDefaultMemPool", "cuDeviceGetMemPool"}, "bad ordinal",
                                           kDevice, [](auto f, Env&) {
                                             CUmemoryPool pool = nullptr;
                                             return f(&pool, 6);
                                           });
  add<decltype(cuDeviceSetMemPool)>(c, {"cuDeviceSetMemPool"}, "unknown pool", kValue,
                                    [](auto f, Env& e) { return f(0, e.bogus<CUmemoryPool>()); });
  add<decltype(cuMemAllocFromPoolAsync)>(c, {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz"}, "unknown pool",
                                         kValue, [](auto f, Env& e) {
                                           CUdeviceptr p = 0;
                                           return f(&p, 4096, e.bogus<CUmemoryPool>(), e.stream);
                                         });
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = [] {
    std::vector<Case> c;
    add_core_cases(c);
    add_memory_cases(c);
    add_execution_cases(c);
    add_breadth_cases(c);
    return c;
  }();
  return all;
}

}  // namespace

class ArgumentTest : public SimDriver, public ::testing::WithParamInterface<Case> {
 protected:
  void SetUp() override {
    SimDriver::SetUp();
    env_.ctx = ctx_;
    ASSERT_CU(cuStreamCreate(&env_.stream, CU_STREAM_NON_BLOCKING));
    ASSERT_CU(cuMemAlloc(&env_.alloc, kAllocBytes));
    env_.va = Reserve(2 * kGranule);
    env_.handle = Create(kGranule);
    MapRW(env_.va, kGranule, env_.handle);
    ASSERT_CU(cuModuleLoadData(&env_.module, kPtx));
    ASSERT_CU(cuModuleGetFunction(&env_.function, env_.module, "arguments_noop"));
    ASSERT_CU(cuLibraryLoadData(&env_.library, kPtx, nullptr, nullptr, 0, nullptr, nullptr, 0));
    ASSERT_CU(cuLibraryGetKernel(&env_.kernel, env_.library, "arguments_noop"));
    ASSERT_CU(cuStreamBeginCapture(env_.stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ASSERT_CU(cuMemsetD8Async(env_.alloc, 7, 16, env_.stream));
    ASSERT_CU(cuStreamEndCapture(env_.stream, &env_.graph));
    ASSERT_CU(cuGraphInstantiateWithFlags(&env_.exec, env_.graph, 0));
  }

  Env env_;
};

TEST_P(ArgumentTest, ReturnsTheDocumentedErrorAndChangesNothing) {
  const Case& c = GetParam();
  const unsigned long long used = Used();
  const unsigned long long host = simcuda_host_used_bytes();
  const unsigned long long handles = simcuda_live_handles();
  const unsigned long long reservations = simcuda_live_reservations();
  const unsigned long long mappings = simcuda_live_mappings();
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

  EXPECT_EQ(c.expected, c.call(env_)) << c.function << " with " << c.bad;

  EXPECT_EQ(used, Used()) << "device memory charged by a failed call";
  EXPECT_EQ(host, simcuda_host_used_bytes());
  EXPECT_EQ(handles, simcuda_live_handles());
  EXPECT_EQ(reservations, simcuda_live_reservations());
  EXPECT_EQ(mappings, simcuda_live_mappings());
  // The thread's capture mode is untouched (cuThreadExchangeStreamCaptureMode with a bad mode).
  ASSERT_CU(cuThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(CU_STREAM_CAPTURE_MODE_GLOBAL, mode);
  cuThreadExchangeStreamCaptureMode(&mode);
  // The objects the call was given still work.
  ASSERT_CU(cuCtxSetCurrent(ctx_));
  EXPECT_CU(cuMemsetD8(env_.alloc, 1, kAllocBytes));
  EXPECT_CU(cuMemsetD8(env_.va, 2, kGranule));
  EXPECT_CU(cuGraphLaunch(env_.exec, env_.stream));
  void* arg = nullptr;
  void* params[] = {&arg};
  EXPECT_CU(cuLaunchKernel(env_.function, 1, 1, 1, 1, 1, 1, 0, env_.stream, params, nullptr));
  EXPECT_CU(cuStreamSynchronize(env_.stream));
}

INSTANTIATE_TEST_SUITE_P(EveryExport, ArgumentTest, ::testing::ValuesIn(cases()),
                         kvremap::testing::argument_case_name<Case>);

TEST(ArgumentCoverage, EveryExportHasCases) {
  Dl_info info{};
  ASSERT_NE(0, dladdr(reinterpret_cast<void*>(&cuInit), &info));
  const std::set<std::string> exports = kvremap::testing::exported_functions(info.dli_fname, "cu");
  ASSERT_GT(exports.size(), 50u) << info.dli_fname;
  std::set<std::string> covered;
  for (const Case& c : cases()) covered.insert(c.function);
  // Functions the simulator does not implement are NOT_SUPPORTED stubs (ExportList.* checks them).
  for (const std::string& name : exports) {
    if (simcuda_is_simulated(name.c_str()) != 0) {
      EXPECT_TRUE(covered.count(name)) << name << " has no bad-argument case";
    }
  }
  for (const std::string& name : covered) EXPECT_TRUE(exports.count(name)) << name << " is not exported";
}
