// Stream-ordered pool exports (cudaMemPool*, cudaDeviceGet/SetMemPool, cudaMallocFromPoolAsync) and IPC event handles.
#include <cstring>

#include "context.h"
#include "export.h"
#include "ptsz_api.h"

using namespace simcudart;

namespace {

// The runtime's pool types are the driver's under other names: same layouts, same numbering.
static_assert(sizeof(cudaMemPoolProps) == sizeof(CUmemPoolProps), "pool properties share a layout");
static_assert(static_cast<int>(cudaMemPoolAttrReleaseThreshold) == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD &&
              static_cast<int>(cudaMemPoolAttrUsedMemHigh) == CU_MEMPOOL_ATTR_USED_MEM_HIGH);
static_assert(sizeof(cudaIpcEventHandle_t) == sizeof(CUipcEventHandle), "IPC event handles share a layout");

CUmemoryPool driver_pool(cudaMemPool_t pool) { return reinterpret_cast<CUmemoryPool>(pool); }

cudaError_t valid_ordinal(int device) {
  int n = 0;
  if (cudaError_t e = call_driver(driver().cuDeviceGetCount, &n); e != cudaSuccess) return e;
  return device < 0 || device >= n ? cudaErrorInvalidDevice : cudaSuccess;
}

cudaError_t device_pool(int device, cudaMemPool_t* pool, bool current) {
  if (pool == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  if (cudaError_t e = valid_ordinal(device); e != cudaSuccess) return e;
  CUmemoryPool out = nullptr;
  const cudaError_t e = current ? call_driver(driver().cuDeviceGetMemPool, &out, device)
                                : call_driver(driver().cuDeviceGetDefaultMemPool, &out, device);
  if (e == cudaSuccess) *pool = reinterpret_cast<cudaMemPool_t>(out);
  return e;
}

cudaError_t malloc_from_pool(StreamApi api, void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream) {
  if (ptr == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  CUdeviceptr address = 0;
  const cudaError_t e =
      call_driver(driver().cuMemAllocFromPoolAsync.pick(api), &address, size, driver_pool(pool), stream);
  if (e == cudaSuccess) *ptr = reinterpret_cast<void*>(address);
  return e;
}

}  // namespace

SIMCUDART_API cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* memPool, int device) {
  return guarded([&] { return device_pool(device, memPool, false); });
}

SIMCUDART_API cudaError_t cudaDeviceGetMemPool(cudaMemPool_t* memPool, int device) {
  return guarded([&] { return device_pool(device, memPool, true); });
}

SIMCUDART_API cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t memPool) {
  return guarded([&] {
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    if (cudaError_t e = valid_ordinal(device); e != cudaSuccess) return e;
    return call_driver(driver().cuDeviceSetMemPool, device, driver_pool(memPool));
  });
}

SIMCUDART_API cudaError_t cudaMemPoolCreate(cudaMemPool_t* memPool, const struct cudaMemPoolProps* poolProps) {
  return guarded([&] {
    if (memPool == nullptr || poolProps == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    CUmemPoolProps props{};
    std::memcpy(&props, poolProps, sizeof props);
    CUmemoryPool out = nullptr;
    const cudaError_t e = call_driver(driver().cuMemPoolCreate, &out, &props);
    if (e == cudaSuccess) *memPool = reinterpret_cast<cudaMemPool_t>(out);
    return e;
  });
}

SIMCUDART_API cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool) {
  return guarded([&] {
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuMemPoolDestroy, driver_pool(memPool));
  });
}

SIMCUDART_API cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void* value) {
  return guarded([&] {
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuMemPoolSetAttribute, driver_pool(memPool),
                       static_cast<CUmemPool_attribute>(enum_value(attr)), value);
  });
}

SIMCUDART_API cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void* value) {
  return guarded([&] {
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuMemPoolGetAttribute, driver_pool(memPool),
                       static_cast<CUmemPool_attribute>(enum_value(attr)), value);
  });
}

SIMCUDART_API cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep) {
  return guarded([&] {
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuMemPoolTrimTo, driver_pool(memPool), minBytesToKeep);
  });
}

SIMCUDART_API cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream) {
  return guarded([&] { return malloc_from_pool(StreamApi::legacy, ptr, size, memPool, stream); });
}
SIMCUDART_API cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t memPool,
                                                       cudaStream_t stream) {
  return guarded([&] { return malloc_from_pool(StreamApi::per_thread, ptr, size, memPool, stream); });
}

SIMCUDART_API cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t* handle, cudaEvent_t event) {
  return guarded([&] {
    if (handle == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuIpcGetEventHandle, reinterpret_cast<CUipcEventHandle*>(handle), event);
  });
}

SIMCUDART_API cudaError_t cudaIpcOpenEventHandle(cudaEvent_t* event, cudaIpcEventHandle_t handle) {
  return guarded([&] {
    if (event == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    CUipcEventHandle driver_handle{};
    std::memcpy(&driver_handle, &handle, sizeof driver_handle);
    return call_driver(driver().cuIpcOpenEventHandle, reinterpret_cast<CUevent*>(event), driver_handle);
  });
}
