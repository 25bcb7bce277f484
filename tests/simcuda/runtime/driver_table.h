// The driver entry points the runtime uses, resolved once through cuGetProcAddress.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include "export.h"

namespace simcudart {

// A stream-ordered driver function, resolved twice: with CU_GET_PROC_ADDRESS_DEFAULT for the plain
// cuda* exports (stream 0 = legacy NULL stream) and with
// CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM for the _ptsz/_ptds exports (the driver hands out
// its _ptsz/_ptds variant, where stream 0 = the per-thread default stream). Both have one ABI.
template <class Fn>
struct StreamOrdered {
  Fn legacy = nullptr;
  Fn per_thread = nullptr;
  Fn pick(StreamApi api) const noexcept { return api == StreamApi::per_thread ? per_thread : legacy; }
};

// Member types name the exact ABI version requested (PFN_<name>_v<version>), so a pointer is never
// called with a signature other than the one cuGetProcAddress was asked for.
struct DriverTable {
  // The resolver every other entry came from; cudaGetDriverEntryPoint* forwards to it.
  PFN_cuGetProcAddress_v12000 cuGetProcAddress = nullptr;

  PFN_cuInit_v2000 cuInit = nullptr;
  PFN_cuDriverGetVersion_v2020 cuDriverGetVersion = nullptr;
  PFN_cuDeviceGetCount_v2000 cuDeviceGetCount = nullptr;
  PFN_cuDeviceGet_v2000 cuDeviceGet = nullptr;
  PFN_cuDeviceGetAttribute_v2000 cuDeviceGetAttribute = nullptr;
  PFN_cuDevicePrimaryCtxRetain_v7000 cuDevicePrimaryCtxRetain = nullptr;
  PFN_cuDevicePrimaryCtxRelease_v11000 cuDevicePrimaryCtxRelease = nullptr;
  PFN_cuCtxSetCurrent_v4000 cuCtxSetCurrent = nullptr;
  PFN_cuCtxGetCurrent_v4000 cuCtxGetCurrent = nullptr;
  PFN_cuCtxSynchronize_v2000 cuCtxSynchronize = nullptr;

  // Memory: asked for by base name at 3020, where the driver hands out the _v2 ABI.
  PFN_cuMemAlloc_v3020 cuMemAlloc = nullptr;
  PFN_cuMemFree_v3020 cuMemFree = nullptr;
  PFN_cuMemGetInfo_v3020 cuMemGetInfo = nullptr;
  PFN_cuMemAllocPitch_v3020 cuMemAllocPitch = nullptr;
  PFN_cuMemGetAddressRange_v3020 cuMemGetAddressRange = nullptr;
  StreamOrdered<PFN_cuMemsetD8_v3020> cuMemsetD8;
  StreamOrdered<PFN_cuMemsetD8Async_v3020> cuMemsetD8Async;
  // The kind-specific copies are resolved like the real runtime does (so an interposer sees the
  // same queries) even though unified addressing lets every copy go through cuMemcpy*.
  StreamOrdered<PFN_cuMemcpyHtoD_v3020> cuMemcpyHtoD;
  StreamOrdered<PFN_cuMemcpyDtoH_v3020> cuMemcpyDtoH;
  StreamOrdered<PFN_cuMemcpyDtoD_v3020> cuMemcpyDtoD;
  StreamOrdered<PFN_cuMemcpyHtoDAsync_v3020> cuMemcpyHtoDAsync;
  StreamOrdered<PFN_cuMemcpyDtoHAsync_v3020> cuMemcpyDtoHAsync;
  StreamOrdered<PFN_cuMemcpyDtoDAsync_v3020> cuMemcpyDtoDAsync;
  StreamOrdered<PFN_cuMemcpy_v4000> cuMemcpy;
  StreamOrdered<PFN_cuMemcpyAsync_v4000> cuMemcpyAsync;
  StreamOrdered<PFN_cuMemAllocAsync_v11020> cuMemAllocAsync;
  StreamOrdered<PFN_cuMemFreeAsync_v11020> cuMemFreeAsync;
  PFN_cuIpcGetMemHandle_v4010 cuIpcGetMemHandle = nullptr;
  PFN_cuIpcOpenMemHandle_v11000 cuIpcOpenMemHandle = nullptr;
  PFN_cuIpcCloseMemHandle_v4010 cuIpcCloseMemHandle = nullptr;
  PFN_cuDeviceCanAccessPeer_v4000 cuDeviceCanAccessPeer = nullptr;
  // Strided and peer copies and sets.
  StreamOrdered<PFN_cuMemcpy2D_v3020> cuMemcpy2D;
  StreamOrdered<PFN_cuMemcpy2DAsync_v3020> cuMemcpy2DAsync;
  StreamOrdered<PFN_cuMemsetD2D8_v3020> cuMemsetD2D8;
  StreamOrdered<PFN_cuMemsetD2D8Async_v3020> cuMemsetD2D8Async;
  StreamOrdered<PFN_cuMemcpyPeer_v4000> cuMemcpyPeer;
  StreamOrdered<PFN_cuMemcpyPeerAsync_v4000> cuMemcpyPeerAsync;
  // Stream-ordered pools and IPC event handles.
  PFN_cuDeviceGetDefaultMemPool_v11020 cuDeviceGetDefaultMemPool = nullptr;
  PFN_cuDeviceGetMemPool_v11020 cuDeviceGetMemPool = nullptr;
  PFN_cuDeviceSetMemPool_v11020 cuDeviceSetMemPool = nullptr;
  PFN_cuMemPoolCreate_v11020 cuMemPoolCreate = nullptr;
  PFN_cuMemPoolDestroy_v11020 cuMemPoolDestroy = nullptr;
  PFN_cuMemPoolSetAttribute_v11020 cuMemPoolSetAttribute = nullptr;
  PFN_cuMemPoolGetAttribute_v11020 cuMemPoolGetAttribute = nullptr;
  PFN_cuMemPoolTrimTo_v11020 cuMemPoolTrimTo = nullptr;
  StreamOrdered<PFN_cuMemAllocFromPoolAsync_v11020> cuMemAllocFromPoolAsync;
  PFN_cuIpcGetEventHandle_v4010 cuIpcGetEventHandle = nullptr;
  PFN_cuIpcOpenEventHandle_v4010 cuIpcOpenEventHandle = nullptr;
  // Device identity, for cudaGetDeviceProperties.
  PFN_cuDeviceGetName_v2000 cuDeviceGetName = nullptr;
  PFN_cuDeviceTotalMem_v3020 cuDeviceTotalMem = nullptr;
  PFN_cuDeviceGetUuid_v11040 cuDeviceGetUuid = nullptr;

  // Pinned host memory and stream priorities.
  PFN_cuMemHostAlloc_v2020 cuMemHostAlloc = nullptr;
  PFN_cuMemFreeHost_v2000 cuMemFreeHost = nullptr;
  PFN_cuMemHostRegister_v6050 cuMemHostRegister = nullptr;
  PFN_cuMemHostUnregister_v4000 cuMemHostUnregister = nullptr;
  PFN_cuMemHostGetDevicePointer_v3020 cuMemHostGetDevicePointer = nullptr;
  PFN_cuStreamCreateWithPriority_v5050 cuStreamCreateWithPriority = nullptr;
  StreamOrdered<PFN_cuStreamGetPriority_v5050> cuStreamGetPriority;

  // Events.
  PFN_cuEventCreate_v2000 cuEventCreate = nullptr;
  PFN_cuEventDestroy_v4000 cuEventDestroy = nullptr;
  StreamOrdered<PFN_cuEventRecord_v2000> cuEventRecord;
  PFN_cuEventQuery_v2000 cuEventQuery = nullptr;
  PFN_cuEventSynchronize_v2000 cuEventSynchronize = nullptr;
  PFN_cuEventElapsedTime_v12080 cuEventElapsedTime = nullptr;
  StreamOrdered<PFN_cuStreamWaitEvent_v3020> cuStreamWaitEvent;

  // Streams and capture.
  PFN_cuStreamCreate_v2000 cuStreamCreate = nullptr;
  PFN_cuStreamDestroy_v4000 cuStreamDestroy = nullptr;
  StreamOrdered<PFN_cuStreamSynchronize_v2000> cuStreamSynchronize;
  StreamOrdered<PFN_cuStreamQuery_v2000> cuStreamQuery;
  StreamOrdered<PFN_cuStreamBeginCapture_v10010> cuStreamBeginCapture;
  StreamOrdered<PFN_cuStreamEndCapture_v10000> cuStreamEndCapture;
  StreamOrdered<PFN_cuStreamIsCapturing_v10000> cuStreamIsCapturing;
  StreamOrdered<PFN_cuStreamGetCaptureInfo_v12030> cuStreamGetCaptureInfo;
  PFN_cuThreadExchangeStreamCaptureMode_v10010 cuThreadExchangeStreamCaptureMode = nullptr;

  // Graphs.
  PFN_cuGraphInstantiateWithFlags_v11040 cuGraphInstantiateWithFlags = nullptr;
  StreamOrdered<PFN_cuGraphInstantiateWithParams_v12000> cuGraphInstantiateWithParams;
  StreamOrdered<PFN_cuGraphLaunch_v10000> cuGraphLaunch;
  PFN_cuGraphExecDestroy_v10000 cuGraphExecDestroy = nullptr;
  PFN_cuGraphDestroy_v10000 cuGraphDestroy = nullptr;

  // Libraries and launches.
  PFN_cuLibraryLoadData_v12000 cuLibraryLoadData = nullptr;
  PFN_cuLibraryGetKernel_v12000 cuLibraryGetKernel = nullptr;
  PFN_cuLibraryUnload_v12000 cuLibraryUnload = nullptr;
  StreamOrdered<PFN_cuLaunchKernel_v4000> cuLaunchKernel;
};

// The table, resolved on first call (thread-safe, once per process); nullptr when libcuda.so.1
// cannot be loaded or does not export cuGetProcAddress_v2. Entries the driver does not know stay
// nullptr.
const DriverTable* driver_table() noexcept;

// Calls one resolved entry and translates its result; a missing entry is the call's error.
template <class Fn, class... Args>
cudaError_t call_driver(Fn fn, Args... args) noexcept {
  if (fn == nullptr) return kMissingDriverFunction;
  return to_runtime_error(fn(args...));
}

}  // namespace simcudart
