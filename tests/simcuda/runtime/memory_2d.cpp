// Strided, peer and pitched-set memory exports: cudaMemcpy2D(Async), cudaMemset2D(Async), cudaMemcpyPeer(Async).
#include <cstdint>

#include "context.h"
#include "export.h"
#include "ptsz_api.h"

using namespace simcudart;

namespace {

// The runtime describes both sides by address and lets unified addressing tell host from device,
// as the real one does for cudaMemcpyDefault; an explicit kind is checked, not needed.
CUDA_MEMCPY2D describe_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height) {
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
  c.srcDevice = reinterpret_cast<CUdeviceptr>(src);
  c.srcPitch = spitch;
  c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  c.dstDevice = reinterpret_cast<CUdeviceptr>(dst);
  c.dstPitch = dpitch;
  c.WidthInBytes = width;
  c.Height = height;
  return c;
}

cudaError_t check_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                     int kind) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
  if (width > dpitch || width > spitch) return cudaErrorInvalidPitchValue;
  if (width != 0 && height != 0 && (dst == nullptr || src == nullptr)) return cudaErrorInvalidValue;
  return ensure_context();
}

cudaError_t copy_2d(StreamApi api, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                    size_t height, int kind) {
  if (cudaError_t e = check_2d(dst, dpitch, src, spitch, width, height, kind); e != cudaSuccess) return e;
  if (width == 0 || height == 0) return cudaSuccess;
  const CUDA_MEMCPY2D c = describe_2d(dst, dpitch, src, spitch, width, height);
  return call_driver(driver().cuMemcpy2D.pick(api), &c);
}

cudaError_t copy_2d_async(StreamApi api, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                          size_t height, int kind, cudaStream_t stream) {
  if (cudaError_t e = check_2d(dst, dpitch, src, spitch, width, height, kind); e != cudaSuccess) return e;
  if (width == 0 || height == 0) return cudaSuccess;
  const CUDA_MEMCPY2D c = describe_2d(dst, dpitch, src, spitch, width, height);
  return call_driver(driver().cuMemcpy2DAsync.pick(api), &c, stream);
}

cudaError_t set_2d(StreamApi api, void* devPtr, size_t pitch, int value, size_t width, size_t height) {
  if (width > pitch && height > 1) return cudaErrorInvalidPitchValue;
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  if (width == 0 || height == 0) return cudaSuccess;
  return call_driver(driver().cuMemsetD2D8.pick(api), reinterpret_cast<CUdeviceptr>(devPtr), pitch,
                     static_cast<unsigned char>(value), width, height);
}

cudaError_t set_2d_async(StreamApi api, void* devPtr, size_t pitch, int value, size_t width, size_t height,
                         cudaStream_t stream) {
  if (width > pitch && height > 1) return cudaErrorInvalidPitchValue;
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  if (width == 0 || height == 0) return cudaSuccess;
  return call_driver(driver().cuMemsetD2D8Async.pick(api), reinterpret_cast<CUdeviceptr>(devPtr), pitch,
                     static_cast<unsigned char>(value), width, height, stream);
}

// Peer copies name each side's device; the driver's form takes their primary contexts.
cudaError_t peer_contexts(int dst_device, int src_device, CUcontext* dst_ctx, CUcontext* src_ctx) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  if (cudaError_t e = device_context(dst_device, dst_ctx); e != cudaSuccess) return e;
  return device_context(src_device, src_ctx);
}

cudaError_t copy_peer(StreamApi api, void* dst, int dst_device, const void* src, int src_device, size_t count) {
  CUcontext dst_ctx = nullptr, src_ctx = nullptr;
  if (cudaError_t e = peer_contexts(dst_device, src_device, &dst_ctx, &src_ctx); e != cudaSuccess) return e;
  if (count == 0) return cudaSuccess;
  return call_driver(driver().cuMemcpyPeer.pick(api), reinterpret_cast<CUdeviceptr>(dst), dst_ctx,
                     reinterpret_cast<CUdeviceptr>(src), src_ctx, count);
}

cudaError_t copy_peer_async(StreamApi api, void* dst, int dst_device, const void* src, int src_device, size_t count,
                            cudaStream_t stream) {
  CUcontext dst_ctx = nullptr, src_ctx = nullptr;
  if (cudaError_t e = peer_contexts(dst_device, src_device, &dst_ctx, &src_ctx); e != cudaSuccess) return e;
  if (count == 0) return cudaSuccess;
  return call_driver(driver().cuMemcpyPeerAsync.pick(api), reinterpret_cast<CUdeviceptr>(dst), dst_ctx,
                     reinterpret_cast<CUdeviceptr>(src), src_ctx, count, stream);
}

}  // namespace

SIMCUDART_API cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                       size_t height, enum cudaMemcpyKind kind) {
  return guarded([&] { return copy_2d(StreamApi::legacy, dst, dpitch, src, spitch, width, height, enum_value(kind)); });
}
SIMCUDART_API cudaError_t cudaMemcpy2D_ptds(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                            size_t height, enum cudaMemcpyKind kind) {
  return guarded(
      [&] { return copy_2d(StreamApi::per_thread, dst, dpitch, src, spitch, width, height, enum_value(kind)); });
}

SIMCUDART_API cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                            size_t height, enum cudaMemcpyKind kind, cudaStream_t stream) {
  return guarded([&] {
    return copy_2d_async(StreamApi::legacy, dst, dpitch, src, spitch, width, height, enum_value(kind), stream);
  });
}
SIMCUDART_API cudaError_t cudaMemcpy2DAsync_ptsz(void* dst, size_t dpitch, const void* src, size_t spitch,
                                                 size_t width, size_t height, enum cudaMemcpyKind kind,
                                                 cudaStream_t stream) {
  return guarded([&] {
    return copy_2d_async(StreamApi::per_thread, dst, dpitch, src, spitch, width, height, enum_value(kind), stream);
  });
}

SIMCUDART_API cudaError_t cudaMemset2D(void* devPtr, size_t pitch, int value, size_t width, size_t height) {
  return guarded([&] { return set_2d(StreamApi::legacy, devPtr, pitch, value, width, height); });
}
SIMCUDART_API cudaError_t cudaMemset2D_ptds(void* devPtr, size_t pitch, int value, size_t width, size_t height) {
  return guarded([&] { return set_2d(StreamApi::per_thread, devPtr, pitch, value, width, height); });
}

SIMCUDART_API cudaError_t cudaMemset2DAsync(void* devPtr, size_t pitch, int value, size_t width, size_t height,
                                            cudaStream_t stream) {
  return guarded([&] { return set_2d_async(StreamApi::legacy, devPtr, pitch, value, width, height, stream); });
}
SIMCUDART_API cudaError_t cudaMemset2DAsync_ptsz(void* devPtr, size_t pitch, int value, size_t width, size_t height,
                                                 cudaStream_t stream) {
  return guarded([&] { return set_2d_async(StreamApi::per_thread, devPtr, pitch, value, width, height, stream); });
}

SIMCUDART_API cudaError_t cudaMemcpyPeer(void* dst, int dstDevice, const void* src, int srcDevice, size_t count) {
  return guarded([&] { return copy_peer(StreamApi::legacy, dst, dstDevice, src, srcDevice, count); });
}
SIMCUDART_API cudaError_t cudaMemcpyPeer_ptds(void* dst, int dstDevice, const void* src, int srcDevice,
                                              size_t count) {
  return guarded([&] { return copy_peer(StreamApi::per_thread, dst, dstDevice, src, srcDevice, count); });
}

SIMCUDART_API cudaError_t cudaMemcpyPeerAsync(void* dst, int dstDevice, const void* src, int srcDevice, size_t count,
                                              cudaStream_t stream) {
  return guarded([&] { return copy_peer_async(StreamApi::legacy, dst, dstDevice, src, srcDevice, count, stream); });
}
SIMCUDART_API cudaError_t cudaMemcpyPeerAsync_ptsz(void* dst, int dstDevice, const void* src, int srcDevice,
                                                   size_t count, cudaStream_t stream) {
  return guarded(
      [&] { return copy_peer_async(StreamApi::per_thread, dst, dstDevice, src, srcDevice, count, stream); });
}
