// The driver hook table: every wrapped driver export with the cuGetProcAddress name and ABI it answers.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>
#include <string_view>
#include <type_traits>

#include "interpose/driver/real.h"
#include "interpose/hooks/hook_export.h"
#include "interpose/hooks/proc_routing.h"

// Per-thread-stream exports that cuda.h does not declare in its default mode.
KVREMAP_DECLARE_VARIANT(cuMemAllocAsync, cuMemAllocAsync_ptsz)
KVREMAP_DECLARE_VARIANT(cuMemFreeAsync, cuMemFreeAsync_ptsz)
KVREMAP_DECLARE_VARIANT(cuMemMapArrayAsync, cuMemMapArrayAsync_ptsz)
KVREMAP_DECLARE_VARIANT(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz)
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
KVREMAP_DECLARE_VARIANT(cuMemsetD16_v2, cuMemsetD16_v2_ptds)
KVREMAP_DECLARE_VARIANT(cuMemsetD32_v2, cuMemsetD32_v2_ptds)
KVREMAP_DECLARE_VARIANT(cuMemsetD16Async, cuMemsetD16Async_ptsz)
KVREMAP_DECLARE_VARIANT(cuMemsetD32Async, cuMemsetD32Async_ptsz)
KVREMAP_DECLARE_VARIANT(cuMemsetD2D8_v2, cuMemsetD2D8_v2_ptds)
KVREMAP_DECLARE_VARIANT(cuMemsetD2D16_v2, cuMemsetD2D16_v2_ptds)
KVREMAP_DECLARE_VARIANT(cuMemsetD2D32_v2, cuMemsetD2D32_v2_ptds)
KVREMAP_DECLARE_VARIANT(cuMemsetD2D8Async, cuMemsetD2D8Async_ptsz)
KVREMAP_DECLARE_VARIANT(cuMemsetD2D16Async, cuMemsetD2D16Async_ptsz)
KVREMAP_DECLARE_VARIANT(cuMemsetD2D32Async, cuMemsetD2D32Async_ptsz)
KVREMAP_DECLARE_VARIANT(cuMemcpyDtoA_v2, cuMemcpyDtoA_v2_ptds)
KVREMAP_DECLARE_VARIANT(cuMemcpyAtoD_v2, cuMemcpyAtoD_v2_ptds)
KVREMAP_DECLARE_VARIANT(cuMemcpyPeer, cuMemcpyPeer_ptds)
KVREMAP_DECLARE_VARIANT(cuMemcpyPeerAsync, cuMemcpyPeerAsync_ptsz)
KVREMAP_DECLARE_VARIANT(cuMemcpy2D_v2, cuMemcpy2D_v2_ptds)
KVREMAP_DECLARE_VARIANT(cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2_ptds)
KVREMAP_DECLARE_VARIANT(cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz)
KVREMAP_DECLARE_VARIANT(cuMemcpy3D_v2, cuMemcpy3D_v2_ptds)
KVREMAP_DECLARE_VARIANT(cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2_ptsz)
KVREMAP_DECLARE_VARIANT(cuMemcpy3DPeer, cuMemcpy3DPeer_ptds)
KVREMAP_DECLARE_VARIANT(cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync_ptsz)
KVREMAP_DECLARE_VARIANT(cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync_v2_ptsz)
KVREMAP_DECLARE_VARIANT(cuMemcpy3DBatchAsync_v2, cuMemcpy3DBatchAsync_v2_ptsz)
// The CUDA 12.8 batch-copy ABI (with a failing-index argument), still exported under the plain
// names the default headers now map to the CUDA 13 ABI.
#undef cuMemcpyBatchAsync
#undef cuMemcpy3DBatchAsync
extern "C" std::remove_pointer_t<PFN_cuMemcpyBatchAsync_v12080> cuMemcpyBatchAsync, cuMemcpyBatchAsync_ptsz;
extern "C" std::remove_pointer_t<PFN_cuMemcpy3DBatchAsync_v12080> cuMemcpy3DBatchAsync, cuMemcpy3DBatchAsync_ptsz;
#undef cuGetProcAddress
extern "C" CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags);

// X(export, base name asked of cuGetProcAddress, first CUDA version of this ABI, first version of
//   the next ABI or 0, per-thread-stream variant, KV role). The KV role (policy of docs/kv-deferral.md
//   §3) says what the hook does about deferred KV: `place` may put the allocation in the KV arena,
//   `free` releases KV tensors, `access` reaches memory by address (a copy, memset, export or range
//   query: kv_touch commits KV it reaches first), `point` is an event the commit trigger reads
//   (launches, captures, memory queries, module loads), `handle` takes a VMM handle or mapping that may be
//   kvremap's (kv_vmm.h: virtual handles translated, adopted regions' unmaps and access grants), `none`
//   leaves KV alone (pitched, stream-ordered and pool allocations are never KV candidates).
#define KVREMAP_DRIVER_HOOKS(X)                                                      \
  X(cuMemAlloc_v2, cuMemAlloc, 3020, 0, false, place)                                       \
  X(cuMemFree_v2, cuMemFree, 3020, 0, false, free)                                          \
  X(cuMemAllocPitch_v2, cuMemAllocPitch, 3020, 0, false, none)                              \
  X(cuMemAllocAsync, cuMemAllocAsync, 11020, 0, false, none)                                \
  X(cuMemAllocAsync_ptsz, cuMemAllocAsync, 11020, 0, true, none)                            \
  X(cuMemFreeAsync, cuMemFreeAsync, 11020, 0, false, none)                                  \
  X(cuMemFreeAsync_ptsz, cuMemFreeAsync, 11020, 0, true, none)                              \
  X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, 0, false, none)                \
  X(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, 11020, 0, true, none)            \
  X(cuMemGetInfo_v2, cuMemGetInfo, 3020, 0, false, point)                                   \
  X(cuMemCreate, cuMemCreate, 10020, 0, false, place)                                       \
  X(cuMemRelease, cuMemRelease, 10020, 0, false, handle)                                    \
  X(cuMemMap, cuMemMap, 10020, 0, false, handle)                                            \
  X(cuMemUnmap, cuMemUnmap, 10020, 0, false, handle)                                        \
  X(cuMemSetAccess, cuMemSetAccess, 10020, 0, false, handle)                                \
  X(cuMemGetAllocationPropertiesFromHandle, cuMemGetAllocationPropertiesFromHandle, 10020, 0, false, handle) \
  X(cuMemExportToShareableHandle, cuMemExportToShareableHandle, 10020, 0, false, handle)    \
  X(cuMulticastBindMem, cuMulticastBindMem, 12010, 0, false, handle)                        \
  X(cuMemMapArrayAsync, cuMemMapArrayAsync, 11010, 0, false, handle)                        \
  X(cuMemMapArrayAsync_ptsz, cuMemMapArrayAsync, 11010, 0, true, handle)                    \
  X(cuMemAddressReserve, cuMemAddressReserve, 10020, 0, false, none)                        \
  X(cuMemAddressFree, cuMemAddressFree, 10020, 0, false, none)                              \
  X(cuStreamBeginCapture_v2, cuStreamBeginCapture, 10010, 0, false, point)                  \
  X(cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture, 10010, 0, true, point)              \
  X(cuStreamEndCapture, cuStreamEndCapture, 10000, 0, false, point)                         \
  X(cuStreamEndCapture_ptsz, cuStreamEndCapture, 10000, 0, true, point)                     \
  X(cuStreamDestroy_v2, cuStreamDestroy, 4000, 0, false, point)                             \
  X(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040, 0, false, none)        \
  X(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams, 12000, 0, false, none)      \
  X(cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams, 12000, 0, true, none)  \
  X(cuGraphLaunch, cuGraphLaunch, 10000, 0, false, point)                                   \
  X(cuGraphLaunch_ptsz, cuGraphLaunch, 10000, 0, true, point)                               \
  X(cuGraphExecDestroy, cuGraphExecDestroy, 10000, 0, false, none)                          \
  X(cuModuleLoadData, cuModuleLoadData, 2000, 0, false, point)                              \
  X(cuModuleLoadDataEx, cuModuleLoadDataEx, 2010, 0, false, point)                          \
  X(cuModuleUnload, cuModuleUnload, 2000, 0, false, none)                                   \
  X(cuLibraryLoadData, cuLibraryLoadData, 12000, 0, false, point)                           \
  X(cuLibraryUnload, cuLibraryUnload, 12000, 0, false, none)                                \
  X(cuLaunchKernel, cuLaunchKernel, 4000, 0, false, point)                                  \
  X(cuLaunchKernel_ptsz, cuLaunchKernel, 4000, 0, true, point)                              \
  X(cuLaunchKernelEx, cuLaunchKernelEx, 11060, 0, false, point)                             \
  X(cuLaunchKernelEx_ptsz, cuLaunchKernelEx, 11060, 0, true, point)                         \
  X(cuMemcpy, cuMemcpy, 4000, 0, false, access)                                             \
  X(cuMemcpy_ptds, cuMemcpy, 4000, 0, true, access)                                         \
  X(cuMemcpyAsync, cuMemcpyAsync, 4000, 0, false, access)                                   \
  X(cuMemcpyAsync_ptsz, cuMemcpyAsync, 4000, 0, true, access)                               \
  X(cuMemcpyHtoD_v2, cuMemcpyHtoD, 3020, 0, false, access)                                  \
  X(cuMemcpyHtoD_v2_ptds, cuMemcpyHtoD, 3020, 0, true, access)                              \
  X(cuMemcpyDtoH_v2, cuMemcpyDtoH, 3020, 0, false, access)                                  \
  X(cuMemcpyDtoH_v2_ptds, cuMemcpyDtoH, 3020, 0, true, access)                              \
  X(cuMemcpyDtoD_v2, cuMemcpyDtoD, 3020, 0, false, access)                                  \
  X(cuMemcpyDtoD_v2_ptds, cuMemcpyDtoD, 3020, 0, true, access)                              \
  X(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync, 3020, 0, false, access)                        \
  X(cuMemcpyHtoDAsync_v2_ptsz, cuMemcpyHtoDAsync, 3020, 0, true, access)                    \
  X(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync, 3020, 0, false, access)                        \
  X(cuMemcpyDtoHAsync_v2_ptsz, cuMemcpyDtoHAsync, 3020, 0, true, access)                    \
  X(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync, 3020, 0, false, access)                        \
  X(cuMemcpyDtoDAsync_v2_ptsz, cuMemcpyDtoDAsync, 3020, 0, true, access)                    \
  X(cuMemsetD8_v2, cuMemsetD8, 3020, 0, false, access)                                      \
  X(cuMemsetD8_v2_ptds, cuMemsetD8, 3020, 0, true, access)                                  \
  X(cuMemsetD8Async, cuMemsetD8Async, 3020, 0, false, access)                               \
  X(cuMemsetD8Async_ptsz, cuMemsetD8Async, 3020, 0, true, access)                           \
  X(cuMemsetD16_v2, cuMemsetD16, 3020, 0, false, access)                                    \
  X(cuMemsetD16_v2_ptds, cuMemsetD16, 3020, 0, true, access)                                \
  X(cuMemsetD32_v2, cuMemsetD32, 3020, 0, false, access)                                    \
  X(cuMemsetD32_v2_ptds, cuMemsetD32, 3020, 0, true, access)                                \
  X(cuMemsetD2D8_v2, cuMemsetD2D8, 3020, 0, false, access)                                  \
  X(cuMemsetD2D8_v2_ptds, cuMemsetD2D8, 3020, 0, true, access)                              \
  X(cuMemsetD2D16_v2, cuMemsetD2D16, 3020, 0, false, access)                                \
  X(cuMemsetD2D16_v2_ptds, cuMemsetD2D16, 3020, 0, true, access)                            \
  X(cuMemsetD2D32_v2, cuMemsetD2D32, 3020, 0, false, access)                                \
  X(cuMemsetD2D32_v2_ptds, cuMemsetD2D32, 3020, 0, true, access)                            \
  X(cuMemsetD16Async, cuMemsetD16Async, 3020, 0, false, access)                             \
  X(cuMemsetD16Async_ptsz, cuMemsetD16Async, 3020, 0, true, access)                         \
  X(cuMemsetD32Async, cuMemsetD32Async, 3020, 0, false, access)                             \
  X(cuMemsetD32Async_ptsz, cuMemsetD32Async, 3020, 0, true, access)                         \
  X(cuMemsetD2D8Async, cuMemsetD2D8Async, 3020, 0, false, access)                           \
  X(cuMemsetD2D8Async_ptsz, cuMemsetD2D8Async, 3020, 0, true, access)                       \
  X(cuMemsetD2D16Async, cuMemsetD2D16Async, 3020, 0, false, access)                         \
  X(cuMemsetD2D16Async_ptsz, cuMemsetD2D16Async, 3020, 0, true, access)                     \
  X(cuMemsetD2D32Async, cuMemsetD2D32Async, 3020, 0, false, access)                         \
  X(cuMemsetD2D32Async_ptsz, cuMemsetD2D32Async, 3020, 0, true, access)                     \
  X(cuMemcpyDtoA_v2, cuMemcpyDtoA, 3020, 0, false, access)                                  \
  X(cuMemcpyDtoA_v2_ptds, cuMemcpyDtoA, 3020, 0, true, access)                              \
  X(cuMemcpyAtoD_v2, cuMemcpyAtoD, 3020, 0, false, access)                                  \
  X(cuMemcpyAtoD_v2_ptds, cuMemcpyAtoD, 3020, 0, true, access)                              \
  X(cuMemcpy2D_v2, cuMemcpy2D, 3020, 0, false, access)                                      \
  X(cuMemcpy2D_v2_ptds, cuMemcpy2D, 3020, 0, true, access)                                  \
  X(cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned, 3020, 0, false, access)                    \
  X(cuMemcpy2DUnaligned_v2_ptds, cuMemcpy2DUnaligned, 3020, 0, true, access)                \
  X(cuMemcpy3D_v2, cuMemcpy3D, 3020, 0, false, access)                                      \
  X(cuMemcpy3D_v2_ptds, cuMemcpy3D, 3020, 0, true, access)                                  \
  X(cuMemcpy2DAsync_v2, cuMemcpy2DAsync, 3020, 0, false, access)                            \
  X(cuMemcpy2DAsync_v2_ptsz, cuMemcpy2DAsync, 3020, 0, true, access)                        \
  X(cuMemcpy3DAsync_v2, cuMemcpy3DAsync, 3020, 0, false, access)                            \
  X(cuMemcpy3DAsync_v2_ptsz, cuMemcpy3DAsync, 3020, 0, true, access)                        \
  X(cuMemcpyPeer, cuMemcpyPeer, 4000, 0, false, access)                                     \
  X(cuMemcpyPeer_ptds, cuMemcpyPeer, 4000, 0, true, access)                                 \
  X(cuMemcpyPeerAsync, cuMemcpyPeerAsync, 4000, 0, false, access)                           \
  X(cuMemcpyPeerAsync_ptsz, cuMemcpyPeerAsync, 4000, 0, true, access)                       \
  X(cuMemcpy3DPeer, cuMemcpy3DPeer, 4000, 0, false, access)                                 \
  X(cuMemcpy3DPeer_ptds, cuMemcpy3DPeer, 4000, 0, true, access)                             \
  X(cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync, 4000, 0, false, access)                       \
  X(cuMemcpy3DPeerAsync_ptsz, cuMemcpy3DPeerAsync, 4000, 0, true, access)                   \
  X(cuMemcpyBatchAsync, cuMemcpyBatchAsync, 12080, 13000, false, access)                    \
  X(cuMemcpyBatchAsync_ptsz, cuMemcpyBatchAsync, 12080, 13000, true, access)                \
  X(cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync, 13000, 0, false, access)                     \
  X(cuMemcpyBatchAsync_v2_ptsz, cuMemcpyBatchAsync, 13000, 0, true, access)                 \
  X(cuMemcpy3DBatchAsync, cuMemcpy3DBatchAsync, 12080, 13000, false, access)                \
  X(cuMemcpy3DBatchAsync_ptsz, cuMemcpy3DBatchAsync, 12080, 13000, true, access)            \
  X(cuMemcpy3DBatchAsync_v2, cuMemcpy3DBatchAsync, 13000, 0, false, access)                 \
  X(cuMemcpy3DBatchAsync_v2_ptsz, cuMemcpy3DBatchAsync, 13000, 0, true, access)             \
  X(cuIpcGetMemHandle, cuIpcGetMemHandle, 4010, 0, false, access)                           \
  X(cuMemGetAddressRange_v2, cuMemGetAddressRange, 3020, 0, false, access)                  \
  X(cuPointerGetAttribute, cuPointerGetAttribute, 4000, 0, false, access)                   \
  X(cuPointerGetAttributes, cuPointerGetAttributes, 7000, 0, false, access)                 \
  X(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000, 0, false, access)      \
  X(cuMemGetHandleForAddressRange, cuMemGetHandleForAddressRange, 11070, 0, false, access)  \
  X(cuGetProcAddress, cuGetProcAddress, 11030, 12000, false, none)                          \
  X(cuGetProcAddress_v2, cuGetProcAddress, 12000, 0, false, none)

namespace kvremap::interpose {

// Real-function slots, one per hook, filled by whichever route sees the real pointer first.
#define KVREMAP_DECLARE_REAL(exp, base, first, next, per_thread, kv) extern std::atomic<void*> g_real_##exp;
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
