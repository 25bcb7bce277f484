// The driver wrappers for allocation, capture, graphs, modules and launches, and the cuGetProcAddress
// substitution that routes cudart through every wrapper of driver_hooks.h's table.
#include "interpose/hooks/driver_hooks.h"

#include <span>
#include <unordered_map>
#include <vector>

#include "interpose/driver/driver_api.h"
#include "interpose/base/guard.h"
#include "interpose/hooks/hook_bodies.h"
#include "interpose/hooks/hook_enter.h"
#include "interpose/hooks/hook_support.h"
#include "interpose/hooks/proc_routing.h"
#include "interpose/kv/kv_manager.h"
#include "interpose/kv/kv_observe_only.h"
#include "interpose/kv/kv_vmm.h"
#include "interpose/driver/real.h"
#include "interpose/trace/trace_writer.h"
#include "interpose/track/oom_snapshot.h"
#include "interpose/track/tracker.h"

namespace kvremap::interpose {

#define KVREMAP_DEFINE_REAL(exp, base, first, next, per_thread, kv) std::atomic<void*> g_real_##exp{nullptr};
KVREMAP_DRIVER_HOOKS(KVREMAP_DEFINE_REAL)
#undef KVREMAP_DEFINE_REAL

namespace {

// Rows in the table's order, as proc_routes() lists them: a route's index is its hook's.
const std::vector<DriverHook>& hooks() {
  static const std::vector<DriverHook>* table = new std::vector<DriverHook>{
#define KVREMAP_HOOK_ROW(exp, base, first, next, per_thread, kv) \
  {#exp, #base, first, next, per_thread, reinterpret_cast<void*>(&::exp), &g_real_##exp},
      KVREMAP_DRIVER_HOOKS(KVREMAP_HOOK_ROW)
#undef KVREMAP_HOOK_ROW
  };
  return *table;
}

const std::unordered_map<std::string_view, const DriverHook*>& by_export_name() {
  static const auto* index = [] {
    auto* i = new std::unordered_map<std::string_view, const DriverHook*>;
    for (const DriverHook& h : hooks()) (*i)[h.export_name] = &h;
    return i;
  }();
  return *index;
}

// Above the versions the table knows, the answer has a route's ABI when it is the function the
// real resolver gives for the route's first version.
bool same_abi_as_first(const ProcRoute& h, unsigned long long flags, void* real_fn) {
  ProcAddressFn resolver = real_proc_address();
  if (!resolver) return false;
  void* reference = nullptr;
  CUdriverProcAddressQueryResult status{};
  if (resolver(std::string(h.base_name).c_str(), &reference, h.first_version, flags, &status) != 0) return false;
  return reference == real_fn;
}

}  // namespace

bool is_own_wrapper(void* fn) {
  for (const DriverHook& h : hooks())
    if (h.wrapper == fn) return true;
  return false;
}

namespace {

void* find_wrapper(std::string_view base_name, int version, unsigned long long flags, void* real_fn) {
  const std::span<const ProcRoute* const> named = routes_named(base_name);
  if (named.empty() || !real_fn || is_own_wrapper(real_fn)) return nullptr;
  const ProcRoute* route = route_for_query(named, version, flags, real_fn, same_abi_as_first);
  if (!route) return nullptr;
  const DriverHook& h = hooks()[static_cast<std::size_t>(route - proc_routes().data())];
  h.real->store(real_fn, std::memory_order_release);
  count_routed_lookup();
  return h.wrapper;
}

}  // namespace

void* wrapper_for_query(std::string_view base_name, int version, unsigned long long flags, void* real_fn) {
  try {
    return find_wrapper(base_name, version, flags, real_fn);
  } catch (...) {
    return nullptr;  // out of memory building the index: the caller gets the real function
  }
}

const DriverHook* hook_for_export(std::string_view export_name) {
  try {
    auto it = by_export_name().find(export_name);
    return it == by_export_name().end() ? nullptr : it->second;
  } catch (...) {
    return nullptr;
  }
}

}  // namespace kvremap::interpose

using namespace kvremap::interpose;

KVREMAP_HOOK KVREMAP_HOT_PATH CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  KVREMAP_ENTER(cuMemAlloc_v2, dptr, bytes);
  CUresult kv_result = CUDA_SUCCESS;
  if (dptr && kv_allocate(bytes, "cuMemAlloc", __builtin_return_address(0), dptr, &kv_result)) {
    if (kv_result == CUDA_ERROR_OUT_OF_MEMORY) on_out_of_memory(bytes, "cuMemAlloc", __builtin_return_address(0));
    return kv_result;
  }
  kv_before(KvPoint::kAllocation);
  CUresult r = real(dptr, bytes);
  if (KVREMAP_LIKELY(r == CUDA_SUCCESS && dptr))
    on_alloc(*dptr, bytes, AllocKind::kPlain, "cuMemAlloc", __builtin_return_address(0));
  else if (r == CUDA_ERROR_OUT_OF_MEMORY && dptr &&
           kv_serving_overflow(bytes, "cuMemAlloc", __builtin_return_address(0), -1, dptr))
    return CUDA_SUCCESS;
  else if (r == CUDA_ERROR_OUT_OF_MEMORY)
    on_out_of_memory(bytes, "cuMemAlloc", __builtin_return_address(0));
  return r;
}

KVREMAP_HOOK CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                                         unsigned int element_bytes) {
  KVREMAP_ENTER(cuMemAllocPitch_v2, dptr, pitch, width, height, element_bytes);
  CUresult r = real(dptr, pitch, width, height, element_bytes);
  if (r == CUDA_SUCCESS && dptr && pitch)
    on_alloc(*dptr, *pitch * height, AllocKind::kPlain, "cuMemAllocPitch", __builtin_return_address(0));
  else if (r == CUDA_ERROR_OUT_OF_MEMORY)
    on_out_of_memory(width * height, "cuMemAllocPitch", __builtin_return_address(0));
  return r;
}

KVREMAP_HOOK KVREMAP_HOT_PATH CUresult cuMemFree_v2(CUdeviceptr dptr) {
  KVREMAP_ENTER(cuMemFree_v2, dptr);
  CUresult kv_result = CUDA_SUCCESS;
  if (dptr && kv_free(dptr, "cuMemFree", &kv_result)) return kv_result;
  return tracked_free(dptr, Held::kAllocation, "cuMemFree", CUDA_SUCCESS, [&] { return real(dptr); });
}

#define KVREMAP_ASYNC_ALLOC_HOOKS(exp)                                                                 \
  KVREMAP_HOOK KVREMAP_HOT_PATH CUresult exp(CUdeviceptr* dptr, size_t bytes, CUstream stream) {       \
    KVREMAP_ENTER(exp, dptr, bytes, stream);                                                           \
    const CUresult r = real(dptr, bytes, stream);                                                      \
    return after_stream_ordered_alloc(r, dptr, bytes, "cuMemAllocAsync", __builtin_return_address(0)); \
  }
KVREMAP_ASYNC_ALLOC_HOOKS(cuMemAllocAsync)
KVREMAP_ASYNC_ALLOC_HOOKS(cuMemAllocAsync_ptsz)

// Allocations from a named pool are stream-ordered allocations like the device's current pool's.
#define KVREMAP_POOL_ALLOC_HOOKS(exp)                                                                          \
  KVREMAP_HOOK CUresult exp(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream stream) {             \
    KVREMAP_ENTER(exp, dptr, bytes, pool, stream);                                                             \
    const CUresult r = real(dptr, bytes, pool, stream);                                                        \
    return after_stream_ordered_alloc(r, dptr, bytes, "cuMemAllocFromPoolAsync", __builtin_return_address(0)); \
  }
KVREMAP_POOL_ALLOC_HOOKS(cuMemAllocFromPoolAsync)
KVREMAP_POOL_ALLOC_HOOKS(cuMemAllocFromPoolAsync_ptsz)

#define KVREMAP_ASYNC_FREE_HOOKS(exp)                                                                                 \
  KVREMAP_HOOK KVREMAP_HOT_PATH CUresult exp(CUdeviceptr dptr, CUstream stream) {                                     \
    KVREMAP_ENTER(exp, dptr, stream);                                                                                 \
    return tracked_free(dptr, Held::kAllocation, "cuMemFreeAsync", CUDA_SUCCESS, [&] { return real(dptr, stream); }); \
  }
KVREMAP_ASYNC_FREE_HOOKS(cuMemFreeAsync)
KVREMAP_ASYNC_FREE_HOOKS(cuMemFreeAsync_ptsz)

KVREMAP_HOOK CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  KVREMAP_ENTER(cuMemGetInfo_v2, free_bytes, total_bytes);
  return memory_query(real, free_bytes, total_bytes, "cuMemGetInfo");
}

KVREMAP_HOOK CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                                  unsigned long long flags) {
  KVREMAP_ENTER(cuMemCreate, handle, size, prop, flags);
  CUresult kv_result = CUDA_SUCCESS;
  if (kv_vmm_create(handle, size, prop, flags, __builtin_return_address(0), &kv_result)) {
    if (kv_result == CUDA_ERROR_OUT_OF_MEMORY) on_out_of_memory(size, "cuMemCreate", __builtin_return_address(0));
    return kv_result;
  }
  kv_before(KvPoint::kAllocation);
  CUresult r = real(handle, size, prop, flags);
  if (r == CUDA_SUCCESS && handle)
    on_alloc(*handle, size, AllocKind::kVmmHandle, "cuMemCreate", __builtin_return_address(0));
  else if (r == CUDA_ERROR_OUT_OF_MEMORY)
    on_out_of_memory(size, "cuMemCreate", __builtin_return_address(0));
  return r;
}

// The hooks below that take a handle check for a virtual one first, before the reentrancy guard and
// whether tracking is on: the driver has never seen such a value, so it must be translated in every state
// (a nested call, the process exiting).
KVREMAP_HOOK CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  CUresult kv_result = CUDA_SUCCESS;
  if (kv_vmm_release(handle, &kv_result)) return kv_result;
  KVREMAP_ENTER(cuMemRelease, handle);
  return tracked_free(handle, Held::kVmmHandle, "cuMemRelease", CUDA_SUCCESS, [&] { return real(handle); });
}

KVREMAP_HOOK CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                               unsigned long long flags) {
  CUresult kv_result = CUDA_SUCCESS;
  if (kv_vmm_map(ptr, size, offset, handle, flags, &kv_result)) return kv_result;
  KVREMAP_ENTER(cuMemMap, ptr, size, offset, handle, flags);
  const CUresult r = real(ptr, size, offset, handle, flags);
  if (r == CUDA_SUCCESS) {
    kv_note_engine_map(ptr, size, handle);
    kv_vmm_engine_mapped(ptr, size, handle);
  }
  return r;
}

KVREMAP_HOOK CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  CUresult kv_result = CUDA_SUCCESS;
  if (kv_vmm_unmap(ptr, size, &kv_result)) return kv_result;
  KVREMAP_ENTER(cuMemUnmap, ptr, size);
  const CUresult r = real(ptr, size);
  if (r == CUDA_SUCCESS) {
    kv_note_engine_unmap(ptr, size);
    kv_vmm_engine_unmapped(ptr, size);
  }
  return r;
}

KVREMAP_HOOK CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  auto real = KVREMAP_REAL(cuMemSetAccess);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult r = real(ptr, size, desc, count);
  if (r == CUDA_SUCCESS && desc) kv_vmm_access(ptr, size, desc, count);
  return r;
}

KVREMAP_HOOK CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                             CUmemGenericAllocationHandle handle) {
  CUresult kv_result = CUDA_SUCCESS;
  if (kv_vmm_properties(prop, handle, &kv_result)) return kv_result;
  KVREMAP_ENTER(cuMemGetAllocationPropertiesFromHandle, prop, handle);
  return real(prop, handle);
}

KVREMAP_HOOK CUresult cuMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                                   CUmemAllocationHandleType type, unsigned long long flags) {
  auto real = KVREMAP_REAL(cuMemExportToShareableHandle);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (CUresult r = kv_vmm_translate(&handle, "cuMemExportToShareableHandle"); r != CUDA_SUCCESS) return r;
  return real(shareable, handle, type, flags);
}

KVREMAP_HOOK CUresult cuMulticastBindMem(CUmemGenericAllocationHandle multicast, size_t multicast_offset,
                                         CUmemGenericAllocationHandle handle, size_t offset, size_t size,
                                         unsigned long long flags) {
  auto real = KVREMAP_REAL(cuMulticastBindMem);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (CUresult r = kv_vmm_translate(&handle, "cuMulticastBindMem"); r != CUDA_SUCCESS) return r;
  return real(multicast, multicast_offset, handle, offset, size, flags);
}

namespace {
// Sparse and mipmapped arrays backed by VMM handles: each entry's generic handle translated where virtual.
template <typename Real>
CUresult map_arrays(Real real, CUarrayMapInfo* infos, unsigned int count, CUstream stream) {
  if (!infos || kv_detail::g_virtual_handles.load(std::memory_order_relaxed) == 0) return real(infos, count, stream);
  try {
    std::vector<CUarrayMapInfo> translated(infos, infos + count);
    for (CUarrayMapInfo& info : translated)
      if (info.memHandleType == CU_MEM_HANDLE_TYPE_GENERIC)
        if (CUresult r = kv_vmm_translate(&info.memHandle.memHandle, "cuMemMapArrayAsync"); r != CUDA_SUCCESS)
          return r;
    return real(translated.data(), count, stream);
  } catch (...) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
}
}  // namespace

KVREMAP_HOOK CUresult cuMemMapArrayAsync(CUarrayMapInfo* infos, unsigned int count, CUstream stream) {
  auto real = KVREMAP_REAL(cuMemMapArrayAsync);
  return real ? map_arrays(real, infos, count, stream) : CUDA_ERROR_NOT_INITIALIZED;
}
KVREMAP_HOOK CUresult cuMemMapArrayAsync_ptsz(CUarrayMapInfo* infos, unsigned int count, CUstream stream) {
  auto real = KVREMAP_REAL(cuMemMapArrayAsync_ptsz);
  return real ? map_arrays(real, infos, count, stream) : CUDA_ERROR_NOT_INITIALIZED;
}

KVREMAP_HOOK CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                          unsigned long long flags) {
  KVREMAP_ENTER(cuMemAddressReserve, ptr, size, alignment, addr, flags);
  const CUresult r = real(ptr, size, alignment, addr, flags);
  if (r == CUDA_SUCCESS && ptr) {
    kv_vmm_reserved(*ptr, size);
    kv_note_engine_reserve(*ptr, size, tracked_device_now());
  }
  return r;
}
KVREMAP_HOOK CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  KVREMAP_ENTER(cuMemAddressFree, ptr, size);
  const CUresult r = real(ptr, size);
  if (r == CUDA_SUCCESS) {
    kv_vmm_reservation_freed(ptr);
    kv_note_engine_address_free(ptr);
  }
  return r;
}

#define KVREMAP_BEGIN_CAPTURE_HOOK(exp, per_thread)                      \
  KVREMAP_HOOK CUresult exp(CUstream stream, CUstreamCaptureMode mode) { \
    KVREMAP_ENTER(exp, stream, mode);                                    \
    return begin_capture(real, stream, mode, per_thread);                \
  }
KVREMAP_BEGIN_CAPTURE_HOOK(cuStreamBeginCapture_v2, false)
KVREMAP_BEGIN_CAPTURE_HOOK(cuStreamBeginCapture_v2_ptsz, true)

#define KVREMAP_END_CAPTURE_HOOK(exp, per_thread)              \
  KVREMAP_HOOK CUresult exp(CUstream stream, CUgraph* graph) { \
    KVREMAP_ENTER(exp, stream, graph);                         \
    return end_capture(real, stream, graph, per_thread);       \
  }
KVREMAP_END_CAPTURE_HOOK(cuStreamEndCapture, false)
KVREMAP_END_CAPTURE_HOOK(cuStreamEndCapture_ptsz, true)

// Before the driver may hand the handle to a new stream.
KVREMAP_HOOK CUresult cuStreamDestroy_v2(CUstream stream) {
  KVREMAP_ENTER(cuStreamDestroy_v2, stream);
  kv_stream_destroyed(capture_stream_key(stream, false));
  return real(stream);
}

KVREMAP_HOOK CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
  KVREMAP_ENTER(cuGraphInstantiateWithFlags, exec, graph, flags);
  return instantiate(real, exec, graph, flags, "cuGraphInstantiateWithFlags");
}

#define KVREMAP_INSTANTIATE_PARAMS_HOOK(exp)                                                           \
  KVREMAP_HOOK CUresult exp(CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) { \
    KVREMAP_ENTER(exp, exec, graph, params);                                                           \
    return instantiate(real, exec, graph, params, "cuGraphInstantiateWithParams");                     \
  }
KVREMAP_INSTANTIATE_PARAMS_HOOK(cuGraphInstantiateWithParams)
KVREMAP_INSTANTIATE_PARAMS_HOOK(cuGraphInstantiateWithParams_ptsz)

#define KVREMAP_GRAPH_LAUNCH_HOOK(exp)                           \
  KVREMAP_HOOK CUresult exp(CUgraphExec exec, CUstream stream) { \
    KVREMAP_ENTER(exp, exec, stream);                            \
    return graph_launch(real, exec, stream);                     \
  }
KVREMAP_GRAPH_LAUNCH_HOOK(cuGraphLaunch)
KVREMAP_GRAPH_LAUNCH_HOOK(cuGraphLaunch_ptsz)

KVREMAP_HOOK CUresult cuGraphExecDestroy(CUgraphExec exec) {
  KVREMAP_ENTER(cuGraphExecDestroy, exec);
  return graph_exec_destroy(real, exec, "cuGraphExecDestroy");
}

KVREMAP_HOOK CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  KVREMAP_ENTER(cuModuleLoadData, module, image);
  kv_before(KvPoint::kModuleLoad);
  std::uint64_t bytes = 0;
  CUresult r = measure_consumed(&bytes, CUDA_SUCCESS, [&] { return real(module, image); });
  if (r == CUDA_SUCCESS && module) on_module_load(reinterpret_cast<std::uint64_t>(*module), bytes, "cuModuleLoadData");
  return r;
}

KVREMAP_HOOK CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int n, CUjit_option* options,
                                         void** values) {
  KVREMAP_ENTER(cuModuleLoadDataEx, module, image, n, options, values);
  kv_before(KvPoint::kModuleLoad);
  std::uint64_t bytes = 0;
  CUresult r = measure_consumed(&bytes, CUDA_SUCCESS, [&] { return real(module, image, n, options, values); });
  if (r == CUDA_SUCCESS && module)
    on_module_load(reinterpret_cast<std::uint64_t>(*module), bytes, "cuModuleLoadDataEx");
  return r;
}

KVREMAP_HOOK CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jit_options,
                                        void** jit_values, unsigned int num_jit, CUlibraryOption* library_options,
                                        void** library_values, unsigned int num_library) {
  KVREMAP_ENTER(cuLibraryLoadData, library, code, jit_options, jit_values, num_jit, library_options, library_values,
                num_library);
  kv_before(KvPoint::kModuleLoad);
  std::uint64_t bytes = 0;
  CUresult r = measure_consumed(&bytes, CUDA_SUCCESS, [&] {
    return real(library, code, jit_options, jit_values, num_jit, library_options, library_values, num_library);
  });
  if (r == CUDA_SUCCESS && library)
    on_module_load(reinterpret_cast<std::uint64_t>(*library), bytes, "cuLibraryLoadData");
  return r;
}

KVREMAP_HOOK CUresult cuModuleUnload(CUmodule module) {
  KVREMAP_ENTER(cuModuleUnload, module);
  return tracked_free(reinterpret_cast<std::uint64_t>(module), Held::kModule, "cuModuleUnload", CUDA_SUCCESS,
                      [&] { return real(module); });
}

KVREMAP_HOOK CUresult cuLibraryUnload(CUlibrary library) {
  KVREMAP_ENTER(cuLibraryUnload, library);
  return tracked_free(reinterpret_cast<std::uint64_t>(library), Held::kModule, "cuLibraryUnload", CUDA_SUCCESS,
                      [&] { return real(library); });
}

#define KVREMAP_LAUNCH_HOOK(exp, per_thread)                                                               \
  KVREMAP_HOOK CUresult exp(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, \
                            unsigned bz, unsigned shared, CUstream stream, void** params, void** extra) {  \
    KVREMAP_ENTER(exp, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);                          \
    kv_before_launch(capture_stream_key(stream, per_thread), KernelLaunch{f, params, extra});              \
    CUresult r = real(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);                           \
    if (r == CUDA_SUCCESS) on_kernel_launch();                                                             \
    return r;                                                                                              \
  }
KVREMAP_LAUNCH_HOOK(cuLaunchKernel, false)
KVREMAP_LAUNCH_HOOK(cuLaunchKernel_ptsz, true)

#define KVREMAP_LAUNCH_EX_HOOK(exp, per_thread)                                                        \
  KVREMAP_HOOK CUresult exp(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) { \
    KVREMAP_ENTER(exp, config, f, params, extra);                                                      \
    kv_before_launch(capture_stream_key(config ? config->hStream : nullptr, per_thread),               \
                     KernelLaunch{f, params, extra});                                                  \
    CUresult r = real(config, f, params, extra);                                                       \
    if (r == CUDA_SUCCESS) on_kernel_launch();                                                         \
    return r;                                                                                          \
  }
KVREMAP_LAUNCH_EX_HOOK(cuLaunchKernelEx, false)
KVREMAP_LAUNCH_EX_HOOK(cuLaunchKernelEx_ptsz, true)

// The resolver itself: the real one answers first with identical arguments; a hooked (name, ABI)
// then gets its wrapper. Substitution depends neither on tracking being on nor on the reentrancy
// guard: cudart resolves its whole driver table once, typically from inside the first runtime call
// (which is one of our hooks), and whatever it gets then is what it uses for good.
KVREMAP_HOOK CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                          CUdriverProcAddressQueryResult* status) {
  auto real = KVREMAP_REAL(cuGetProcAddress_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real(symbol, pfn, version, flags, status);
  if (r == CUDA_SUCCESS && symbol && pfn && *pfn) {
    if (void* wrapper = wrapper_for_query(symbol, version, flags, *pfn)) *pfn = wrapper;
  }
  return r;
}

KVREMAP_HOOK CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  auto real = KVREMAP_REAL(cuGetProcAddress);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real(symbol, pfn, version, flags);
  if (r == CUDA_SUCCESS && symbol && pfn && *pfn) {
    if (void* wrapper = wrapper_for_query(symbol, version, flags, *pfn)) *pfn = wrapper;
  }
  return r;
}
