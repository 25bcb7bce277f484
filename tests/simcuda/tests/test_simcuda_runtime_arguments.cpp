// Bad arguments to every export of the simulated runtime: each call returns the cudaError_t the
// real runtime reports (the driver's documented error through the runtime's mapping), records it as
// the last error and changes nothing, instead of crashing or hanging.
//
// RuntimeArgumentCoverage.EveryExportHasCases reads libcudart.so.13's dynamic symbol table so that a
// new cuda* export without cases fails here.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <elf.h>
#include <gtest/gtest.h>

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
#include "runtime/ptsz_api.h"
#include "runtime/simcudart.h"
#include "simcuda.h"

// The kernel the table's library launches (found by the simulated driver with dlsym).
extern "C" __attribute__((visibility("default"))) void simcuda_kernel_rt_arguments_noop(void** params) { (void)params; }

namespace {

constexpr char kPtx[] = R"(
.version 8.0
.target sm_90
.address_size 64
.visible .entry rt_arguments_noop(
  .param .u64 rt_arguments_noop_param_0
)
{
  ret;
}
)";

constexpr char kSettings[] =
    "SIMCUDA_DEVICE_COUNT=1 SIMCUDA_DEVICE_MEMORY=1GiB SIMCUDA_GRANULARITY=2MiB SIMCUDA_CONTEXT_BYTES=0 "
    "SIMCUDA_GRAPH_EXEC_BYTES=0 SIMCUDA_MODULE_BYTES=0";

constexpr size_t kHuge = SIZE_MAX;
constexpr size_t kAllocBytes = 4096;

struct Env {
  cudaStream_t stream = nullptr;
  void* alloc = nullptr;
  cudaLibrary_t library = nullptr;
  cudaKernel_t kernel = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  unsigned char host[4096] = {};
  long long bogus_storage[4] = {};  // its address is never a handle of the runtime's
  template <typename T>
  T bogus() {
    return reinterpret_cast<T>(&bogus_storage[1]);
  }
};

using Case = kvremap::testing::ArgumentCase<cudaError_t, Env>;
using kvremap::testing::out_of_range;

template <typename Fn, typename Call>
void add(std::vector<Case>& out, std::initializer_list<const char*> names, const char* bad, cudaError_t expected,
         Call call) {
  kvremap::testing::add_argument_cases<Fn>(out, "libcudart.so.13", names, bad, expected, cudaErrorUnknown, call);
}

constexpr cudaError_t kValue = cudaErrorInvalidValue;
constexpr cudaError_t kHandle = cudaErrorInvalidResourceHandle;
constexpr cudaError_t kDevice = cudaErrorInvalidDevice;
constexpr cudaError_t kMemory = cudaErrorMemoryAllocation;
constexpr cudaError_t kConfig = cudaErrorInvalidConfiguration;

void add_device_and_error_cases(std::vector<Case>& c) {
  add<decltype(cudaGetDeviceCount)>(c, {"cudaGetDeviceCount"}, "NULL count", kValue,
                                    [](auto f, Env&) { return f(nullptr); });
  add<decltype(cudaGetDevice)>(c, {"cudaGetDevice"}, "NULL device", kValue, [](auto f, Env&) { return f(nullptr); });
  add<decltype(cudaSetDevice)>(c, {"cudaSetDevice"}, "ordinal 1 of 1", kDevice, [](auto f, Env&) { return f(1); });
  add<decltype(cudaSetDevice)>(c, {"cudaSetDevice"}, "ordinal -1", kDevice, [](auto f, Env&) { return f(-1); });
  add<decltype(cudaDeviceGetAttribute)>(c, {"cudaDeviceGetAttribute"}, "NULL value", kValue,
                                        [](auto f, Env&) { return f(nullptr, cudaDevAttrWarpSize, 0); });
  add<decltype(cudaDeviceGetAttribute)>(c, {"cudaDeviceGetAttribute"}, "attribute out of range", kValue,
                                        [](auto f, Env&) {
                                          int v = 0;
                                          return f(&v, out_of_range<cudaDeviceAttr>(), 0);
                                        });
  add<decltype(cudaDeviceGetAttribute)>(c, {"cudaDeviceGetAttribute"}, "bad ordinal", kDevice, [](auto f, Env&) {
    int v = 0;
    return f(&v, cudaDevAttrWarpSize, 9);
  });
  add<decltype(cudaGetDeviceProperties)>(c, {"cudaGetDeviceProperties"}, "NULL properties", kValue,
                                         [](auto f, Env&) { return f(nullptr, 0); });
  add<decltype(cudaGetDeviceProperties)>(c, {"cudaGetDeviceProperties"}, "bad ordinal", kDevice, [](auto f, Env&) {
    cudaDeviceProp prop{};
    return f(&prop, 1);
  });
  // No arguments to get wrong: called while a capture is invalid they must still answer.
  add<decltype(cudaDeviceSynchronize)>(c, {"cudaDeviceSynchronize"}, "no arguments", cudaSuccess,
                                       [](auto f, Env&) { return f(); });
  add<decltype(cudaDriverGetVersion)>(c, {"cudaDriverGetVersion"}, "NULL version", kValue,
                                      [](auto f, Env&) { return f(nullptr); });
  add<decltype(cudaRuntimeGetVersion)>(c, {"cudaRuntimeGetVersion"}, "NULL version", kValue,
                                       [](auto f, Env&) { return f(nullptr); });
  add<decltype(cudaGetLastError)>(c, {"cudaGetLastError"}, "no arguments", cudaSuccess,
                                  [](auto f, Env&) { return f(); });
  add<decltype(cudaPeekAtLastError)>(c, {"cudaPeekAtLastError"}, "no arguments", cudaSuccess,
                                     [](auto f, Env&) { return f(); });
  // The text lookups return strings: an unknown code is the runtime's "unrecognized error code".
  add<decltype(cudaGetErrorName)>(
      c, {"cudaGetErrorName", "cudaGetErrorString"}, "error out of range", cudaSuccess, [](auto f, Env&) {
        const char* text = f(out_of_range<cudaError_t>());
        return text && std::strcmp(text, "unrecognized error code") == 0 ? cudaSuccess : cudaErrorUnknown;
      });
  // Deprecated in CUDA 13 but still exported: its ABI, spelled out.
  using EntryPointFn = cudaError_t(const char*, void**, unsigned long long, cudaDriverEntryPointQueryResult*);
  const auto entry_names = {"cudaGetDriverEntryPoint", "cudaGetDriverEntryPoint_ptsz"};
  add<EntryPointFn>(c, entry_names, "NULL symbol", kValue, [](auto f, Env&) {
    void* p = nullptr;
    return f(nullptr, &p, 0, nullptr);
  });
  add<EntryPointFn>(c, entry_names, "NULL pointer", kValue,
                    [](auto f, Env&) { return f("cuMemAlloc", nullptr, 0, nullptr); });
  add<EntryPointFn>(c, entry_names, "unknown flags", kValue, [](auto f, Env&) {
    void* p = nullptr;
    return f("cuMemAlloc", &p, 1ULL << 40, nullptr);
  });
  using ByVersionFn = decltype(cudaGetDriverEntryPointByVersion);
  const auto by_version_names = {"cudaGetDriverEntryPointByVersion", "cudaGetDriverEntryPointByVersion_ptsz"};
  add<ByVersionFn>(c, by_version_names, "NULL symbol", kValue, [](auto f, Env&) {
    void* p = nullptr;
    return f(nullptr, &p, 12000, 0, nullptr);
  });
  add<ByVersionFn>(c, by_version_names, "version 0", kValue, [](auto f, Env&) {
    void* p = nullptr;
    return f("cuMemAlloc", &p, 0, 0, nullptr);
  });
  add<ByVersionFn>(c, by_version_names, "version newer than the driver", kValue, [](auto f, Env&) {
    void* p = nullptr;
    return f("cuMemAlloc", &p, 99000, 0, nullptr);
  });
}

void add_memory_cases(std::vector<Case>& c) {
  add<decltype(cudaMalloc)>(c, {"cudaMalloc"}, "NULL pointer", kValue, [](auto f, Env&) { return f(nullptr, 4096); });
  add<decltype(cudaMalloc)>(c, {"cudaMalloc"}, "SIZE_MAX", kMemory, [](auto f, Env&) {
    void* p = nullptr;
    return f(&p, kHuge);
  });
  add<decltype(cudaFree)>(c, {"cudaFree"}, "unknown pointer", kValue,
                          [](auto f, Env& e) { return f(static_cast<char*>(e.alloc) + 16); });
  add<decltype(cudaFree)>(c, {"cudaFree"}, "host pointer", kValue, [](auto f, Env& e) { return f(e.host); });
  add<decltype(cudaMallocPitch)>(c, {"cudaMallocPitch"}, "NULL pitch", kValue, [](auto f, Env&) {
    void* p = nullptr;
    return f(&p, nullptr, 64, 64);
  });
  add<decltype(cudaMallocPitch)>(c, {"cudaMallocPitch"}, "width SIZE_MAX", kMemory, [](auto f, Env&) {
    void* p = nullptr;
    size_t pitch = 0;
    return f(&p, &pitch, kHuge, 1);
  });
  add<decltype(cudaMallocPitch)>(c, {"cudaMallocPitch"}, "pitch x height beyond 64 bits", kMemory, [](auto f, Env&) {
    void* p = nullptr;
    size_t pitch = 0;
    return f(&p, &pitch, 1ULL << 33, 1ULL << 31);
  });
  const auto malloc_async = {"cudaMallocAsync", "cudaMallocAsync_ptsz"};
  add<decltype(cudaMallocAsync)>(c, malloc_async, "NULL pointer", kValue,
                                 [](auto f, Env& e) { return f(nullptr, 4096, e.stream); });
  add<decltype(cudaMallocAsync)>(c, malloc_async, "SIZE_MAX", kMemory, [](auto f, Env& e) {
    void* p = nullptr;
    return f(&p, kHuge, e.stream);
  });
  add<decltype(cudaMallocAsync)>(c, malloc_async, "unknown stream", kHandle, [](auto f, Env& e) {
    void* p = nullptr;
    return f(&p, 4096, e.bogus<cudaStream_t>());
  });
  const auto free_async = {"cudaFreeAsync", "cudaFreeAsync_ptsz"};
  add<decltype(cudaFreeAsync)>(c, free_async, "unknown pointer", kValue,
                               [](auto f, Env& e) { return f(e.host, e.stream); });
  add<decltype(cudaFreeAsync)>(c, free_async, "unknown stream", kHandle,
                               [](auto f, Env& e) { return f(e.alloc, e.bogus<cudaStream_t>()); });
  add<decltype(cudaMemGetInfo)>(c, {"cudaMemGetInfo"}, "NULL total", kValue, [](auto f, Env&) {
    size_t free_bytes = 0;
    return f(&free_bytes, nullptr);
  });
  const auto memcpy_names = {"cudaMemcpy", "cudaMemcpy_ptds"};
  add<decltype(cudaMemcpy)>(c, memcpy_names, "kind out of range", cudaErrorInvalidMemcpyDirection,
                            [](auto f, Env& e) { return f(e.alloc, e.host, 16, out_of_range<cudaMemcpyKind>()); });
  add<decltype(cudaMemcpy)>(c, memcpy_names, "NULL destination", kValue,
                            [](auto f, Env& e) { return f(nullptr, e.host, 16, cudaMemcpyHostToDevice); });
  add<decltype(cudaMemcpy)>(c, memcpy_names, "SIZE_MAX", kValue,
                            [](auto f, Env& e) { return f(e.alloc, e.host, kHuge, cudaMemcpyHostToDevice); });
  add<decltype(cudaMemcpy)>(c, memcpy_names, "range past the allocation", kValue,
                            [](auto f, Env& e) { return f(e.host, e.alloc, 64ULL << 20, cudaMemcpyDeviceToHost); });
  const auto memcpy_async = {"cudaMemcpyAsync", "cudaMemcpyAsync_ptsz"};
  add<decltype(cudaMemcpyAsync)>(
      c, memcpy_async, "kind out of range", cudaErrorInvalidMemcpyDirection,
      [](auto f, Env& e) { return f(e.alloc, e.host, 16, out_of_range<cudaMemcpyKind>(), e.stream); });
  add<decltype(cudaMemcpyAsync)>(c, memcpy_async, "NULL source", kValue, [](auto f, Env& e) {
    return f(e.alloc, nullptr, 16, cudaMemcpyHostToDevice, e.stream);
  });
  add<decltype(cudaMemcpyAsync)>(c, memcpy_async, "SIZE_MAX", kValue, [](auto f, Env& e) {
    return f(e.host, e.alloc, kHuge, cudaMemcpyDeviceToHost, e.stream);
  });
  add<decltype(cudaMemcpyAsync)>(c, memcpy_async, "unknown stream", kHandle, [](auto f, Env& e) {
    return f(e.alloc, e.host, 16, cudaMemcpyHostToDevice, e.bogus<cudaStream_t>());
  });
  const auto memset_names = {"cudaMemset", "cudaMemset_ptds"};
  add<decltype(cudaMemset)>(c, memset_names, "NULL pointer", kValue, [](auto f, Env&) { return f(nullptr, 0, 16); });
  add<decltype(cudaMemset)>(c, memset_names, "host pointer", kValue, [](auto f, Env& e) { return f(e.host, 0, 16); });
  add<decltype(cudaMemset)>(c, memset_names, "SIZE_MAX", kValue, [](auto f, Env& e) { return f(e.alloc, 0, kHuge); });
  const auto memset_async = {"cudaMemsetAsync", "cudaMemsetAsync_ptsz"};
  add<decltype(cudaMemsetAsync)>(c, memset_async, "NULL pointer", kValue,
                                 [](auto f, Env& e) { return f(nullptr, 0, 16, e.stream); });
  add<decltype(cudaMemsetAsync)>(c, memset_async, "SIZE_MAX", kValue,
                                 [](auto f, Env& e) { return f(e.alloc, 0, kHuge, e.stream); });
  add<decltype(cudaMemsetAsync)>(c, memset_async, "unknown stream", kHandle,
                                 [](auto f, Env& e) { return f(e.alloc, 0, 16, e.bogus<cudaStream_t>()); });
  const auto memcpy_2d = {"cudaMemcpy2D", "cudaMemcpy2D_ptds"};
  add<decltype(cudaMemcpy2D)>(c, memcpy_2d, "kind out of range", cudaErrorInvalidMemcpyDirection, [](auto f, Env& e) {
    return f(e.alloc, 64, e.host, 64, 16, 2, out_of_range<cudaMemcpyKind>());
  });
  add<decltype(cudaMemcpy2D)>(c, memcpy_2d, "width above the source pitch", cudaErrorInvalidPitchValue,
                              [](auto f, Env& e) { return f(e.alloc, 64, e.host, 8, 16, 2, cudaMemcpyHostToDevice); });
  add<decltype(cudaMemcpy2D)>(c, memcpy_2d, "NULL destination", kValue,
                              [](auto f, Env& e) { return f(nullptr, 64, e.host, 64, 16, 2, cudaMemcpyHostToDevice); });
  const auto memcpy_2d_async = {"cudaMemcpy2DAsync", "cudaMemcpy2DAsync_ptsz"};
  add<decltype(cudaMemcpy2DAsync)>(c, memcpy_2d_async, "width above the destination pitch", cudaErrorInvalidPitchValue,
                                   [](auto f, Env& e) {
                                     return f(e.alloc, 8, e.host, 64, 16, 2, cudaMemcpyHostToDevice, e.stream);
                                   });
  add<decltype(cudaMemcpy2DAsync)>(c, memcpy_2d_async, "unknown stream", kHandle, [](auto f, Env& e) {
    return f(e.alloc, 64, e.host, 64, 16, 2, cudaMemcpyHostToDevice, e.bogus<cudaStream_t>());
  });
  const auto memset_2d = {"cudaMemset2D", "cudaMemset2D_ptds"};
  add<decltype(cudaMemset2D)>(c, memset_2d, "width above the pitch", cudaErrorInvalidPitchValue,
                              [](auto f, Env& e) { return f(e.alloc, 8, 0, 16, 2); });
  add<decltype(cudaMemset2D)>(c, memset_2d, "host pointer", kValue, [](auto f, Env& e) { return f(e.host, 64, 0, 16, 2); });
  const auto memset_2d_async = {"cudaMemset2DAsync", "cudaMemset2DAsync_ptsz"};
  add<decltype(cudaMemset2DAsync)>(c, memset_2d_async, "width above the pitch", cudaErrorInvalidPitchValue,
                                   [](auto f, Env& e) { return f(e.alloc, 8, 0, 16, 2, e.stream); });
  add<decltype(cudaMemset2DAsync)>(c, memset_2d_async, "unknown stream", kHandle,
                                   [](auto f, Env& e) { return f(e.alloc, 64, 0, 16, 2, e.bogus<cudaStream_t>()); });
  const auto memcpy_peer = {"cudaMemcpyPeer", "cudaMemcpyPeer_ptds"};
  add<decltype(cudaMemcpyPeer)>(c, memcpy_peer, "bad destination ordinal", kDevice,
                                [](auto f, Env& e) { return f(e.alloc, 3, e.alloc, 0, 16); });
  add<decltype(cudaMemcpyPeer)>(c, memcpy_peer, "NULL destination", kValue,
                                [](auto f, Env& e) { return f(nullptr, 0, e.alloc, 0, 16); });
  const auto memcpy_peer_async = {"cudaMemcpyPeerAsync", "cudaMemcpyPeerAsync_ptsz"};
  add<decltype(cudaMemcpyPeerAsync)>(c, memcpy_peer_async, "bad source ordinal", kDevice,
                                     [](auto f, Env& e) { return f(e.alloc, 0, e.alloc, -1, 16, e.stream); });
  add<decltype(cudaMemcpyPeerAsync)>(c, memcpy_peer_async, "unknown stream", kHandle, [](auto f, Env& e) {
    return f(e.alloc, 0, static_cast<char*>(e.alloc) + 64, 0, 16, e.bogus<cudaStream_t>());
  });
  for (const char* name : {"cudaDeviceGetDefaultMemPool", "cudaDeviceGetMemPool"}) {
    add<decltype(cudaDeviceGetMemPool)>(c, {name}, "NULL pool", kValue, [](auto f, Env&) { return f(nullptr, 0); });
    add<decltype(cudaDeviceGetMemPool)>(c, {name}, "bad ordinal", kDevice, [](auto f, Env&) {
      cudaMemPool_t pool = nullptr;
      return f(&pool, 2);
    });
  }
  add<decltype(cudaDeviceSetMemPool)>(c, {"cudaDeviceSetMemPool"}, "unknown pool", kValue,
                                      [](auto f, Env& e) { return f(0, e.bogus<cudaMemPool_t>()); });
  add<decltype(cudaDeviceSetMemPool)>(c, {"cudaDeviceSetMemPool"}, "bad ordinal", kDevice,
                                      [](auto f, Env& e) { return f(3, e.bogus<cudaMemPool_t>()); });
  add<decltype(cudaMemPoolCreate)>(c, {"cudaMemPoolCreate"}, "NULL properties", kValue, [](auto f, Env&) {
    cudaMemPool_t pool = nullptr;
    return f(&pool, nullptr);
  });
  add<decltype(cudaMemPoolCreate)>(c, {"cudaMemPoolCreate"}, "unpinned allocation type", kValue, [](auto f, Env&) {
    cudaMemPool_t pool = nullptr;
    cudaMemPoolProps props{};
    props.location.type = cudaMemLocationTypeDevice;
    return f(&pool, &props);
  });
  add<decltype(cudaMemPoolDestroy)>(c, {"cudaMemPoolDestroy"}, "unknown pool", kValue,
                                    [](auto f, Env& e) { return f(e.bogus<cudaMemPool_t>()); });
  for (const char* name : {"cudaMemPoolSetAttribute", "cudaMemPoolGetAttribute"}) {
    add<decltype(cudaMemPoolSetAttribute)>(c, {name}, "unknown pool", kValue, [](auto f, Env& e) {
      cuuint64_t value = 0;
      return f(e.bogus<cudaMemPool_t>(), cudaMemPoolAttrReleaseThreshold, &value);
    });
  }
  add<decltype(cudaMemPoolTrimTo)>(c, {"cudaMemPoolTrimTo"}, "unknown pool", kValue,
                                   [](auto f, Env& e) { return f(e.bogus<cudaMemPool_t>(), 0); });
  const auto from_pool = {"cudaMallocFromPoolAsync", "cudaMallocFromPoolAsync_ptsz"};
  add<decltype(cudaMallocFromPoolAsync)>(c, from_pool, "NULL pointer", kValue, [](auto f, Env& e) {
    return f(nullptr, 4096, e.bogus<cudaMemPool_t>(), e.stream);
  });
  add<decltype(cudaMallocFromPoolAsync)>(c, from_pool, "unknown pool", kValue, [](auto f, Env& e) {
    void* p = nullptr;
    return f(&p, 4096, e.bogus<cudaMemPool_t>(), e.stream);
  });
  add<decltype(cudaIpcGetMemHandle)>(c, {"cudaIpcGetMemHandle"}, "NULL handle", kValue,
                                     [](auto f, Env& e) { return f(nullptr, e.alloc); });
  add<decltype(cudaIpcGetMemHandle)>(c, {"cudaIpcGetMemHandle"}, "host pointer", kValue, [](auto f, Env& e) {
    cudaIpcMemHandle_t h{};
    return f(&h, e.host);
  });
}

void add_stream_cases(std::vector<Case>& c) {
  add<decltype(cudaStreamCreate)>(c, {"cudaStreamCreate"}, "NULL stream", kValue,
                                  [](auto f, Env&) { return f(nullptr); });
  add<decltype(cudaStreamCreateWithFlags)>(c, {"cudaStreamCreateWithFlags"}, "NULL stream", kValue,
                                           [](auto f, Env&) { return f(nullptr, 0); });
  add<decltype(cudaStreamCreateWithFlags)>(c, {"cudaStreamCreateWithFlags"}, "unknown flags", kValue, [](auto f, Env&) {
    cudaStream_t s = nullptr;
    return f(&s, 0x80);
  });
  add<decltype(cudaStreamDestroy)>(c, {"cudaStreamDestroy"}, "unknown stream", kHandle,
                                   [](auto f, Env& e) { return f(e.bogus<cudaStream_t>()); });
  add<decltype(cudaStreamSynchronize)>(c, {"cudaStreamSynchronize", "cudaStreamSynchronize_ptsz"}, "unknown stream",
                                       kHandle, [](auto f, Env& e) { return f(e.bogus<cudaStream_t>()); });
  add<decltype(cudaStreamQuery)>(c, {"cudaStreamQuery", "cudaStreamQuery_ptsz"}, "unknown stream", kHandle,
                                 [](auto f, Env& e) { return f(e.bogus<cudaStream_t>()); });
  const auto begin = {"cudaStreamBeginCapture", "cudaStreamBeginCapture_ptsz"};
  add<decltype(cudaStreamBeginCapture)>(c, begin, "mode out of range", kValue, [](auto f, Env& e) {
    return f(e.stream, out_of_range<cudaStreamCaptureMode>());
  });
  add<decltype(cudaStreamBeginCapture)>(c, begin, "unknown stream", kHandle, [](auto f, Env& e) {
    return f(e.bogus<cudaStream_t>(), cudaStreamCaptureModeGlobal);
  });
  const auto end = {"cudaStreamEndCapture", "cudaStreamEndCapture_ptsz"};
  add<decltype(cudaStreamEndCapture)>(c, end, "NULL graph", kValue,
                                      [](auto f, Env& e) { return f(e.stream, nullptr); });
  add<decltype(cudaStreamEndCapture)>(c, end, "unknown stream", kHandle, [](auto f, Env& e) {
    cudaGraph_t g = nullptr;
    return f(e.bogus<cudaStream_t>(), &g);
  });
  const auto capturing = {"cudaStreamIsCapturing", "cudaStreamIsCapturing_ptsz"};
  add<decltype(cudaStreamIsCapturing)>(c, capturing, "NULL status", kValue,
                                       [](auto f, Env& e) { return f(e.stream, nullptr); });
  add<decltype(cudaStreamIsCapturing)>(c, capturing, "unknown stream", kHandle, [](auto f, Env& e) {
    cudaStreamCaptureStatus s{};
    return f(e.bogus<cudaStream_t>(), &s);
  });
  const auto info = {"cudaStreamGetCaptureInfo", "cudaStreamGetCaptureInfo_ptsz"};
  add<decltype(cudaStreamGetCaptureInfo)>(c, info, "NULL status", kValue, [](auto f, Env& e) {
    return f(e.stream, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  });
  add<decltype(cudaStreamGetCaptureInfo)>(c, info, "unknown stream", kHandle, [](auto f, Env& e) {
    cudaStreamCaptureStatus s{};
    return f(e.bogus<cudaStream_t>(), &s, nullptr, nullptr, nullptr, nullptr, nullptr);
  });
  add<decltype(cudaThreadExchangeStreamCaptureMode)>(c, {"cudaThreadExchangeStreamCaptureMode"}, "NULL mode", kValue,
                                                     [](auto f, Env&) { return f(nullptr); });
  add<decltype(cudaThreadExchangeStreamCaptureMode)>(c, {"cudaThreadExchangeStreamCaptureMode"}, "mode out of range",
                                                     kValue, [](auto f, Env&) {
                                                       auto mode = out_of_range<cudaStreamCaptureMode>();
                                                       return f(&mode);
                                                     });
}

void add_graph_and_kernel_cases(std::vector<Case>& c) {
  const auto instantiate = {"cudaGraphInstantiate", "cudaGraphInstantiateWithFlags"};
  add<decltype(cudaGraphInstantiate)>(c, instantiate, "NULL exec", kValue,
                                      [](auto f, Env& e) { return f(nullptr, e.graph, 0); });
  add<decltype(cudaGraphInstantiate)>(c, instantiate, "unknown graph", kValue, [](auto f, Env& e) {
    cudaGraphExec_t x = nullptr;
    return f(&x, e.bogus<cudaGraph_t>(), 0);
  });
  add<decltype(cudaGraphInstantiate)>(c, instantiate, "unknown flags", kValue, [](auto f, Env& e) {
    cudaGraphExec_t x = nullptr;
    return f(&x, e.graph, 1ULL << 40);
  });
  const auto with_params = {"cudaGraphInstantiateWithParams", "cudaGraphInstantiateWithParams_ptsz"};
  add<decltype(cudaGraphInstantiateWithParams)>(c, with_params, "NULL params", kValue, [](auto f, Env& e) {
    cudaGraphExec_t x = nullptr;
    return f(&x, e.graph, nullptr);
  });
  add<decltype(cudaGraphInstantiateWithParams)>(c, with_params, "unknown flags", kValue, [](auto f, Env& e) {
    cudaGraphExec_t x = nullptr;
    cudaGraphInstantiateParams p{};
    p.flags = 1ULL << 40;
    return f(&x, e.graph, &p);
  });
  const auto launch_graph = {"cudaGraphLaunch", "cudaGraphLaunch_ptsz"};
  add<decltype(cudaGraphLaunch)>(c, launch_graph, "unknown exec", kValue,
                                 [](auto f, Env& e) { return f(e.bogus<cudaGraphExec_t>(), e.stream); });
  add<decltype(cudaGraphLaunch)>(c, launch_graph, "unknown stream", kHandle,
                                 [](auto f, Env& e) { return f(e.exec, e.bogus<cudaStream_t>()); });
  add<decltype(cudaGraphExecDestroy)>(c, {"cudaGraphExecDestroy"}, "unknown exec", kValue,
                                      [](auto f, Env& e) { return f(e.bogus<cudaGraphExec_t>()); });
  add<decltype(cudaGraphDestroy)>(c, {"cudaGraphDestroy"}, "unknown graph", kValue,
                                  [](auto f, Env& e) { return f(e.bogus<cudaGraph_t>()); });

  add<decltype(cudaLibraryLoadData)>(c, {"cudaLibraryLoadData"}, "NULL code", kValue, [](auto f, Env&) {
    cudaLibrary_t l = nullptr;
    return f(&l, nullptr, nullptr, nullptr, 0, nullptr, nullptr, 0);
  });
  add<decltype(cudaLibraryLoadData)>(c, {"cudaLibraryLoadData"}, "option count without options", kValue,
                                     [](auto f, Env&) {
                                       cudaLibrary_t l = nullptr;
                                       return f(&l, kPtx, nullptr, nullptr, 0, nullptr, nullptr, 3);
                                     });
  add<decltype(cudaLibraryGetKernel)>(c, {"cudaLibraryGetKernel"}, "NULL name", kValue, [](auto f, Env& e) {
    cudaKernel_t k = nullptr;
    return f(&k, e.library, nullptr);
  });
  add<decltype(cudaLibraryGetKernel)>(c, {"cudaLibraryGetKernel"}, "unknown library", kHandle, [](auto f, Env& e) {
    cudaKernel_t k = nullptr;
    return f(&k, e.bogus<cudaLibrary_t>(), "rt_arguments_noop");
  });
  add<decltype(cudaLibraryUnload)>(c, {"cudaLibraryUnload"}, "unknown library", kHandle,
                                   [](auto f, Env& e) { return f(e.bogus<cudaLibrary_t>()); });

  const auto launch = {"cudaLaunchKernel", "cudaLaunchKernel_ptsz"};
  auto launch_case = [&c, &launch](const char* bad, cudaError_t expected, dim3 grid, dim3 block, bool bogus_function,
                                   bool bogus_stream, size_t shared) {
    add<decltype(cudaLaunchKernel)>(c, launch, bad, expected, [=](auto f, Env& e) {
      void* arg = nullptr;
      void* args[] = {&arg};
      const void* func = bogus_function ? e.bogus<const void*>() : static_cast<const void*>(e.kernel);
      return f(func, grid, block, args, shared, bogus_stream ? e.bogus<cudaStream_t>() : e.stream);
    });
  };
  add<decltype(cudaLaunchKernel)>(c, launch, "NULL function", cudaErrorInvalidDeviceFunction,
                                  [](auto f, Env& e) { return f(nullptr, dim3(1), dim3(1), nullptr, 0, e.stream); });
  launch_case("unknown function", cudaErrorInvalidDeviceFunction, dim3(1), dim3(1), true, false, 0);
  // Approximation (docs/simulator.md): the driver's CUDA_ERROR_INVALID_HANDLE does not say whether the
  // function or the stream was unknown, and the runtime reports it as an unknown function.
  launch_case("unknown stream", cudaErrorInvalidDeviceFunction, dim3(1), dim3(1), false, true, 0);
  launch_case("block of 2048 threads", kConfig, dim3(1), dim3(2048), false, false, 0);
  launch_case("block of 2^32 threads (wraps in 32 bits)", kConfig, dim3(1), dim3(65536, 65536), false, false, 0);
  launch_case("block z beyond 64", kConfig, dim3(1), dim3(1, 1, 128), false, false, 0);
  launch_case("grid y beyond 65535", kConfig, dim3(1, 65536), dim3(1), false, false, 0);
  launch_case("shared memory beyond 32 bits", kValue, dim3(1), dim3(1), false, false, 1ULL << 33);
}

using EventRecordFn = cudaError_t(cudaEvent_t, cudaStream_t);
using StreamWaitFn = cudaError_t(cudaStream_t, cudaEvent_t, unsigned);

void add_event_ipc_and_peer_cases(std::vector<Case>& c) {
  add<decltype(cudaEventCreate)>(c, {"cudaEventCreate"}, "NULL event", kValue, [](auto f, Env&) { return f(nullptr); });
  add<decltype(cudaEventCreateWithFlags)>(c, {"cudaEventCreateWithFlags"}, "interprocess with timing", kValue,
                                          [](auto f, Env&) {
                                            cudaEvent_t ev = nullptr;
                                            return f(&ev, cudaEventInterprocess);
                                          });
  add<decltype(cudaEventCreateWithFlags)>(c, {"cudaEventCreateWithFlags"}, "unknown flags", kValue, [](auto f, Env&) {
    cudaEvent_t ev = nullptr;
    return f(&ev, 0x100);
  });
  add<EventRecordFn>(c, {"cudaEventRecord", "cudaEventRecord_ptsz"}, "unknown event", kHandle,
                     [](auto f, Env& e) { return f(e.bogus<cudaEvent_t>(), e.stream); });
  add<decltype(cudaEventQuery)>(c, {"cudaEventQuery", "cudaEventSynchronize", "cudaEventDestroy"}, "unknown event",
                                kHandle, [](auto f, Env& e) { return f(e.bogus<cudaEvent_t>()); });
  add<decltype(cudaEventElapsedTime)>(c, {"cudaEventElapsedTime"}, "NULL result", kValue,
                                      [](auto f, Env& e) { return f(nullptr, e.bogus<cudaEvent_t>(), e.bogus<cudaEvent_t>()); });
  add<decltype(cudaEventElapsedTime)>(c, {"cudaEventElapsedTime"}, "unknown events", kHandle, [](auto f, Env& e) {
    float ms = 0;
    return f(&ms, e.bogus<cudaEvent_t>(), e.bogus<cudaEvent_t>());
  });
  add<StreamWaitFn>(c, {"cudaStreamWaitEvent", "cudaStreamWaitEvent_ptsz"}, "unknown event", kHandle,
                    [](auto f, Env& e) { return f(e.stream, e.bogus<cudaEvent_t>(), 0); });
  add<decltype(cudaIpcOpenMemHandle)>(c, {"cudaIpcOpenMemHandle"}, "NULL pointer", kValue,
                                      [](auto f, Env&) { return f(nullptr, cudaIpcMemHandle_t{}, cudaIpcMemLazyEnablePeerAccess); });
  add<decltype(cudaIpcOpenMemHandle)>(c, {"cudaIpcOpenMemHandle"}, "zeroed handle", kHandle, [](auto f, Env&) {
    void* p = nullptr;
    return f(&p, cudaIpcMemHandle_t{}, cudaIpcMemLazyEnablePeerAccess);
  });
  add<decltype(cudaIpcCloseMemHandle)>(c, {"cudaIpcCloseMemHandle"}, "memory this process allocated", kValue,
                                       [](auto f, Env& e) { return f(e.alloc); });
  add<decltype(cudaIpcGetEventHandle)>(c, {"cudaIpcGetEventHandle"}, "NULL handle", kValue,
                                       [](auto f, Env& e) { return f(nullptr, e.bogus<cudaEvent_t>()); });
  add<decltype(cudaIpcGetEventHandle)>(c, {"cudaIpcGetEventHandle"}, "unknown event", kHandle, [](auto f, Env& e) {
    cudaIpcEventHandle_t h{};
    return f(&h, e.bogus<cudaEvent_t>());
  });
  add<decltype(cudaIpcOpenEventHandle)>(c, {"cudaIpcOpenEventHandle"}, "NULL event", kValue,
                                        [](auto f, Env&) { return f(nullptr, cudaIpcEventHandle_t{}); });
  add<decltype(cudaIpcOpenEventHandle)>(c, {"cudaIpcOpenEventHandle"}, "zeroed handle", kHandle, [](auto f, Env&) {
    cudaEvent_t event = nullptr;
    return f(&event, cudaIpcEventHandle_t{});
  });
  add<decltype(cudaDeviceEnablePeerAccess)>(c, {"cudaDeviceEnablePeerAccess"}, "itself", kDevice,
                                            [](auto f, Env&) { return f(0, 0); });
  add<decltype(cudaDeviceEnablePeerAccess)>(c, {"cudaDeviceEnablePeerAccess"}, "flags not 0", kValue,
                                            [](auto f, Env&) { return f(0, 1); });
  add<decltype(cudaDeviceEnablePeerAccess)>(c, {"cudaDeviceEnablePeerAccess"}, "bad peer ordinal", kDevice,
                                            [](auto f, Env&) { return f(4, 0); });
  add<decltype(cudaDeviceDisablePeerAccess)>(c, {"cudaDeviceDisablePeerAccess"}, "bad peer ordinal", kDevice,
                                             [](auto f, Env&) { return f(4); });
  add<decltype(cudaDeviceDisablePeerAccess)>(c, {"cudaDeviceDisablePeerAccess"}, "never enabled",
                                             cudaErrorPeerAccessNotEnabled, [](auto f, Env&) { return f(0); });
  add<decltype(cudaDeviceCanAccessPeer)>(c, {"cudaDeviceCanAccessPeer"}, "NULL result", kValue,
                                         [](auto f, Env&) { return f(nullptr, 0, 0); });
  add<decltype(cudaDeviceCanAccessPeer)>(c, {"cudaDeviceCanAccessPeer"}, "bad peer ordinal", kDevice, [](auto f, Env&) {
    int can = 0;
    return f(&can, 0, 3);
  });
}

using PriorityFn = cudaError_t(cudaStream_t, int*);

void add_host_and_priority_cases(std::vector<Case>& c) {
  add<decltype(cudaHostAlloc)>(c, {"cudaHostAlloc"}, "unknown flags", kValue, [](auto f, Env&) {
    void* p = nullptr;
    return f(&p, 4096, 0x80);
  });
  add<decltype(cudaMallocHost)>(c, {"cudaMallocHost"}, "NULL pointer", kValue, [](auto f, Env&) { return f(nullptr, 4096); });
  add<decltype(cudaFreeHost)>(c, {"cudaFreeHost"}, "not pinned memory", kValue, [](auto f, Env& e) { return f(e.host); });
  add<decltype(cudaHostRegister)>(c, {"cudaHostRegister"}, "device memory", kValue,
                                  [](auto f, Env& e) { return f(e.alloc, 4096, 0); });
  add<decltype(cudaHostUnregister)>(c, {"cudaHostUnregister"}, "never registered", cudaErrorHostMemoryNotRegistered,
                                    [](auto f, Env& e) { return f(e.host); });
  add<decltype(cudaHostGetDevicePointer)>(c, {"cudaHostGetDevicePointer"}, "not pinned memory", kValue,
                                          [](auto f, Env& e) {
                                            void* d = nullptr;
                                            return f(&d, e.host, 0);
                                          });
  add<decltype(cudaStreamCreateWithPriority)>(c, {"cudaStreamCreateWithPriority"}, "unknown flags", kValue,
                                              [](auto f, Env&) {
                                                cudaStream_t s = nullptr;
                                                return f(&s, 0x80, 0);
                                              });
  add<PriorityFn>(c, {"cudaStreamGetPriority", "cudaStreamGetPriority_ptsz"}, "unknown stream", kHandle,
                  [](auto f, Env& e) {
                    int p = 0;
                    return f(e.bogus<cudaStream_t>(), &p);
                  });
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = [] {
    std::vector<Case> c;
    add_device_and_error_cases(c);
    add_memory_cases(c);
    add_stream_cases(c);
    add_graph_and_kernel_cases(c);
    add_event_ipc_and_peer_cases(c);
    add_host_and_priority_cases(c);
    return c;
  }();
  return all;
}

}  // namespace

class RuntimeArgumentTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    ASSERT_EQ(simcuda_reset(kSettings), 0);
    simcudart_reset_for_tests();
    ASSERT_EQ(cudaStreamCreateWithFlags(&env_.stream, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&env_.alloc, kAllocBytes), cudaSuccess);
    ASSERT_EQ(cudaLibraryLoadData(&env_.library, kPtx, nullptr, nullptr, 0, nullptr, nullptr, 0), cudaSuccess);
    ASSERT_EQ(cudaLibraryGetKernel(&env_.kernel, env_.library, "rt_arguments_noop"), cudaSuccess);
    ASSERT_EQ(cudaStreamBeginCapture(env_.stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(env_.alloc, 7, 16, env_.stream), cudaSuccess);
    ASSERT_EQ(cudaStreamEndCapture(env_.stream, &env_.graph), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&env_.exec, env_.graph, 0), cudaSuccess);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  }
  void TearDown() override {
    simcuda_reset(nullptr);
    simcudart_reset_for_tests();
  }

  Env env_;
};

TEST_P(RuntimeArgumentTest, ReturnsTheRuntimeErrorAndChangesNothing) {
  const Case& c = GetParam();
  const unsigned long long used = simcuda_device_used_bytes(0);

  EXPECT_EQ(c.expected, c.call(env_)) << c.function << " with " << c.bad;
  // Every failure is the thread's last error, as in the real runtime.
  if (c.expected != cudaSuccess) {
    EXPECT_EQ(c.expected, cudaGetLastError()) << c.function;
  }

  EXPECT_EQ(used, simcuda_device_used_bytes(0)) << "device memory charged by a failed call";
  int device = -1;
  EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, 0);
  EXPECT_EQ(cudaMemset(env_.alloc, 1, kAllocBytes), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(env_.exec, env_.stream), cudaSuccess);
  void* arg = nullptr;
  void* args[] = {&arg};
  EXPECT_EQ(cudaLaunchKernel(static_cast<const void*>(env_.kernel), dim3(1), dim3(1), args, 0, env_.stream),
            cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(env_.stream), cudaSuccess);
}

INSTANTIATE_TEST_SUITE_P(EveryExport, RuntimeArgumentTest, ::testing::ValuesIn(cases()),
                         kvremap::testing::argument_case_name<Case>);

TEST(RuntimeArgumentCoverage, EveryExportHasCases) {
  Dl_info info{};
  ASSERT_NE(0, dladdr(reinterpret_cast<void*>(&cudaMalloc), &info));
  const std::set<std::string> exports = kvremap::testing::exported_functions(info.dli_fname, "cuda");
  ASSERT_GT(exports.size(), 40u) << info.dli_fname;
  std::set<std::string> covered;
  for (const Case& c : cases()) covered.insert(c.function);
  for (const std::string& name : exports) EXPECT_TRUE(covered.count(name)) << name << " has no bad-argument case";
  for (const std::string& name : covered) EXPECT_TRUE(exports.count(name)) << name << " is not exported";
}
