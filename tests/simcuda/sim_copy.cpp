// Copy and memset variants: peer, 2D, D16/D32 and their async and per-thread forms, built on the cuMemcpy/cuMemsetD8
// checks.
#include <cstring>

#include "sim_state.h"

namespace simcuda {
namespace {

// The bytes of a CUmemorytype field, whatever value they hold: a caller may pass any value, and
// loading one that is not an enumerator as the enum type is undefined behaviour.
unsigned int memory_type_of(const CUmemorytype* field) {
  unsigned int raw = 0;
  std::memcpy(&raw, field, sizeof raw);
  return raw;
}

// Which of a CUDA_MEMCPY2D side's fields addresses memory (`type` as memory_type_of reads it); arrays
// are not simulated.
CUresult side_address(unsigned int type, const void* host, CUdeviceptr device, CUdeviceptr* out, bool* is_device) {
  switch (type) {
    case CU_MEMORYTYPE_HOST:
      *out = reinterpret_cast<CUdeviceptr>(host);
      *is_device = false;
      return CUDA_SUCCESS;
    case CU_MEMORYTYPE_DEVICE:
      *out = device;
      *is_device = true;
      return CUDA_SUCCESS;
    case CU_MEMORYTYPE_UNIFIED:
      *out = device;
      *is_device = false;  // either kind: checked as device memory when its first byte is
      return CUDA_SUCCESS;
    case CU_MEMORYTYPE_ARRAY:
      return CUDA_ERROR_NOT_SUPPORTED;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// A 2D copy is one copy per row, each with the checks of a linear copy.
CUresult copy_2d(const CUDA_MEMCPY2D* p, CUstream stream, bool per_thread, bool synchronous) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr src = 0, dst = 0;
  bool src_device = false, dst_device = false;
  if (CUresult r = side_address(memory_type_of(&p->srcMemoryType), p->srcHost, p->srcDevice, &src, &src_device);
      r != CUDA_SUCCESS)
    return r;
  if (CUresult r = side_address(memory_type_of(&p->dstMemoryType), p->dstHost, p->dstDevice, &dst, &dst_device);
      r != CUDA_SUCCESS)
    return r;
  if ((p->srcPitch && p->srcPitch < p->WidthInBytes + p->srcXInBytes) ||
      (p->dstPitch && p->dstPitch < p->WidthInBytes + p->dstXInBytes) ||
      (p->Height > 1 && (!p->srcPitch || !p->dstPitch)))
    return CUDA_ERROR_INVALID_VALUE;
  const unsigned sides = (dst_device ? 1U : 0U) | (src_device ? 2U : 0U);
  for (std::size_t row = 0; row < p->Height; ++row) {
    const CUdeviceptr s = src + p->srcXInBytes + (p->srcY + row) * p->srcPitch;
    const CUdeviceptr d = dst + p->dstXInBytes + (p->dstY + row) * p->dstPitch;
    if (CUresult r = copy_work(d, s, p->WidthInBytes, sides, stream, per_thread, synchronous); r != CUDA_SUCCESS)
      return r;
  }
  return CUDA_SUCCESS;
}

CUresult fill_2d(CUdeviceptr dst, size_t pitch, std::uint32_t value, unsigned element, size_t width, size_t height,
                 CUstream stream, bool per_thread, bool synchronous) {
  if (height > 1 && pitch < width * element) return CUDA_ERROR_INVALID_VALUE;
  for (std::size_t row = 0; row < height; ++row)
    if (CUresult r = fill_work(dst + row * pitch, value, element, width, stream, per_thread, synchronous);
        r != CUDA_SUCCESS)
      return r;
  return CUDA_SUCCESS;
}

// Peer copies: every simulated device shares the host's address space, so only the contexts are checked.
CUresult check_contexts(CUcontext a, CUcontext b) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  auto known = [&s](CUcontext c) {
    const Context* context = context_from_handle(s, c);
    return context && context->retains > 0;
  };
  return known(a) && known(b) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

}  // namespace
}  // namespace simcuda

using namespace simcuda;

#define SIM_TWIN(RET_NAME, COUNTED, PARAMS, SYNC_BODY, PT_SUFFIX, PT_BODY) \
  SIM_EXPORT CUresult RET_NAME PARAMS {                                    \
    SIM_ENTER(COUNTED);                                                    \
    SIM_GUARDED_BEGIN                                                      \
    SYNC_BODY;                                                             \
    SIM_GUARDED_END                                                        \
  }                                                                        \
  SIM_EXPORT CUresult RET_NAME##PT_SUFFIX PARAMS {                         \
    SIM_ENTER(COUNTED);                                                    \
    SIM_GUARDED_BEGIN                                                      \
    PT_BODY;                                                               \
    SIM_GUARDED_END                                                        \
  }

SIM_TWIN(cuMemcpyPeer, "cuMemcpyPeer",
         (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t n),
         if (CUresult r = check_contexts(dstContext, srcContext); r != CUDA_SUCCESS) return r;
         return copy_work(dstDevice, srcDevice, n, 3, nullptr, false, true), _ptds,
                if (CUresult r = check_contexts(dstContext, srcContext); r != CUDA_SUCCESS) return r;
         return copy_work(dstDevice, srcDevice, n, 3, nullptr, true, true))

SIM_TWIN(cuMemcpyPeerAsync, "cuMemcpyPeerAsync",
         (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t n,
          CUstream stream),
         if (CUresult r = check_contexts(dstContext, srcContext); r != CUDA_SUCCESS) return r;
         return copy_work(dstDevice, srcDevice, n, 3, stream, false, false), _ptsz,
                if (CUresult r = check_contexts(dstContext, srcContext); r != CUDA_SUCCESS) return r;
         return copy_work(dstDevice, srcDevice, n, 3, stream, true, false))

SIM_TWIN(cuMemcpy2D_v2, "cuMemcpy2D_v2", (const CUDA_MEMCPY2D* p), return copy_2d(p, nullptr, false, true), _ptds,
         return copy_2d(p, nullptr, true, true))
SIM_TWIN(cuMemcpy2DUnaligned_v2, "cuMemcpy2DUnaligned_v2", (const CUDA_MEMCPY2D* p),
         return copy_2d(p, nullptr, false, true), _ptds, return copy_2d(p, nullptr, true, true))
SIM_TWIN(cuMemcpy2DAsync_v2, "cuMemcpy2DAsync_v2", (const CUDA_MEMCPY2D* p, CUstream stream),
         return copy_2d(p, stream, false, false), _ptsz, return copy_2d(p, stream, true, false))

SIM_TWIN(cuMemsetD16_v2, "cuMemsetD16_v2", (CUdeviceptr dst, unsigned short value, size_t n),
         return fill_work(dst, value, 2, n, nullptr, false, true), _ptds,
         return fill_work(dst, value, 2, n, nullptr, true, true))
SIM_TWIN(cuMemsetD32_v2, "cuMemsetD32_v2", (CUdeviceptr dst, unsigned int value, size_t n),
         return fill_work(dst, value, 4, n, nullptr, false, true), _ptds,
         return fill_work(dst, value, 4, n, nullptr, true, true))
SIM_TWIN(cuMemsetD16Async, "cuMemsetD16Async", (CUdeviceptr dst, unsigned short value, size_t n, CUstream stream),
         return fill_work(dst, value, 2, n, stream, false, false), _ptsz,
         return fill_work(dst, value, 2, n, stream, true, false))
SIM_TWIN(cuMemsetD32Async, "cuMemsetD32Async", (CUdeviceptr dst, unsigned int value, size_t n, CUstream stream),
         return fill_work(dst, value, 4, n, stream, false, false), _ptsz,
         return fill_work(dst, value, 4, n, stream, true, false))

SIM_TWIN(cuMemsetD2D8_v2, "cuMemsetD2D8_v2", (CUdeviceptr dst, size_t pitch, unsigned char value, size_t w, size_t h),
         return fill_2d(dst, pitch, value, 1, w, h, nullptr, false, true), _ptds,
         return fill_2d(dst, pitch, value, 1, w, h, nullptr, true, true))
SIM_TWIN(cuMemsetD2D16_v2, "cuMemsetD2D16_v2",
         (CUdeviceptr dst, size_t pitch, unsigned short value, size_t w, size_t h),
         return fill_2d(dst, pitch, value, 2, w, h, nullptr, false, true), _ptds,
         return fill_2d(dst, pitch, value, 2, w, h, nullptr, true, true))
SIM_TWIN(cuMemsetD2D32_v2, "cuMemsetD2D32_v2", (CUdeviceptr dst, size_t pitch, unsigned int value, size_t w, size_t h),
         return fill_2d(dst, pitch, value, 4, w, h, nullptr, false, true), _ptds,
         return fill_2d(dst, pitch, value, 4, w, h, nullptr, true, true))
SIM_TWIN(cuMemsetD2D8Async, "cuMemsetD2D8Async",
         (CUdeviceptr dst, size_t pitch, unsigned char value, size_t w, size_t h, CUstream stream),
         return fill_2d(dst, pitch, value, 1, w, h, stream, false, false), _ptsz,
         return fill_2d(dst, pitch, value, 1, w, h, stream, true, false))
SIM_TWIN(cuMemsetD2D16Async, "cuMemsetD2D16Async",
         (CUdeviceptr dst, size_t pitch, unsigned short value, size_t w, size_t h, CUstream stream),
         return fill_2d(dst, pitch, value, 2, w, h, stream, false, false), _ptsz,
         return fill_2d(dst, pitch, value, 2, w, h, stream, true, false))
SIM_TWIN(cuMemsetD2D32Async, "cuMemsetD2D32Async",
         (CUdeviceptr dst, size_t pitch, unsigned int value, size_t w, size_t h, CUstream stream),
         return fill_2d(dst, pitch, value, 4, w, h, stream, false, false), _ptsz,
         return fill_2d(dst, pitch, value, 4, w, h, stream, true, false))
