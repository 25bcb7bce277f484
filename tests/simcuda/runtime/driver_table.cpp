// Resolves the driver exactly as the real libcudart.so.13 does: dlopen, one dlsym, cuGetProcAddress.
//
// The real runtime has no NEEDED on libcuda. It dlopens libcuda.so.1, looks up only
// cuGetProcAddress_v2, asks that for "cuGetProcAddress" at 12000, and resolves everything else
// through the pointer it gets back. An LD_PRELOAD interposer (kvremap) hooks exactly these steps,
// so this file must not take any other path to the driver: no further dlsym, no direct calls.
#include "driver_table.h"

#include <dlfcn.h>

#include <mutex>

namespace simcudart {
namespace {

class Resolver {
 public:
  explicit Resolver(PFN_cuGetProcAddress_v12000 resolve) : resolve_(resolve) {}

  template <class Fn>
  void plain(Fn& slot, const char* name, int version) {
    slot = lookup<Fn>(name, version, CU_GET_PROC_ADDRESS_DEFAULT);
  }

  template <class Fn>
  void stream_ordered(StreamOrdered<Fn>& slot, const char* name, int version) {
    slot.legacy = lookup<Fn>(name, version, CU_GET_PROC_ADDRESS_DEFAULT);
    // Same name and version: the flag alone selects the per-thread variant of that ABI.
    slot.per_thread = lookup<Fn>(name, version, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  }

 private:
  template <class Fn>
  Fn lookup(const char* name, int version, cuuint64_t flags) {
    void* pfn = nullptr;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (resolve_(name, &pfn, version, flags, &status) != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS) {
      return nullptr;
    }
    return reinterpret_cast<Fn>(pfn);
  }

  PFN_cuGetProcAddress_v12000 resolve_;
};

void resolve_all(DriverTable& t) {
  Resolver r(t.cuGetProcAddress);

  r.plain(t.cuInit, "cuInit", 2000);
  r.plain(t.cuDriverGetVersion, "cuDriverGetVersion", 2020);
  r.plain(t.cuDeviceGetCount, "cuDeviceGetCount", 2000);
  r.plain(t.cuDeviceGet, "cuDeviceGet", 2000);
  r.plain(t.cuDeviceGetAttribute, "cuDeviceGetAttribute", 2000);
  r.plain(t.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000);
  r.plain(t.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease", 11000);
  r.plain(t.cuCtxSetCurrent, "cuCtxSetCurrent", 4000);
  r.plain(t.cuCtxGetCurrent, "cuCtxGetCurrent", 4000);
  r.plain(t.cuCtxSynchronize, "cuCtxSynchronize", 2000);

  r.plain(t.cuMemAlloc, "cuMemAlloc", 3020);
  r.plain(t.cuMemFree, "cuMemFree", 3020);
  r.plain(t.cuMemGetInfo, "cuMemGetInfo", 3020);
  r.plain(t.cuMemAllocPitch, "cuMemAllocPitch", 3020);
  r.plain(t.cuMemGetAddressRange, "cuMemGetAddressRange", 3020);
  r.stream_ordered(t.cuMemsetD8, "cuMemsetD8", 3020);
  r.stream_ordered(t.cuMemsetD8Async, "cuMemsetD8Async", 3020);
  r.stream_ordered(t.cuMemcpyHtoD, "cuMemcpyHtoD", 3020);
  r.stream_ordered(t.cuMemcpyDtoH, "cuMemcpyDtoH", 3020);
  r.stream_ordered(t.cuMemcpyDtoD, "cuMemcpyDtoD", 3020);
  r.stream_ordered(t.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync", 3020);
  r.stream_ordered(t.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync", 3020);
  r.stream_ordered(t.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync", 3020);
  r.stream_ordered(t.cuMemcpy, "cuMemcpy", 4000);
  r.stream_ordered(t.cuMemcpyAsync, "cuMemcpyAsync", 4000);
  r.stream_ordered(t.cuMemAllocAsync, "cuMemAllocAsync", 11020);
  r.stream_ordered(t.cuMemFreeAsync, "cuMemFreeAsync", 11020);
  r.plain(t.cuIpcGetMemHandle, "cuIpcGetMemHandle", 4010);
  r.plain(t.cuIpcOpenMemHandle, "cuIpcOpenMemHandle", 11000);
  r.plain(t.cuIpcCloseMemHandle, "cuIpcCloseMemHandle", 4010);
  r.plain(t.cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer", 4000);
  r.stream_ordered(t.cuMemcpy2D, "cuMemcpy2D", 3020);
  r.stream_ordered(t.cuMemcpy2DAsync, "cuMemcpy2DAsync", 3020);
  r.stream_ordered(t.cuMemsetD2D8, "cuMemsetD2D8", 3020);
  r.stream_ordered(t.cuMemsetD2D8Async, "cuMemsetD2D8Async", 3020);
  r.stream_ordered(t.cuMemcpyPeer, "cuMemcpyPeer", 4000);
  r.stream_ordered(t.cuMemcpyPeerAsync, "cuMemcpyPeerAsync", 4000);
  r.plain(t.cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", 11020);
  r.plain(t.cuDeviceGetMemPool, "cuDeviceGetMemPool", 11020);
  r.plain(t.cuDeviceSetMemPool, "cuDeviceSetMemPool", 11020);
  r.plain(t.cuMemPoolCreate, "cuMemPoolCreate", 11020);
  r.plain(t.cuMemPoolDestroy, "cuMemPoolDestroy", 11020);
  r.plain(t.cuMemPoolSetAttribute, "cuMemPoolSetAttribute", 11020);
  r.plain(t.cuMemPoolGetAttribute, "cuMemPoolGetAttribute", 11020);
  r.plain(t.cuMemPoolTrimTo, "cuMemPoolTrimTo", 11020);
  r.stream_ordered(t.cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020);
  r.plain(t.cuIpcGetEventHandle, "cuIpcGetEventHandle", 4010);
  r.plain(t.cuIpcOpenEventHandle, "cuIpcOpenEventHandle", 4010);
  r.plain(t.cuDeviceGetName, "cuDeviceGetName", 2000);
  r.plain(t.cuDeviceTotalMem, "cuDeviceTotalMem", 3020);
  r.plain(t.cuDeviceGetUuid, "cuDeviceGetUuid", 11040);

  r.plain(t.cuMemHostAlloc, "cuMemHostAlloc", 2020);
  r.plain(t.cuMemFreeHost, "cuMemFreeHost", 2000);
  r.plain(t.cuMemHostRegister, "cuMemHostRegister", 6050);
  r.plain(t.cuMemHostUnregister, "cuMemHostUnregister", 4000);
  r.plain(t.cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer", 3020);
  r.plain(t.cuStreamCreateWithPriority, "cuStreamCreateWithPriority", 5050);
  r.stream_ordered(t.cuStreamGetPriority, "cuStreamGetPriority", 5050);

  r.plain(t.cuEventCreate, "cuEventCreate", 2000);
  r.plain(t.cuEventDestroy, "cuEventDestroy", 4000);
  r.stream_ordered(t.cuEventRecord, "cuEventRecord", 2000);
  r.plain(t.cuEventQuery, "cuEventQuery", 2000);
  r.plain(t.cuEventSynchronize, "cuEventSynchronize", 2000);
  r.plain(t.cuEventElapsedTime, "cuEventElapsedTime", 12080);
  r.stream_ordered(t.cuStreamWaitEvent, "cuStreamWaitEvent", 3020);

  r.plain(t.cuStreamCreate, "cuStreamCreate", 2000);
  r.plain(t.cuStreamDestroy, "cuStreamDestroy", 4000);
  r.stream_ordered(t.cuStreamSynchronize, "cuStreamSynchronize", 2000);
  r.stream_ordered(t.cuStreamQuery, "cuStreamQuery", 2000);
  r.stream_ordered(t.cuStreamBeginCapture, "cuStreamBeginCapture", 10010);
  r.stream_ordered(t.cuStreamEndCapture, "cuStreamEndCapture", 10000);
  r.stream_ordered(t.cuStreamIsCapturing, "cuStreamIsCapturing", 10000);
  r.stream_ordered(t.cuStreamGetCaptureInfo, "cuStreamGetCaptureInfo", 12030);
  r.plain(t.cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode", 10010);

  r.plain(t.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", 11040);
  r.stream_ordered(t.cuGraphInstantiateWithParams, "cuGraphInstantiateWithParams", 12000);
  r.stream_ordered(t.cuGraphLaunch, "cuGraphLaunch", 10000);
  r.plain(t.cuGraphExecDestroy, "cuGraphExecDestroy", 10000);
  r.plain(t.cuGraphDestroy, "cuGraphDestroy", 10000);

  r.plain(t.cuLibraryLoadData, "cuLibraryLoadData", 12000);
  r.plain(t.cuLibraryGetKernel, "cuLibraryGetKernel", 12000);
  r.plain(t.cuLibraryUnload, "cuLibraryUnload", 12000);
  r.stream_ordered(t.cuLaunchKernel, "cuLaunchKernel", 4000);
}

// Returns false when there is no usable driver; the table then stays unused.
bool load_driver(DriverTable& t) {
  // Local: the runtime reaches the driver only through this handle and the resolver, never by global
  // symbol lookup. (A runtime loaded with dlmopen into a namespace of its own, as bench_overhead's
  // in-process baseline does, could not add the driver to that namespace's global scope: glibc 2.36
  // crashes on RTLD_GLOBAL there.)
  void* handle = dlopen("libcuda.so.1", RTLD_NOW);
  if (handle == nullptr) return false;
  // Never dlclosed: the process keeps calling into it until exit, as with the real runtime.
  auto bootstrap = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(handle, "cuGetProcAddress_v2"));
  if (bootstrap == nullptr) return false;

  void* resolver = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (bootstrap("cuGetProcAddress", &resolver, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS ||
      status != CU_GET_PROC_ADDRESS_SUCCESS || resolver == nullptr) {
    return false;
  }
  t.cuGetProcAddress = reinterpret_cast<PFN_cuGetProcAddress_v12000>(resolver);
  resolve_all(t);
  return true;
}

}  // namespace

const DriverTable* driver_table() noexcept {
  static DriverTable table;
  static bool available = false;
  static std::once_flag once;
  try {
    std::call_once(once, [] { available = load_driver(table); });
  } catch (...) {
    // call_once only throws if the callable does, and load_driver does not; stay defensive
    // because an exception must never reach the host program.
    return nullptr;
  }
  return available ? &table : nullptr;
}

}  // namespace simcudart
