// Pinned host memory (cudaHostAlloc, cudaMallocHost, cudaFreeHost, cudaHostRegister/Unregister) and stream priorities.
#include "context.h"
#include "export.h"
#include "ptsz_api.h"

using namespace simcudart;

namespace {

static_assert(cudaHostAllocPortable == CU_MEMHOSTALLOC_PORTABLE && cudaHostAllocMapped == CU_MEMHOSTALLOC_DEVICEMAP &&
              cudaHostAllocWriteCombined == CU_MEMHOSTALLOC_WRITECOMBINED);
static_assert(cudaHostRegisterPortable == CU_MEMHOSTREGISTER_PORTABLE &&
              cudaHostRegisterMapped == CU_MEMHOSTREGISTER_DEVICEMAP &&
              cudaHostRegisterIoMemory == CU_MEMHOSTREGISTER_IOMEMORY &&
              cudaHostRegisterReadOnly == CU_MEMHOSTREGISTER_READ_ONLY);

cudaError_t host_alloc(void** ptr, size_t size, unsigned flags) {
  if (ptr == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  return call_driver(driver().cuMemHostAlloc, ptr, size, flags);
}

cudaError_t stream_priority(StreamApi api, cudaStream_t stream, int* priority) {
  if (priority == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  return call_driver(driver().cuStreamGetPriority.pick(api), stream, priority);
}

}  // namespace

SIMCUDART_API cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  return guarded([&] { return host_alloc(pHost, size, flags); });
}

SIMCUDART_API cudaError_t cudaMallocHost(void** ptr, size_t size) {
  return guarded([&] { return host_alloc(ptr, size, cudaHostAllocDefault); });
}

SIMCUDART_API cudaError_t cudaFreeHost(void* ptr) {
  return guarded([&] {
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuMemFreeHost, ptr);
  });
}

SIMCUDART_API cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  return guarded([&] {
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuMemHostRegister, ptr, size, flags);
  });
}

SIMCUDART_API cudaError_t cudaHostUnregister(void* ptr) {
  return guarded([&] {
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuMemHostUnregister, ptr);
  });
}

SIMCUDART_API cudaError_t cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags) {
  return guarded([&] {
    if (pDevice == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    CUdeviceptr d = 0;
    const cudaError_t e = call_driver(driver().cuMemHostGetDevicePointer, &d, pHost, flags);
    if (e == cudaSuccess) *pDevice = reinterpret_cast<void*>(d);
    return e;
  });
}

SIMCUDART_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t* pStream, unsigned int flags, int priority) {
  return guarded([&] {
    if (pStream == nullptr || (flags & ~static_cast<unsigned int>(cudaStreamNonBlocking)) != 0)
      return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuStreamCreateWithPriority, pStream, flags, priority);
  });
}

SIMCUDART_API cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int* priority) {
  return guarded([&] { return stream_priority(StreamApi::legacy, hStream, priority); });
}

SIMCUDART_API cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t hStream, int* priority) {
  return guarded([&] { return stream_priority(StreamApi::per_thread, hStream, priority); });
}
