// Memory exports: allocation (plain, pitched, stream-ordered), memory info, copies, sets, IPC.
#include <cstdint>

#include "context.h"
#include "export.h"
#include "ptsz_api.h"

using namespace simcudart;

namespace {

CUdeviceptr device_address(const void* p) noexcept { return reinterpret_cast<CUdeviceptr>(p); }

cudaError_t malloc_device(void** devPtr, size_t size) {
  if (devPtr == nullptr) return cudaErrorInvalidValue;
  if (size == 0) {
    // The real runtime answers a zero-byte request with a NULL pointer and success; the driver
    // would reject it.
    *devPtr = nullptr;
    return cudaSuccess;
  }
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  CUdeviceptr address = 0;
  const cudaError_t e = call_driver(driver().cuMemAlloc, &address, size);
  if (e == cudaSuccess) *devPtr = reinterpret_cast<void*>(address);
  return e;
}

cudaError_t free_device(void* devPtr) {
  // cudaFree(NULL) is the customary "initialise the runtime now" call.
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  if (devPtr == nullptr) return cudaSuccess;
  return call_driver(driver().cuMemFree, device_address(devPtr));
}

cudaError_t malloc_async(StreamApi api, void** devPtr, size_t size, cudaStream_t stream) {
  if (devPtr == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  CUdeviceptr address = 0;
  const cudaError_t e = call_driver(driver().cuMemAllocAsync.pick(api), &address, size, stream);
  if (e == cudaSuccess) *devPtr = reinterpret_cast<void*>(address);
  return e;
}

cudaError_t free_async(StreamApi api, void* devPtr, cudaStream_t stream) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  return call_driver(driver().cuMemFreeAsync.pick(api), device_address(devPtr), stream);
}

bool valid_kind(int kind) noexcept {
  return kind == cudaMemcpyHostToHost || kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToHost ||
         kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyDefault;
}

// Every kind maps to cuMemcpy*: with unified addressing the driver infers the direction from the
// pointers, and the simulated device memory is host-addressable anyway.
cudaError_t copy_checks(void* dst, const void* src, size_t count, int kind) {
  if (!valid_kind(kind)) return cudaErrorInvalidMemcpyDirection;
  if (count != 0 && (dst == nullptr || src == nullptr)) return cudaErrorInvalidValue;
  return cudaSuccess;
}

cudaError_t copy(StreamApi api, void* dst, const void* src, size_t count, int kind) {
  if (cudaError_t e = copy_checks(dst, src, count, kind); e != cudaSuccess) return e;
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  return call_driver(driver().cuMemcpy.pick(api), device_address(dst), device_address(src), count);
}

cudaError_t copy_async(StreamApi api, void* dst, const void* src, size_t count, int kind, cudaStream_t stream) {
  if (cudaError_t e = copy_checks(dst, src, count, kind); e != cudaSuccess) return e;
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  return call_driver(driver().cuMemcpyAsync.pick(api), device_address(dst), device_address(src), count, stream);
}

cudaError_t set(StreamApi api, void* devPtr, int value, size_t count) {
  if (count != 0 && devPtr == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  // Like memset, only the low byte of `value` is used.
  return call_driver(driver().cuMemsetD8.pick(api), device_address(devPtr), static_cast<unsigned char>(value), count);
}

cudaError_t set_async(StreamApi api, void* devPtr, int value, size_t count, cudaStream_t stream) {
  if (count != 0 && devPtr == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  return call_driver(driver().cuMemsetD8Async.pick(api), device_address(devPtr), static_cast<unsigned char>(value),
                     count, stream);
}

}  // namespace

SIMCUDART_API cudaError_t cudaMalloc(void** devPtr, size_t size) {
  return guarded([&] { return malloc_device(devPtr, size); });
}

SIMCUDART_API cudaError_t cudaFree(void* devPtr) {
  return guarded([&] { return free_device(devPtr); });
}

SIMCUDART_API cudaError_t cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height) {
  return guarded([&] {
    if (devPtr == nullptr || pitch == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    CUdeviceptr address = 0;
    size_t row_pitch = 0;
    // 16 bytes is the widest element the driver accepts; it only affects the pitch alignment.
    const cudaError_t e = call_driver(driver().cuMemAllocPitch, &address, &row_pitch, width, height, 16u);
    if (e == cudaSuccess) {
      *devPtr = reinterpret_cast<void*>(address);
      *pitch = row_pitch;
    }
    return e;
  });
}

SIMCUDART_API cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream) {
  return guarded([&] { return malloc_async(StreamApi::legacy, devPtr, size, hStream); });
}
SIMCUDART_API cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t hStream) {
  return guarded([&] { return malloc_async(StreamApi::per_thread, devPtr, size, hStream); });
}

SIMCUDART_API cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream) {
  return guarded([&] { return free_async(StreamApi::legacy, devPtr, hStream); });
}
SIMCUDART_API cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t hStream) {
  return guarded([&] { return free_async(StreamApi::per_thread, devPtr, hStream); });
}

SIMCUDART_API cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  return guarded([&] {
    if (free == nullptr || total == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuMemGetInfo, free, total);
  });
}

SIMCUDART_API cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  return guarded([&] { return copy(StreamApi::legacy, dst, src, count, enum_value(kind)); });
}
SIMCUDART_API cudaError_t cudaMemcpy_ptds(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  return guarded([&] { return copy(StreamApi::per_thread, dst, src, count, enum_value(kind)); });
}

SIMCUDART_API cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                                          cudaStream_t stream) {
  return guarded([&] { return copy_async(StreamApi::legacy, dst, src, count, enum_value(kind), stream); });
}
SIMCUDART_API cudaError_t cudaMemcpyAsync_ptsz(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                                               cudaStream_t stream) {
  return guarded([&] { return copy_async(StreamApi::per_thread, dst, src, count, enum_value(kind), stream); });
}

SIMCUDART_API cudaError_t cudaMemset(void* devPtr, int value, size_t count) {
  return guarded([&] { return set(StreamApi::legacy, devPtr, value, count); });
}
SIMCUDART_API cudaError_t cudaMemset_ptds(void* devPtr, int value, size_t count) {
  return guarded([&] { return set(StreamApi::per_thread, devPtr, value, count); });
}

SIMCUDART_API cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  return guarded([&] { return set_async(StreamApi::legacy, devPtr, value, count, stream); });
}
SIMCUDART_API cudaError_t cudaMemsetAsync_ptsz(void* devPtr, int value, size_t count, cudaStream_t stream) {
  return guarded([&] { return set_async(StreamApi::per_thread, devPtr, value, count, stream); });
}

// Legacy IPC works on cudaMalloc memory only; the driver rejects VMM and stream-ordered memory with
// CUDA_ERROR_INVALID_VALUE, which arrives here as cudaErrorInvalidValue.
SIMCUDART_API cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* devPtr) {
  static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(CUipcMemHandle), "IPC handles must share a layout");
  return guarded([&] {
    if (handle == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuIpcGetMemHandle, reinterpret_cast<CUipcMemHandle*>(handle), device_address(devPtr));
  });
}
