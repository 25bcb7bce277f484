// The driver hook table: every wrapped driver export with the cuGetProcAddress name and ABI it answers.
#pragma once

#include <cuda.h>

#include <atomic>
#include <string_view>

#include "interpose/hooks/hook_export.h"
#include "interpose/hooks/proc_routing.h"

// Per-thread-stream exports that cuda.h does not declare in its default mode.
KVREMAP_DECLARE_VARIANT(cuMemAllocAsync, cuMemAllocAsync_ptsz)
KVREMAP_DECLARE_VARIANT(cuMemFreeAsync, cuMemFreeAsync_ptsz)
KVREMAP_DECLARE_VARIANT(cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz)
KVREMAP_DECLARE_VARIANT(cuStreamEndCapture, cuStreamEndCapture_ptsz)
KVREMAP_DECLARE_VARIANT(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams_ptsz)
KVREMAP_DECLARE_VARIANT(cuGraphLaunch, cuGraphLaunch_ptsz)
KVREMAP_DECLARE_VARIANT(cuLaunchKernel, cuLaunchKernel_ptsz)
KVREMAP_DECLARE_VARIANT(cuLaunchKernelEx, cuLaunchKernelEx_ptsz)
KVREMAP_DECLARE_VARIANT(cuMemcpy, cuMemcpy_ptds)
KVREMAP_DECLARE_VARIANT(cuMemcpyAsync, cuMemcpyAsync_ptsz)
KVREMAP_DECLARE_VARIANT(cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds)
KVREMAP_DECLARE_VARIANT(cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds)
KVREMAP_DECLARE_VARIANT(cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds)
KVREMAP_DECLARE_VARIANT(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz)
KVREMAP_DECLARE_VARIANT(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz)
KVREMAP_DECLARE_VARIANT(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz)
KVREMAP_DECLARE_VARIANT(cuMemsetD8_v2, cuMemsetD8_v2_ptds)
KVREMAP_DECLARE_VARIANT(cuMemsetD8Async, cuMemsetD8Async_ptsz)
#undef cuGetProcAddress
extern "C" CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags);

// X(export, base name asked of cuGetProcAddress, first CUDA version of this ABI, first version of
//   the next ABI or 0, per-thread-stream variant)
#define KVREMAP_DRIVER_HOOKS(X)                                                      \
  X(cuMemAlloc_v2, cuMemAlloc, 3020, 0, false)                                       \
  X(cuMemFree_v2, cuMemFree, 3020, 0, false)                                         \
  X(cuMemAllocPitch_v2, cuMemAllocPitch, 3020, 0, false)                             \
  X(cuMemAllocAsync, cuMemAllocAsync, 11020, 0, false)                               \
  X(cuMemAllocAsync_ptsz, cuMemAllocAsync, 11020, 0, true)                           \
  X(cuMemFreeAsync, cuMemFreeAsync, 11020, 0, false)                                 \
  X(cuMemFreeAsync_ptsz, cuMemFreeAsync, 11020, 0, true)                             \
  X(cuMemGetInfo_v2, cuMemGetInfo, 3020, 0, false)                                   \
  X(cuMemCreate, cuMemCreate, 10020, 0, false)                                       \
  X(cuMemRelease, cuMemRelease, 10020, 0, false)                                     \
  X(cuMemMap, cuMemMap, 10020, 0, false)                                             \
  X(cuMemUnmap, cuMemUnmap, 10020, 0, false)                                         \
  X(cuMemAddressReserve, cuMemAddressReserve, 10020, 0, false)                       \
  X(cuMemAddressFree, cuMemAddressFree, 10020, 0, false)                             \
  X(cuStreamBeginCapture_v2, cuStreamBeginCapture, 10010, 0, false)                  \
  X(cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture, 10010, 0, true)              \
  X(cuStreamEndCapture, cuStreamEndCapture, 10000, 0, false)                         \
  X(cuStreamEndCapture_ptsz, cuStreamEndCapture, 10000, 0, true)                     \
  X(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040, 0, false)       \
  X(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams, 12000, 0, false)     \
  X(cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams, 12000, 0, true) \
  X(cuGraphLaunch, cuGraphLaunch, 10000, 0, false)                                   \
  X(cuGraphLaunch_ptsz, cuGraphLaunch, 10000, 0, true)                               \
  X(cuGraphExecDestroy, cuGraphExecDestroy, 10000, 0, false)                         \
  X(cuModuleLoadData, cuModuleLoadData, 2000, 0, false)                              \
  X(cuModuleLoadDataEx, cuModuleLoadDataEx, 2010, 0, false)                          \
  X(cuModuleUnload, cuModuleUnload, 2000, 0, false)                                  \
  X(cuLibraryLoadData, cuLibraryLoadData, 12000, 0, false)                           \
  X(cuLibraryUnload, cuLibraryUnload, 12000, 0, false)                               \
  X(cuLaunchKernel, cuLaunchKernel, 4000, 0, false)                                  \
  X(cuLaunchKernel_ptsz, cuLaunchKernel, 4000, 0, true)                              \
  X(cuLaunchKernelEx, cuLaunchKernelEx, 11060, 0, false)                             \
  X(cuLaunchKernelEx_ptsz, cuLaunchKernelEx, 11060, 0, true)                         \
  X(cuMemcpy, cuMemcpy, 4000, 0, false)                                             \
  X(cuMemcpy_ptds, cuMemcpy, 4000, 0, true)                                          \
  X(cuMemcpyAsync, cuMemcpyAsync, 4000, 0, false)                                    \
  X(cuMemcpyAsync_ptsz, cuMemcpyAsync, 4000, 0, true)                                \
  X(cuMemcpyHtoD_v2, cuMemcpyHtoD, 3020, 0, false)                                   \
  X(cuMemcpyHtoD_v2_ptds, cuMemcpyHtoD, 3020, 0, true)                               \
  X(cuMemcpyDtoH_v2, cuMemcpyDtoH, 3020, 0, false)                                   \
  X(cuMemcpyDtoH_v2_ptds, cuMemcpyDtoH, 3020, 0, true)                               \
  X(cuMemcpyDtoD_v2, cuMemcpyDtoD, 3020, 0, false)                                   \
  X(cuMemcpyDtoD_v2_ptds, cuMemcpyDtoD, 3020, 0, true)                               \
  X(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync, 3020, 0, false)                         \
  X(cuMemcpyHtoDAsync_v2_ptsz, cuMemcpyHtoDAsync, 3020, 0, true)                     \
  X(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync, 3020, 0, false)                         \
  X(cuMemcpyDtoHAsync_v2_ptsz, cuMemcpyDtoHAsync, 3020, 0, true)                     \
  X(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync, 3020, 0, false)                         \
  X(cuMemcpyDtoDAsync_v2_ptsz, cuMemcpyDtoDAsync, 3020, 0, true)                     \
  X(cuMemsetD8_v2, cuMemsetD8, 3020, 0, false)                                       \
  X(cuMemsetD8_v2_ptds, cuMemsetD8, 3020, 0, true)                                   \
  X(cuMemsetD8Async, cuMemsetD8Async, 3020, 0, false)                                \
  X(cuMemsetD8Async_ptsz, cuMemsetD8Async, 3020, 0, true)                            \
  X(cuIpcGetMemHandle, cuIpcGetMemHandle, 4010, 0, false)                            \
  X(cuMemGetAddressRange_v2, cuMemGetAddressRange, 3020, 0, false)                   \
  X(cuPointerGetAttribute, cuPointerGetAttribute, 4000, 0, false)                    \
  X(cuPointerGetAttributes, cuPointerGetAttributes, 7000, 0, false)                  \
  X(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000, 0, false)       \
  X(cuMemGetHandleForAddressRange, cuMemGetHandleForAddressRange, 11070, 0, false)   \
  X(cuGetProcAddress, cuGetProcAddress, 11030, 12000, false)                         \
  X(cuGetProcAddress_v2, cuGetProcAddress, 12000, 0, false)

namespace kvremap::interpose {

// Real-function slots, one per hook, filled by whichever route sees the real pointer first.
#define KVREMAP_DECLARE_REAL(exp, base, first, next, per_thread) extern std::atomic<void*> g_real_##exp;
KVREMAP_DRIVER_HOOKS(KVREMAP_DECLARE_REAL)
#undef KVREMAP_DECLARE_REAL

struct DriverHook {
  std::string_view export_name;
  std::string_view base_name;
  int first_version;
  int next_version;  // 0: no newer ABI known
  bool per_thread;
  void* wrapper;
  std::atomic<void*>* real;
};

// The wrapper to hand out for a cuGetProcAddress(base_name, version, flags) that the real resolver
// answered with `real_fn`, or nullptr when no wrapper has that exact ABI (the call passes through).
void* wrapper_for_query(std::string_view base_name, int version, unsigned long long flags, void* real_fn);
// The wrapper for a dlsym of an exact export name on libcuda's handle, or nullptr.
const DriverHook* hook_for_export(std::string_view export_name);
// True when `fn` is one of this library's own wrappers (never store those as real pointers).
bool is_own_wrapper(void* fn);

}  // namespace kvremap::interpose

// The real driver function behind a hook, typed; resolved from libcuda by export name if no route
// has supplied it yet.
#define KVREMAP_REAL(exp)                                                                       \
  ::kvremap::interpose::cached_real<decltype(&::exp)>(::kvremap::interpose::g_real_##exp, #exp, \
                                                      ::kvremap::interpose::driver_export)
