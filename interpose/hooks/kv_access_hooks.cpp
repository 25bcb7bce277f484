// The driver functions that read, write, share or describe device memory: each is a KV decision point.
// A copy, memset, IPC handle, VMM export or range query that reaches a deferred KV tensor is serving
// work (or hands its address to someone who may do it), so the KV cache is committed before it runs
// (docs/kv-deferral.md §3). Every body is one line of decision and one call of the real function.
#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "interpose/base/library.h"
#include "interpose/driver/driver_api.h"
#include "interpose/hooks/driver_hooks.h"
#include "interpose/hooks/hook_enter.h"
#include "interpose/kv/kv_manager.h"
#include "interpose/kv/kv_vmm.h"
#include "interpose/track/tracker.h"

using namespace kvremap::interpose;

namespace {

std::uint64_t as_address(CUdeviceptr p) { return p; }
std::uint64_t as_address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// Extents come from caller-supplied pitches and counts: on overflow they reach the end of the
// address space, which can only make a copy count as touching KV (an early commit), never miss it.
std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

// From a strided operand's first byte to its last: `depth` layers of `layer_rows` rows, `height` of
// them used, each row `width` bytes every `pitch`.
std::uint64_t strided_extent(std::uint64_t width, std::uint64_t height, std::uint64_t depth, std::uint64_t pitch,
                             std::uint64_t layer_rows) {
  if (width == 0 || height == 0 || depth == 0) return 0;
  const std::uint64_t rows = saturating_add(saturating_mul(depth - 1, layer_rows), height - 1);
  return saturating_add(saturating_mul(rows, pitch), width);
}

// Device and unified operands address memory by pointer; host and array operands cannot be KV. Read
// as an integer: the caller's field may hold a value the enum does not name (the driver rejects it).
bool by_device_pointer(const CUmemorytype& type) {
  int value = 0;
  std::memcpy(&value, &type, sizeof value);
  return value == CU_MEMORYTYPE_DEVICE || value == CU_MEMORYTYPE_UNIFIED;
}

// One operand of a 2D or 3D copy: the bytes it spans from (x, y, z) of its pitched layout.
void touch_operand(const CUmemorytype& type, CUdeviceptr device, std::uint64_t x, std::uint64_t y, std::uint64_t z,
                   std::uint64_t pitch, std::uint64_t layer_rows, const std::uint64_t extent[3], const char* api) {
  if (!by_device_pointer(type)) return;
  const std::uint64_t first_row = saturating_add(saturating_mul(z, layer_rows), y);
  const std::uint64_t start = saturating_add(device, saturating_add(saturating_mul(first_row, pitch), x));
  kv_touch(start, strided_extent(extent[0], extent[1], extent[2], pitch, layer_rows), api);
}

template <typename Copy3D>
void touch_3d(const Copy3D* c, const char* api) {
  if (!c) return;
  const std::uint64_t extent[3] = {c->WidthInBytes, c->Height, c->Depth};
  touch_operand(c->srcMemoryType, c->srcDevice, c->srcXInBytes, c->srcY, c->srcZ, c->srcPitch, c->srcHeight, extent,
                api);
  touch_operand(c->dstMemoryType, c->dstDevice, c->dstXInBytes, c->dstY, c->dstZ, c->dstPitch, c->dstHeight, extent,
                api);
}

void touch_2d(const CUDA_MEMCPY2D* c, const char* api) {
  if (!c) return;
  const std::uint64_t extent[3] = {c->WidthInBytes, c->Height, 1};
  touch_operand(c->srcMemoryType, c->srcDevice, c->srcXInBytes, c->srcY, 0, c->srcPitch, 0, extent, api);
  touch_operand(c->dstMemoryType, c->dstDevice, c->dstXInBytes, c->dstY, 0, c->dstPitch, 0, extent, api);
}

void touch_batch(const CUdeviceptr* dsts, const CUdeviceptr* srcs, const size_t* sizes, size_t count, const char* api) {
  if (!dsts || !srcs || !sizes) return;
  for (size_t i = 0; i < count; ++i) {
    kv_touch(dsts[i], sizes[i], api);
    kv_touch(srcs[i], sizes[i], api);
  }
}

// A 3D batch's pointer operands count their extent in elements of at most 16 bytes (a four-channel
// 32-bit element): the widest reading spans every byte the copy can reach.
constexpr std::uint64_t kWidestElementBytes = 16;

void touch_batch_operand(const CUmemcpy3DOperand& operand, const CUextent3D& extent, const char* api) {
  if (operand.type != CU_MEMCPY_OPERAND_TYPE_POINTER) return;
  const std::uint64_t row = operand.op.ptr.rowLength ? operand.op.ptr.rowLength : extent.width;
  const std::uint64_t layer = operand.op.ptr.layerHeight ? operand.op.ptr.layerHeight : extent.height;
  const std::uint64_t elements = strided_extent(extent.width, extent.height, extent.depth, row, layer);
  kv_touch(operand.op.ptr.ptr, saturating_mul(elements, kWidestElementBytes), api);
}

void touch_3d_batch(size_t count, const CUDA_MEMCPY3D_BATCH_OP* ops, const char* api) {
  if (!ops) return;
  for (size_t i = 0; i < count; ++i) {
    touch_batch_operand(ops[i].src, ops[i].extent, api);
    touch_batch_operand(ops[i].dst, ops[i].extent, api);
  }
}

// A copy into memory addressed by a device pointer counts toward the weights rule (policy/phases.h);
// a copy to host memory does not.
void note_copy(CUdeviceptr, std::uint64_t bytes) { on_copy_into_device(bytes); }
void note_copy(const void*, std::uint64_t) {}

// A driver refusal of an export or handle of KV memory: the engine's own cudaMalloc might have been
// accepted, so the error is kvremap's to explain — once per function (its own `explained` flag),
// naming what would work.
void explain_refusal(CUresult r, std::uint64_t address, const char* api, std::atomic<bool>& explained,
                     const char* why) {
  std::uint64_t base = 0, size = 0;
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_SUPPORTED || !kv_region_of(address, &base, &size)) return;
  if (explained.exchange(true, std::memory_order_relaxed)) return;
  log().warn("{} of KV tensor {:#x} ({} bytes) failed with {}: {}", api, base, size, real_error_name(r), why);
}

}  // namespace

#define KVREMAP_COPY_HOOK(exp, dst_t, src_t)                      \
  KVREMAP_HOOK CUresult exp(dst_t dst, src_t src, size_t bytes) { \
    KVREMAP_ENTER(exp, dst, src, bytes);                          \
    note_copy(dst, bytes);                                        \
    kv_touch(as_address(dst), bytes, #exp);                       \
    kv_touch(as_address(src), bytes, #exp);                       \
    return real(dst, src, bytes);                                 \
  }
#define KVREMAP_COPY_ASYNC_HOOK(exp, dst_t, src_t)                                 \
  KVREMAP_HOOK CUresult exp(dst_t dst, src_t src, size_t bytes, CUstream stream) { \
    KVREMAP_ENTER(exp, dst, src, bytes, stream);                                   \
    note_copy(dst, bytes);                                                         \
    kv_touch(as_address(dst), bytes, #exp);                                        \
    kv_touch(as_address(src), bytes, #exp);                                        \
    return real(dst, src, bytes, stream);                                          \
  }
KVREMAP_COPY_HOOK(cuMemcpy, CUdeviceptr, CUdeviceptr)
KVREMAP_COPY_HOOK(cuMemcpy_ptds, CUdeviceptr, CUdeviceptr)
KVREMAP_COPY_ASYNC_HOOK(cuMemcpyAsync, CUdeviceptr, CUdeviceptr)
KVREMAP_COPY_ASYNC_HOOK(cuMemcpyAsync_ptsz, CUdeviceptr, CUdeviceptr)
KVREMAP_COPY_HOOK(cuMemcpyHtoD_v2, CUdeviceptr, const void*)
KVREMAP_COPY_HOOK(cuMemcpyHtoD_v2_ptds, CUdeviceptr, const void*)
KVREMAP_COPY_HOOK(cuMemcpyDtoH_v2, void*, CUdeviceptr)
KVREMAP_COPY_HOOK(cuMemcpyDtoH_v2_ptds, void*, CUdeviceptr)
KVREMAP_COPY_HOOK(cuMemcpyDtoD_v2, CUdeviceptr, CUdeviceptr)
KVREMAP_COPY_HOOK(cuMemcpyDtoD_v2_ptds, CUdeviceptr, CUdeviceptr)
KVREMAP_COPY_ASYNC_HOOK(cuMemcpyHtoDAsync_v2, CUdeviceptr, const void*)
KVREMAP_COPY_ASYNC_HOOK(cuMemcpyHtoDAsync_v2_ptsz, CUdeviceptr, const void*)
KVREMAP_COPY_ASYNC_HOOK(cuMemcpyDtoHAsync_v2, void*, CUdeviceptr)
KVREMAP_COPY_ASYNC_HOOK(cuMemcpyDtoHAsync_v2_ptsz, void*, CUdeviceptr)
KVREMAP_COPY_ASYNC_HOOK(cuMemcpyDtoDAsync_v2, CUdeviceptr, CUdeviceptr)
KVREMAP_COPY_ASYNC_HOOK(cuMemcpyDtoDAsync_v2_ptsz, CUdeviceptr, CUdeviceptr)

// Copies between a device pointer and a CUDA array: only the pointer side can be KV.
#define KVREMAP_TO_ARRAY_HOOK(exp)                                                       \
  KVREMAP_HOOK CUresult exp(CUarray dst, size_t offset, CUdeviceptr src, size_t bytes) { \
    KVREMAP_ENTER(exp, dst, offset, src, bytes);                                         \
    kv_touch(src, bytes, #exp);                                                          \
    return real(dst, offset, src, bytes);                                                \
  }
KVREMAP_TO_ARRAY_HOOK(cuMemcpyDtoA_v2)
KVREMAP_TO_ARRAY_HOOK(cuMemcpyDtoA_v2_ptds)
#define KVREMAP_FROM_ARRAY_HOOK(exp)                                                     \
  KVREMAP_HOOK CUresult exp(CUdeviceptr dst, CUarray src, size_t offset, size_t bytes) { \
    KVREMAP_ENTER(exp, dst, src, offset, bytes);                                         \
    kv_touch(dst, bytes, #exp);                                                          \
    return real(dst, src, offset, bytes);                                                \
  }
KVREMAP_FROM_ARRAY_HOOK(cuMemcpyAtoD_v2)
KVREMAP_FROM_ARRAY_HOOK(cuMemcpyAtoD_v2_ptds)

#define KVREMAP_PEER_COPY_HOOK(exp)                                                                                 \
  KVREMAP_HOOK CUresult exp(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t bytes) { \
    KVREMAP_ENTER(exp, dst, dst_ctx, src, src_ctx, bytes);                                                          \
    kv_touch(dst, bytes, #exp);                                                                                     \
    kv_touch(src, bytes, #exp);                                                                                     \
    return real(dst, dst_ctx, src, src_ctx, bytes);                                                                 \
  }
#define KVREMAP_PEER_COPY_ASYNC_HOOK(exp)                                                                         \
  KVREMAP_HOOK CUresult exp(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t bytes, \
                            CUstream stream) {                                                                    \
    KVREMAP_ENTER(exp, dst, dst_ctx, src, src_ctx, bytes, stream);                                                \
    kv_touch(dst, bytes, #exp);                                                                                   \
    kv_touch(src, bytes, #exp);                                                                                   \
    return real(dst, dst_ctx, src, src_ctx, bytes, stream);                                                       \
  }
KVREMAP_PEER_COPY_HOOK(cuMemcpyPeer)
KVREMAP_PEER_COPY_HOOK(cuMemcpyPeer_ptds)
KVREMAP_PEER_COPY_ASYNC_HOOK(cuMemcpyPeerAsync)
KVREMAP_PEER_COPY_ASYNC_HOOK(cuMemcpyPeerAsync_ptsz)

// Strided copies described by a parameter struct.
#define KVREMAP_STRUCT_COPY_HOOK(exp, param_t, touch) \
  KVREMAP_HOOK CUresult exp(const param_t* copy) {    \
    KVREMAP_ENTER(exp, copy);                         \
    touch(copy, #exp);                                \
    return real(copy);                                \
  }
#define KVREMAP_STRUCT_COPY_ASYNC_HOOK(exp, param_t, touch)         \
  KVREMAP_HOOK CUresult exp(const param_t* copy, CUstream stream) { \
    KVREMAP_ENTER(exp, copy, stream);                               \
    touch(copy, #exp);                                              \
    return real(copy, stream);                                      \
  }
KVREMAP_STRUCT_COPY_HOOK(cuMemcpy2D_v2, CUDA_MEMCPY2D, touch_2d)
KVREMAP_STRUCT_COPY_HOOK(cuMemcpy2D_v2_ptds, CUDA_MEMCPY2D, touch_2d)
KVREMAP_STRUCT_COPY_HOOK(cuMemcpy2DUnaligned_v2, CUDA_MEMCPY2D, touch_2d)
KVREMAP_STRUCT_COPY_HOOK(cuMemcpy2DUnaligned_v2_ptds, CUDA_MEMCPY2D, touch_2d)
KVREMAP_STRUCT_COPY_ASYNC_HOOK(cuMemcpy2DAsync_v2, CUDA_MEMCPY2D, touch_2d)
KVREMAP_STRUCT_COPY_ASYNC_HOOK(cuMemcpy2DAsync_v2_ptsz, CUDA_MEMCPY2D, touch_2d)
KVREMAP_STRUCT_COPY_HOOK(cuMemcpy3D_v2, CUDA_MEMCPY3D, touch_3d)
KVREMAP_STRUCT_COPY_HOOK(cuMemcpy3D_v2_ptds, CUDA_MEMCPY3D, touch_3d)
KVREMAP_STRUCT_COPY_ASYNC_HOOK(cuMemcpy3DAsync_v2, CUDA_MEMCPY3D, touch_3d)
KVREMAP_STRUCT_COPY_ASYNC_HOOK(cuMemcpy3DAsync_v2_ptsz, CUDA_MEMCPY3D, touch_3d)
KVREMAP_STRUCT_COPY_HOOK(cuMemcpy3DPeer, CUDA_MEMCPY3D_PEER, touch_3d)
KVREMAP_STRUCT_COPY_HOOK(cuMemcpy3DPeer_ptds, CUDA_MEMCPY3D_PEER, touch_3d)
KVREMAP_STRUCT_COPY_ASYNC_HOOK(cuMemcpy3DPeerAsync, CUDA_MEMCPY3D_PEER, touch_3d)
KVREMAP_STRUCT_COPY_ASYNC_HOOK(cuMemcpy3DPeerAsync_ptsz, CUDA_MEMCPY3D_PEER, touch_3d)

// Batched copies: the CUDA 13 ABI, and the CUDA 12.8 one that also reports the failing index.
#define KVREMAP_BATCH_COPY_HOOK(exp)                                                                               \
  KVREMAP_HOOK CUresult exp(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,                     \
                            CUmemcpyAttributes* attrs, size_t* attr_indices, size_t attr_count, CUstream stream) { \
    KVREMAP_ENTER(exp, dsts, srcs, sizes, count, attrs, attr_indices, attr_count, stream);                         \
    touch_batch(dsts, srcs, sizes, count, #exp);                                                                   \
    return real(dsts, srcs, sizes, count, attrs, attr_indices, attr_count, stream);                                \
  }
#define KVREMAP_BATCH_COPY_12080_HOOK(exp)                                                                      \
  KVREMAP_HOOK CUresult exp(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,                  \
                            CUmemcpyAttributes* attrs, size_t* attr_indices, size_t attr_count, size_t* failed, \
                            CUstream stream) {                                                                  \
    KVREMAP_ENTER(exp, dsts, srcs, sizes, count, attrs, attr_indices, attr_count, failed, stream);              \
    touch_batch(dsts, srcs, sizes, count, #exp);                                                                \
    return real(dsts, srcs, sizes, count, attrs, attr_indices, attr_count, failed, stream);                     \
  }
KVREMAP_BATCH_COPY_HOOK(cuMemcpyBatchAsync_v2)
KVREMAP_BATCH_COPY_HOOK(cuMemcpyBatchAsync_v2_ptsz)
KVREMAP_BATCH_COPY_12080_HOOK(cuMemcpyBatchAsync)
KVREMAP_BATCH_COPY_12080_HOOK(cuMemcpyBatchAsync_ptsz)
#define KVREMAP_3D_BATCH_COPY_HOOK(exp)                                                                             \
  KVREMAP_HOOK CUresult exp(size_t count, CUDA_MEMCPY3D_BATCH_OP* ops, unsigned long long flags, CUstream stream) { \
    KVREMAP_ENTER(exp, count, ops, flags, stream);                                                                  \
    touch_3d_batch(count, ops, #exp);                                                                               \
    return real(count, ops, flags, stream);                                                                         \
  }
#define KVREMAP_3D_BATCH_COPY_12080_HOOK(exp)                                                                    \
  KVREMAP_HOOK CUresult exp(size_t count, CUDA_MEMCPY3D_BATCH_OP* ops, size_t* failed, unsigned long long flags, \
                            CUstream stream) {                                                                   \
    KVREMAP_ENTER(exp, count, ops, failed, flags, stream);                                                       \
    touch_3d_batch(count, ops, #exp);                                                                            \
    return real(count, ops, failed, flags, stream);                                                              \
  }
KVREMAP_3D_BATCH_COPY_HOOK(cuMemcpy3DBatchAsync_v2)
KVREMAP_3D_BATCH_COPY_HOOK(cuMemcpy3DBatchAsync_v2_ptsz)
KVREMAP_3D_BATCH_COPY_12080_HOOK(cuMemcpy3DBatchAsync)
KVREMAP_3D_BATCH_COPY_12080_HOOK(cuMemcpy3DBatchAsync_ptsz)

// Memsets of 1, 2 and 4-byte elements, plain and 2D.
#define KVREMAP_MEMSET_HOOK(exp, value_t)                                    \
  KVREMAP_HOOK CUresult exp(CUdeviceptr dst, value_t value, size_t count) {  \
    KVREMAP_ENTER(exp, dst, value, count);                                   \
    kv_touch(dst, saturating_mul(count, sizeof(value_t)), #exp, value == 0); \
    return real(dst, value, count);                                          \
  }
#define KVREMAP_MEMSET_ASYNC_HOOK(exp, value_t)                                              \
  KVREMAP_HOOK CUresult exp(CUdeviceptr dst, value_t value, size_t count, CUstream stream) { \
    KVREMAP_ENTER(exp, dst, value, count, stream);                                           \
    kv_touch(dst, saturating_mul(count, sizeof(value_t)), #exp, value == 0);                 \
    return real(dst, value, count, stream);                                                  \
  }
#define KVREMAP_MEMSET_2D_HOOK(exp, value_t)                                                                      \
  KVREMAP_HOOK CUresult exp(CUdeviceptr dst, size_t pitch, value_t value, size_t width, size_t height) {          \
    KVREMAP_ENTER(exp, dst, pitch, value, width, height);                                                         \
    kv_touch(dst, strided_extent(saturating_mul(width, sizeof(value_t)), height, 1, pitch, 0), #exp, value == 0); \
    return real(dst, pitch, value, width, height);                                                                \
  }
#define KVREMAP_MEMSET_2D_ASYNC_HOOK(exp, value_t)                                                                \
  KVREMAP_HOOK CUresult exp(CUdeviceptr dst, size_t pitch, value_t value, size_t width, size_t height,            \
                            CUstream stream) {                                                                    \
    KVREMAP_ENTER(exp, dst, pitch, value, width, height, stream);                                                 \
    kv_touch(dst, strided_extent(saturating_mul(width, sizeof(value_t)), height, 1, pitch, 0), #exp, value == 0); \
    return real(dst, pitch, value, width, height, stream);                                                        \
  }
KVREMAP_MEMSET_HOOK(cuMemsetD8_v2, unsigned char)
KVREMAP_MEMSET_HOOK(cuMemsetD8_v2_ptds, unsigned char)
KVREMAP_MEMSET_HOOK(cuMemsetD16_v2, unsigned short)
KVREMAP_MEMSET_HOOK(cuMemsetD16_v2_ptds, unsigned short)
KVREMAP_MEMSET_HOOK(cuMemsetD32_v2, unsigned int)
KVREMAP_MEMSET_HOOK(cuMemsetD32_v2_ptds, unsigned int)
KVREMAP_MEMSET_ASYNC_HOOK(cuMemsetD8Async, unsigned char)
KVREMAP_MEMSET_ASYNC_HOOK(cuMemsetD8Async_ptsz, unsigned char)
KVREMAP_MEMSET_ASYNC_HOOK(cuMemsetD16Async, unsigned short)
KVREMAP_MEMSET_ASYNC_HOOK(cuMemsetD16Async_ptsz, unsigned short)
KVREMAP_MEMSET_ASYNC_HOOK(cuMemsetD32Async, unsigned int)
KVREMAP_MEMSET_ASYNC_HOOK(cuMemsetD32Async_ptsz, unsigned int)
KVREMAP_MEMSET_2D_HOOK(cuMemsetD2D8_v2, unsigned char)
KVREMAP_MEMSET_2D_HOOK(cuMemsetD2D8_v2_ptds, unsigned char)
KVREMAP_MEMSET_2D_HOOK(cuMemsetD2D16_v2, unsigned short)
KVREMAP_MEMSET_2D_HOOK(cuMemsetD2D16_v2_ptds, unsigned short)
KVREMAP_MEMSET_2D_HOOK(cuMemsetD2D32_v2, unsigned int)
KVREMAP_MEMSET_2D_HOOK(cuMemsetD2D32_v2_ptds, unsigned int)
KVREMAP_MEMSET_2D_ASYNC_HOOK(cuMemsetD2D8Async, unsigned char)
KVREMAP_MEMSET_2D_ASYNC_HOOK(cuMemsetD2D8Async_ptsz, unsigned char)
KVREMAP_MEMSET_2D_ASYNC_HOOK(cuMemsetD2D16Async, unsigned short)
KVREMAP_MEMSET_2D_ASYNC_HOOK(cuMemsetD2D16Async_ptsz, unsigned short)
KVREMAP_MEMSET_2D_ASYNC_HOOK(cuMemsetD2D32Async, unsigned int)
KVREMAP_MEMSET_2D_ASYNC_HOOK(cuMemsetD2D32Async_ptsz, unsigned int)

// Legacy IPC cannot share VMM memory, and KV tensors live in kvremap's VMM arena.
KVREMAP_HOOK CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr ptr) {
  KVREMAP_ENTER(cuIpcGetMemHandle, handle, ptr);
  kv_touch(ptr, 1, "cuIpcGetMemHandle");
  const CUresult r = real(handle, ptr);
  static std::atomic<bool> explained{false};
  explain_refusal(r, ptr, "cuIpcGetMemHandle", explained,
                  "KV tensors are VMM memory in kvremap's arena, which legacy CUDA IPC cannot share; share them "
                  "with cuMemRetainAllocationHandle and cuMemExportToShareableHandle, keep this buffer out of the "
                  "arena with kvremap_tag_push(\"none\"), or run with KVREMAP_MODE=observe");
  return r;
}

// Range queries on a KV tensor answer its whole range, as for the cudaMalloc the engine made: the
// driver alone would answer the one VMM mapping (an arena chunk) holding the address.
namespace {
void answer_range(CUpointer_attribute attribute, void* data, CUdeviceptr ptr) {
  std::uint64_t base = 0, size = 0;
  if (!data || !kv_region_of(ptr, &base, &size)) return;
  if (attribute == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) *static_cast<CUdeviceptr*>(data) = base;
  if (attribute == CU_POINTER_ATTRIBUTE_RANGE_SIZE) *static_cast<size_t*>(data) = size;
}
}  // namespace

KVREMAP_HOOK CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) {
  KVREMAP_ENTER(cuMemGetAddressRange_v2, base, size, ptr);
  kv_touch(ptr, 1, "cuMemGetAddressRange");
  const CUresult r = real(base, size, ptr);
  if (r == CUDA_SUCCESS) {
    answer_range(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, base, ptr);
    answer_range(CU_POINTER_ATTRIBUTE_RANGE_SIZE, size, ptr);
  }
  return r;
}

namespace {
// Whether the answer to `attribute` depends on what backs the address. The others (the context, the
// memory type, the device pointer and ordinal, managed or not) are the same for a deferred KV tensor on
// scratch, a committed one and the engine's own cudaMalloc, so they never end the deferral: Triton's
// launcher asks CU_POINTER_ATTRIBUTE_DEVICE_POINTER of every tensor argument before every launch
// (getPointer, backends/nvidia/driver.py), and PyTorch asks the memory type and device of tensors it
// wraps. Range, mapping, handle, IPC and access attributes describe the backing: decision points.
bool reveals_backing(CUpointer_attribute attribute) {
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      return false;
    default:
      return true;
  }
}
}  // namespace

KVREMAP_HOOK CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  KVREMAP_ENTER(cuPointerGetAttribute, data, attribute, ptr);
  if (reveals_backing(attribute)) kv_touch(ptr, 1, "cuPointerGetAttribute");
  const CUresult r = real(data, attribute, ptr);
  if (r == CUDA_SUCCESS) answer_range(attribute, data, ptr);
  return r;
}

KVREMAP_HOOK CUresult cuPointerGetAttributes(unsigned int count, CUpointer_attribute* attributes, void** data,
                                             CUdeviceptr ptr) {
  KVREMAP_ENTER(cuPointerGetAttributes, count, attributes, data, ptr);
  bool reveals = attributes == nullptr;
  for (unsigned int i = 0; attributes && i < count && !reveals; ++i) reveals = reveals_backing(attributes[i]);
  if (reveals) kv_touch(ptr, 1, "cuPointerGetAttributes");
  const CUresult r = real(count, attributes, data, ptr);
  if (r == CUDA_SUCCESS && attributes && data)
    for (unsigned int i = 0; i < count; ++i) answer_range(attributes[i], data[i], ptr);
  return r;
}

// The VMM handle behind a KV address (to export it as a shareable handle, for RDMA and connectors):
// the handle of the one chunk holding it, or of the whole tensor with KVREMAP_KV_ONE_HANDLE=1. On a
// region the engine mapped itself, its own (virtual) handle, which exposes nothing of the backing: a
// later export of it commits first (kv_vmm_translate).
KVREMAP_HOOK CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  if (handle && kv_vmm_retain(handle, as_address(addr))) return CUDA_SUCCESS;
  KVREMAP_ENTER(cuMemRetainAllocationHandle, handle, addr);
  kv_touch(as_address(addr), 1, "cuMemRetainAllocationHandle");
  return real(handle, addr);
}

// A dma-buf of a KV range (RDMA registration); drivers refuse ranges that span several handles.
KVREMAP_HOOK CUresult cuMemGetHandleForAddressRange(void* handle, CUdeviceptr dptr, size_t size,
                                                    CUmemRangeHandleType type, unsigned long long flags) {
  KVREMAP_ENTER(cuMemGetHandleForAddressRange, handle, dptr, size, type, flags);
  kv_touch(dptr, size, "cuMemGetHandleForAddressRange");
  const CUresult r = real(handle, dptr, size, type, flags);
  static std::atomic<bool> explained{false};
  explain_refusal(r, dptr, "cuMemGetHandleForAddressRange", explained,
                  "kvremap backs KV tensors with one VMM handle per KVREMAP_CHUNK_BYTES; KVREMAP_KV_ONE_HANDLE=1 "
                  "backs each with one handle, as one cudaMalloc would be");
  return r;
}
