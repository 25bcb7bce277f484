// Event, stream-wait, legacy IPC open/close and peer-query exports, forwarded to the driver like the real runtime.
#include "context.h"
#include "export.h"
#include "ptsz_api.h"

using namespace simcudart;

namespace {

static_assert(cudaEventDefault == CU_EVENT_DEFAULT && cudaEventBlockingSync == CU_EVENT_BLOCKING_SYNC &&
              cudaEventDisableTiming == CU_EVENT_DISABLE_TIMING && cudaEventInterprocess == CU_EVENT_INTERPROCESS);
static_assert(cudaIpcMemLazyEnablePeerAccess == CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);

constexpr unsigned kEventFlags = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;

cudaError_t create_event(cudaEvent_t* event, unsigned flags) {
  if (event == nullptr || (flags & ~kEventFlags) != 0) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  return call_driver(driver().cuEventCreate, reinterpret_cast<CUevent*>(event), flags);
}

cudaError_t record(StreamApi api, cudaEvent_t event, cudaStream_t stream) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  return call_driver(driver().cuEventRecord.pick(api), event, stream);
}

cudaError_t wait_event(StreamApi api, cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  return call_driver(driver().cuStreamWaitEvent.pick(api), stream, event, flags);
}

}  // namespace

SIMCUDART_API cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return guarded([&] { return create_event(event, cudaEventDefault); });
}

SIMCUDART_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  return guarded([&] { return create_event(event, flags); });
}

SIMCUDART_API cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  return guarded([&] { return record(StreamApi::legacy, event, stream); });
}

SIMCUDART_API cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream) {
  return guarded([&] { return record(StreamApi::per_thread, event, stream); });
}

SIMCUDART_API cudaError_t cudaEventQuery(cudaEvent_t event) {
  return guarded([&] {
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuEventQuery, event);
  });
}

SIMCUDART_API cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return guarded([&] {
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuEventSynchronize, event);
  });
}

SIMCUDART_API cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  return guarded([&] {
    if (ms == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuEventElapsedTime, ms, start, end);
  });
}

SIMCUDART_API cudaError_t cudaEventDestroy(cudaEvent_t event) {
  return guarded([&] {
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuEventDestroy, event);
  });
}

SIMCUDART_API cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  return guarded([&] { return wait_event(StreamApi::legacy, stream, event, flags); });
}

SIMCUDART_API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  return guarded([&] { return wait_event(StreamApi::per_thread, stream, event, flags); });
}

SIMCUDART_API cudaError_t cudaIpcOpenMemHandle(void** devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
  return guarded([&] {
    if (devPtr == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    CUipcMemHandle h;
    std::memcpy(&h, &handle, sizeof h);
    CUdeviceptr p = 0;
    const cudaError_t e = call_driver(driver().cuIpcOpenMemHandle, &p, h, flags);
    if (e == cudaSuccess) *devPtr = reinterpret_cast<void*>(p);
    return e;
  });
}

SIMCUDART_API cudaError_t cudaIpcCloseMemHandle(void* devPtr) {
  return guarded([&] {
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuIpcCloseMemHandle, reinterpret_cast<CUdeviceptr>(devPtr));
  });
}

SIMCUDART_API cudaError_t cudaDeviceCanAccessPeer(int* canAccessPeer, int device, int peerDevice) {
  return guarded([&] {
    if (canAccessPeer == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_initialised(); e != cudaSuccess) return e;
    return call_driver(driver().cuDeviceCanAccessPeer, canAccessPeer, device, peerDevice);
  });
}
