// cuGetProcAddress: the (name, version, flags) → function table through which cudart reaches the driver.
#include <cstring>
#include <string>
#include <unordered_map>

#include "sim_state.h"
#include "sim_stubs.h"

// Exports cuda.h does not declare in its default (legacy-stream, current-ABI) mode.
#undef cuGetProcAddress
#undef cuGraphInstantiate
#undef cuDevicePrimaryCtxRelease
extern "C" {
CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags);
CUresult cuGraphInstantiate(CUgraphExec*, CUgraph, CUgraphNode*, char*, size_t);
CUresult cuGraphInstantiate_v2(CUgraphExec*, CUgraph, CUgraphNode*, char*, size_t);
CUresult cuDevicePrimaryCtxRelease(CUdevice);
CUresult cuStreamGetCaptureInfo_v2(CUstream, CUstreamCaptureStatus*, cuuint64_t*, CUgraph*, const CUgraphNode**,
                                   size_t*);
}
#define SIM_DECLARE_VARIANT(base, variant) extern "C" decltype(base) variant;
SIM_DECLARE_VARIANT(cuMemAllocAsync, cuMemAllocAsync_ptsz)
SIM_DECLARE_VARIANT(cuMemFreeAsync, cuMemFreeAsync_ptsz)
SIM_DECLARE_VARIANT(cuMemsetD8_v2, cuMemsetD8_v2_ptds)
SIM_DECLARE_VARIANT(cuMemsetD8Async, cuMemsetD8Async_ptsz)
SIM_DECLARE_VARIANT(cuMemcpy, cuMemcpy_ptds)
SIM_DECLARE_VARIANT(cuMemcpyAsync, cuMemcpyAsync_ptsz)
SIM_DECLARE_VARIANT(cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds)
SIM_DECLARE_VARIANT(cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds)
SIM_DECLARE_VARIANT(cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds)
SIM_DECLARE_VARIANT(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz)
SIM_DECLARE_VARIANT(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz)
SIM_DECLARE_VARIANT(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz)
SIM_DECLARE_VARIANT(cuStreamSynchronize, cuStreamSynchronize_ptsz)
SIM_DECLARE_VARIANT(cuStreamQuery, cuStreamQuery_ptsz)
SIM_DECLARE_VARIANT(cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz)
SIM_DECLARE_VARIANT(cuStreamEndCapture, cuStreamEndCapture_ptsz)
SIM_DECLARE_VARIANT(cuStreamIsCapturing, cuStreamIsCapturing_ptsz)
SIM_DECLARE_VARIANT(cuStreamGetCaptureInfo_v2, cuStreamGetCaptureInfo_v2_ptsz)
SIM_DECLARE_VARIANT(cuStreamGetCaptureInfo_v3, cuStreamGetCaptureInfo_v3_ptsz)
SIM_DECLARE_VARIANT(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams_ptsz)
SIM_DECLARE_VARIANT(cuGraphLaunch, cuGraphLaunch_ptsz)
SIM_DECLARE_VARIANT(cuLaunchKernel, cuLaunchKernel_ptsz)
SIM_DECLARE_VARIANT(cuLaunchKernelEx, cuLaunchKernelEx_ptsz)

namespace simcuda {
namespace {

struct Entry {
  int version;       // the CUDA version that introduced this ABI of the function
  void* legacy;      // default / legacy-stream variant
  void* per_thread;  // _ptsz/_ptds variant, or nullptr when the function takes no stream
};

template <typename F>
void* address(F* f) {
  return reinterpret_cast<void*>(f);
}

using Table = std::unordered_map<std::string, std::vector<Entry>>;

const Table& table() {
  static const Table t = [] {
    Table t;
    auto add = [&t](const char* name, int version, void* legacy, void* per_thread = nullptr) {
      t[name].push_back(Entry{version, legacy, per_thread});
    };
    add("cuInit", 2000, address(cuInit));
    add("cuDriverGetVersion", 2020, address(cuDriverGetVersion));
    add("cuDeviceGet", 2000, address(cuDeviceGet));
    add("cuDeviceGetCount", 2000, address(cuDeviceGetCount));
    add("cuDeviceGetName", 2000, address(cuDeviceGetName));
    add("cuDeviceGetAttribute", 2000, address(cuDeviceGetAttribute));
    add("cuDeviceTotalMem", 3020, address(cuDeviceTotalMem_v2));
    add("cuDevicePrimaryCtxRetain", 7000, address(cuDevicePrimaryCtxRetain));
    add("cuDevicePrimaryCtxRelease", 7000, address(cuDevicePrimaryCtxRelease));
    add("cuDevicePrimaryCtxRelease", 11000, address(cuDevicePrimaryCtxRelease_v2));
    add("cuCtxGetCurrent", 4000, address(cuCtxGetCurrent));
    add("cuCtxSetCurrent", 4000, address(cuCtxSetCurrent));
    add("cuCtxGetDevice", 2000, address(cuCtxGetDevice));
    add("cuCtxGetDevice", 13000, address(cuCtxGetDevice_v2));
    add("cuCtxSynchronize", 2000, address(cuCtxSynchronize));
    add("cuCtxSynchronize", 13000, address(cuCtxSynchronize_v2));
    add("cuGetErrorName", 6000, address(cuGetErrorName));
    add("cuGetErrorString", 6000, address(cuGetErrorString));
    add("cuGetProcAddress", 11030, address(cuGetProcAddress));
    add("cuGetProcAddress", 12000, address(cuGetProcAddress_v2));

    add("cuMemAlloc", 3020, address(cuMemAlloc_v2));
    add("cuMemAllocPitch", 3020, address(cuMemAllocPitch_v2));
    add("cuMemFree", 3020, address(cuMemFree_v2));
    add("cuMemGetInfo", 3020, address(cuMemGetInfo_v2));
    add("cuMemAllocAsync", 11020, address(cuMemAllocAsync), address(cuMemAllocAsync_ptsz));
    add("cuMemFreeAsync", 11020, address(cuMemFreeAsync), address(cuMemFreeAsync_ptsz));
    add("cuMemsetD8", 3020, address(cuMemsetD8_v2), address(cuMemsetD8_v2_ptds));
    add("cuMemsetD8Async", 3020, address(cuMemsetD8Async), address(cuMemsetD8Async_ptsz));
    add("cuMemcpy", 4000, address(cuMemcpy), address(cuMemcpy_ptds));
    add("cuMemcpyAsync", 4000, address(cuMemcpyAsync), address(cuMemcpyAsync_ptsz));
    add("cuMemcpyHtoD", 3020, address(cuMemcpyHtoD_v2), address(cuMemcpyHtoD_v2_ptds));
    add("cuMemcpyDtoH", 3020, address(cuMemcpyDtoH_v2), address(cuMemcpyDtoH_v2_ptds));
    add("cuMemcpyDtoD", 3020, address(cuMemcpyDtoD_v2), address(cuMemcpyDtoD_v2_ptds));
    add("cuMemcpyHtoDAsync", 3020, address(cuMemcpyHtoDAsync_v2), address(cuMemcpyHtoDAsync_v2_ptsz));
    add("cuMemcpyDtoHAsync", 3020, address(cuMemcpyDtoHAsync_v2), address(cuMemcpyDtoHAsync_v2_ptsz));
    add("cuMemcpyDtoDAsync", 3020, address(cuMemcpyDtoDAsync_v2), address(cuMemcpyDtoDAsync_v2_ptsz));
    add("cuMemAddressReserve", 10020, address(cuMemAddressReserve));
    add("cuMemAddressFree", 10020, address(cuMemAddressFree));
    add("cuMemCreate", 10020, address(cuMemCreate));
    add("cuMemRelease", 10020, address(cuMemRelease));
    add("cuMemMap", 10020, address(cuMemMap));
    add("cuMemUnmap", 10020, address(cuMemUnmap));
    add("cuMemSetAccess", 10020, address(cuMemSetAccess));
    add("cuMemGetAllocationGranularity", 10020, address(cuMemGetAllocationGranularity));
    add("cuMemGetAddressRange", 3020, address(cuMemGetAddressRange_v2));
    add("cuPointerGetAttribute", 4000, address(cuPointerGetAttribute));
    add("cuPointerGetAttributes", 7000, address(cuPointerGetAttributes));
    add("cuMemRetainAllocationHandle", 11000, address(cuMemRetainAllocationHandle));
    add("cuMemExportToShareableHandle", 10020, address(cuMemExportToShareableHandle));
    add("cuMemImportFromShareableHandle", 10020, address(cuMemImportFromShareableHandle));
    add("cuMemGetHandleForAddressRange", 11070, address(cuMemGetHandleForAddressRange));
    add("cuIpcGetMemHandle", 4010, address(cuIpcGetMemHandle));

    add("cuStreamCreate", 2000, address(cuStreamCreate));
    add("cuStreamDestroy", 4000, address(cuStreamDestroy_v2));
    add("cuStreamSynchronize", 2000, address(cuStreamSynchronize), address(cuStreamSynchronize_ptsz));
    add("cuStreamQuery", 2000, address(cuStreamQuery), address(cuStreamQuery_ptsz));
    add("cuStreamBeginCapture", 10010, address(cuStreamBeginCapture_v2), address(cuStreamBeginCapture_v2_ptsz));
    add("cuStreamEndCapture", 10000, address(cuStreamEndCapture), address(cuStreamEndCapture_ptsz));
    add("cuStreamIsCapturing", 10000, address(cuStreamIsCapturing), address(cuStreamIsCapturing_ptsz));
    add("cuStreamGetCaptureInfo", 11030, address(cuStreamGetCaptureInfo_v2), address(cuStreamGetCaptureInfo_v2_ptsz));
    add("cuStreamGetCaptureInfo", 12030, address(cuStreamGetCaptureInfo_v3), address(cuStreamGetCaptureInfo_v3_ptsz));
    add("cuThreadExchangeStreamCaptureMode", 10010, address(cuThreadExchangeStreamCaptureMode));

    add("cuGraphInstantiate", 10000, address(cuGraphInstantiate));
    add("cuGraphInstantiate", 11000, address(cuGraphInstantiate_v2));
    add("cuGraphInstantiateWithFlags", 11040, address(cuGraphInstantiateWithFlags));
    add("cuGraphInstantiateWithParams", 12000, address(cuGraphInstantiateWithParams),
        address(cuGraphInstantiateWithParams_ptsz));
    add("cuGraphLaunch", 10000, address(cuGraphLaunch), address(cuGraphLaunch_ptsz));
    add("cuGraphExecDestroy", 10000, address(cuGraphExecDestroy));
    add("cuGraphDestroy", 10000, address(cuGraphDestroy));

    add("cuModuleLoadData", 2000, address(cuModuleLoadData));
    add("cuModuleLoadDataEx", 2010, address(cuModuleLoadDataEx));
    add("cuModuleGetFunction", 2000, address(cuModuleGetFunction));
    add("cuModuleUnload", 2000, address(cuModuleUnload));
    add("cuLibraryLoadData", 12000, address(cuLibraryLoadData));
    add("cuLibraryGetKernel", 12000, address(cuLibraryGetKernel));
    add("cuLibraryUnload", 12000, address(cuLibraryUnload));
    add("cuKernelGetFunction", 12000, address(cuKernelGetFunction));
    add("cuFuncGetParamInfo", 12040, address(cuFuncGetParamInfo));
    add("cuKernelGetParamInfo", 12040, address(cuKernelGetParamInfo));
    add("cuFuncGetName", 12030, address(cuFuncGetName));
    add("cuKernelGetName", 12030, address(cuKernelGetName));
    add("cuLaunchKernel", 4000, address(cuLaunchKernel), address(cuLaunchKernel_ptsz));
    add("cuLaunchKernelEx", 11060, address(cuLaunchKernelEx), address(cuLaunchKernelEx_ptsz));
    // Everything else cuda.h declares, with the ABIs cudaTypedefs.h lists (generated); the entries
    // above, checked by hand, take precedence for their names.
    Table generated;
    for (std::size_t i = 0; i < kProcEntryCount; ++i) {
      const ProcEntry& e = kProcEntries[i];
      if (!t.count(e.base)) generated[e.base].push_back(Entry{e.version, e.legacy, e.per_thread});
    }
    t.merge(generated);
    return t;
  }();
  return t;
}

CUresult resolve(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                 CUdriverProcAddressQueryResult* status) {
  int driver_version = 0;
  {
    std::lock_guard<std::mutex> guard(lock());
    State& s = state();
    s.proc_queries.push_back({symbol ? symbol : "", cuda_version, flags});
    driver_version = s.config.driver_version;
  }
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  const cuuint64_t known = CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  if ((flags & ~known) != 0 || cuda_version <= 0 || cuda_version > driver_version) return CUDA_ERROR_INVALID_VALUE;

  auto set_status = [status](CUdriverProcAddressQueryResult r) {
    if (status) *status = r;
  };
  auto it = table().find(symbol);
  if (it == table().end()) {
    set_status(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    return CUDA_SUCCESS;
  }
  const Entry* best = nullptr;
  for (const Entry& e : it->second)
    if (e.version <= cuda_version && (!best || e.version > best->version)) best = &e;
  if (!best) {
    set_status(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    return CUDA_SUCCESS;
  }
  // DEFAULT means legacy here: this library is not built for per-thread default streams.
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  *pfn = per_thread && best->per_thread ? best->per_thread : best->legacy;
  set_status(CU_GET_PROC_ADDRESS_SUCCESS);
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace simcuda

SIM_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult* status) {
  SIM_ENTER("cuGetProcAddress_v2");
  SIM_GUARDED_BEGIN
  return simcuda::resolve(symbol, pfn, cuda_version, flags, status);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags) {
  SIM_ENTER("cuGetProcAddress");
  SIM_GUARDED_BEGIN
  return simcuda::resolve(symbol, pfn, cuda_version, flags, nullptr);
  SIM_GUARDED_END
}
