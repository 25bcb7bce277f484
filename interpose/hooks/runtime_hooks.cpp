// The exported CUDA runtime hooks; each forwards to libcudart's definition found after this library.
// cudaGetDriverEntryPoint is deprecated in CUDA 13 but still exported and used; it is hooked.
#define CUDA_ENABLE_DEPRECATED 1
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <atomic>

#include "interpose/driver/driver_api.h"
#include "interpose/hooks/driver_hooks.h"
#include "interpose/base/guard.h"
#include "interpose/hooks/hook_bodies.h"
#include "interpose/hooks/hook_enter.h"
#include "interpose/hooks/hook_export.h"
#include "interpose/hooks/hook_support.h"
#include "interpose/base/hot_path.h"
#include "interpose/kv/kv_manager.h"
#include "interpose/driver/real.h"
#include "interpose/trace/trace_writer.h"
#include "interpose/track/oom_snapshot.h"
#include "interpose/track/tracker.h"

// Per-thread-stream runtime exports that cuda_runtime_api.h declares only for PTDS builds.
KVREMAP_DECLARE_VARIANT(cudaMallocAsync, cudaMallocAsync_ptsz)
KVREMAP_DECLARE_VARIANT(cudaFreeAsync, cudaFreeAsync_ptsz)
KVREMAP_DECLARE_VARIANT(cudaStreamBeginCapture, cudaStreamBeginCapture_ptsz)
KVREMAP_DECLARE_VARIANT(cudaStreamEndCapture, cudaStreamEndCapture_ptsz)
KVREMAP_DECLARE_VARIANT(cudaGraphInstantiateWithParams, cudaGraphInstantiateWithParams_ptsz)
KVREMAP_DECLARE_VARIANT(cudaGraphLaunch, cudaGraphLaunch_ptsz)
KVREMAP_DECLARE_VARIANT(cudaGetDriverEntryPointByVersion, cudaGetDriverEntryPointByVersion_ptsz)
extern "C" cudaError_t cudaGetDriverEntryPoint(const char*, void**, unsigned long long,
                                               cudaDriverEntryPointQueryResult*);
extern "C" cudaError_t cudaGetDriverEntryPoint_ptsz(const char*, void**, unsigned long long,
                                                    cudaDriverEntryPointQueryResult*);

// Every runtime hook, once: the list gives each its real-function slot.
#define KVREMAP_RUNTIME_HOOKS(X)                                                                                    \
  X(cudaMalloc)                                                                                                     \
  X(cudaFree)                                                                                                       \
  X(cudaMallocAsync)                                                                                                \
  X(cudaMallocAsync_ptsz)                                                                                           \
  X(cudaFreeAsync)                                                                                                  \
  X(cudaFreeAsync_ptsz) X(cudaMemGetInfo) X(cudaStreamBeginCapture) X(cudaStreamBeginCapture_ptsz)                  \
      X(cudaStreamEndCapture) X(cudaStreamEndCapture_ptsz) X(cudaGraphInstantiate) X(cudaGraphInstantiateWithFlags) \
          X(cudaGraphInstantiateWithParams) X(cudaGraphInstantiateWithParams_ptsz) X(cudaGraphLaunch)               \
              X(cudaGraphLaunch_ptsz) X(cudaGraphExecDestroy) X(cudaGetDriverEntryPoint)                            \
                  X(cudaGetDriverEntryPoint_ptsz) X(cudaGetDriverEntryPointByVersion)                               \
                      X(cudaGetDriverEntryPointByVersion_ptsz) X(cudaRuntimeGetVersion) X(cudaGetDevice)

namespace {
#define KVREMAP_RUNTIME_SLOT(name) std::atomic<void*> g_rt_##name{nullptr};
KVREMAP_RUNTIME_HOOKS(KVREMAP_RUNTIME_SLOT)
#undef KVREMAP_RUNTIME_SLOT
}  // namespace

#define KVREMAP_RT_REAL(name) \
  ::kvremap::interpose::cached_real<decltype(&::name)>(g_rt_##name, #name, ::kvremap::interpose::next_definition)

#define KVREMAP_RT_ENTER(name, ...) \
  KVREMAP_ENTER_THROUGH(KVREMAP_RT_REAL(name), cudaErrorInsufficientDriver, __VA_ARGS__)

using namespace kvremap::interpose;

namespace {

// cudaGetDriverEntryPoint* call the driver's resolver through the pointer cudart obtained from us,
// so they normally return wrappers already; this makes sure of it for any other path.
void substitute_entry_point(const char* symbol, void** fn, int version, unsigned long long runtime_flags) {
  if (!symbol || !fn || !*fn) return;
  // cudaEnableDefault/LegacyStream/PerThreadDefaultStream have the driver flags' values.
  if (void* wrapper = wrapper_for_query(symbol, version, runtime_flags & 3ULL, *fn)) *fn = wrapper;
}

// The calling thread's runtime device: cheap in cudart (no driver call), unlike asking the driver.
[[gnu::always_inline]] inline int runtime_device() {
  if (only_one_device()) return 0;
  auto real = KVREMAP_RT_REAL(cudaGetDevice);
  int device = -1;
  if (!real || real(&device) != cudaSuccess) return -1;
  return device;
}

int runtime_version() {
  static std::atomic<int> cached{0};
  int v = cached.load(std::memory_order_relaxed);
  if (v == 0) {
    auto real = KVREMAP_RT_REAL(cudaRuntimeGetVersion);
    if (real && real(&v) == cudaSuccess) cached.store(v, std::memory_order_relaxed);
  }
  return v;
}

}  // namespace

KVREMAP_HOOK KVREMAP_HOT_PATH cudaError_t cudaMalloc(void** ptr, size_t size) {
  KVREMAP_RT_ENTER(cudaMalloc, ptr, size);
  CUdeviceptr kv = 0;
  CUresult kv_result = CUDA_SUCCESS;
  if (ptr && kv_allocate(size, "cudaMalloc", __builtin_return_address(0), &kv, &kv_result)) {
    if (kv_result != CUDA_SUCCESS) {
      on_out_of_memory(size, "cudaMalloc", __builtin_return_address(0), runtime_device());
      return cudaErrorMemoryAllocation;  // the only failure it reports
    }
    *ptr = reinterpret_cast<void*>(kv);
    return cudaSuccess;
  }
  kv_before(KvPoint::kAllocation);
  cudaError_t r = real(ptr, size);
  if (KVREMAP_LIKELY(r == cudaSuccess && ptr))
    on_alloc(reinterpret_cast<std::uint64_t>(*ptr), size, AllocKind::kPlain, "cudaMalloc", __builtin_return_address(0),
             runtime_device());
  else if (r == cudaErrorMemoryAllocation && ptr &&
           kv_serving_overflow(size, "cudaMalloc", __builtin_return_address(0), runtime_device(), &kv)) {
    *ptr = reinterpret_cast<void*>(kv);
    return cudaSuccess;
  } else if (r == cudaErrorMemoryAllocation) {
    on_out_of_memory(size, "cudaMalloc", __builtin_return_address(0), runtime_device());
  }
  return r;
}

KVREMAP_HOOK KVREMAP_HOT_PATH cudaError_t cudaFree(void* ptr) {
  KVREMAP_RT_ENTER(cudaFree, ptr);
  CUresult kv_result = CUDA_SUCCESS;
  if (ptr && kv_free(reinterpret_cast<CUdeviceptr>(ptr), "cudaFree", &kv_result))
    return kv_result == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
  if (!ptr) return real(ptr);
  return tracked_free(reinterpret_cast<std::uint64_t>(ptr), Held::kAllocation, "cudaFree", cudaSuccess,
                      [&] { return real(ptr); });
}

#define KVREMAP_RT_ASYNC_ALLOC(name)                                                                        \
  KVREMAP_HOOK KVREMAP_HOT_PATH cudaError_t name(void** ptr, size_t size, cudaStream_t stream) {            \
    KVREMAP_RT_ENTER(name, ptr, size, stream);                                                              \
    const cudaError_t r = real(ptr, size, stream);                                                          \
    return after_stream_ordered_alloc(r, ptr, size, "cudaMallocAsync", __builtin_return_address(0),         \
                                      runtime_device());                                                    \
  }
KVREMAP_RT_ASYNC_ALLOC(cudaMallocAsync)
KVREMAP_RT_ASYNC_ALLOC(cudaMallocAsync_ptsz)

#define KVREMAP_RT_ASYNC_FREE(name)                                                                            \
  KVREMAP_HOOK KVREMAP_HOT_PATH cudaError_t name(void* ptr, cudaStream_t stream) {                             \
    KVREMAP_RT_ENTER(name, ptr, stream);                                                                       \
    if (!ptr) return real(ptr, stream);                                                                        \
    return tracked_free(reinterpret_cast<std::uint64_t>(ptr), Held::kAllocation, "cudaFreeAsync", cudaSuccess, \
                        [&] { return real(ptr, stream); });                                                    \
  }
KVREMAP_RT_ASYNC_FREE(cudaFreeAsync)
KVREMAP_RT_ASYNC_FREE(cudaFreeAsync_ptsz)

KVREMAP_HOOK cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  KVREMAP_RT_ENTER(cudaMemGetInfo, free_bytes, total_bytes);
  return memory_query(real, free_bytes, total_bytes, "cudaMemGetInfo");
}

#define KVREMAP_RT_BEGIN_CAPTURE(name, per_thread)                                 \
  KVREMAP_HOOK cudaError_t name(cudaStream_t stream, cudaStreamCaptureMode mode) { \
    KVREMAP_RT_ENTER(name, stream, mode);                                          \
    return begin_capture(real, stream, mode, per_thread);                          \
  }
KVREMAP_RT_BEGIN_CAPTURE(cudaStreamBeginCapture, false)
KVREMAP_RT_BEGIN_CAPTURE(cudaStreamBeginCapture_ptsz, true)

#define KVREMAP_RT_END_CAPTURE(name, per_thread)                           \
  KVREMAP_HOOK cudaError_t name(cudaStream_t stream, cudaGraph_t* graph) { \
    KVREMAP_RT_ENTER(name, stream, graph);                                 \
    return end_capture(real, stream, graph, per_thread);                   \
  }
KVREMAP_RT_END_CAPTURE(cudaStreamEndCapture, false)
KVREMAP_RT_END_CAPTURE(cudaStreamEndCapture_ptsz, true)

#define KVREMAP_RT_INSTANTIATE(name, param_t)                                              \
  KVREMAP_HOOK cudaError_t name(cudaGraphExec_t* exec, cudaGraph_t graph, param_t param) { \
    KVREMAP_RT_ENTER(name, exec, graph, param);                                            \
    return instantiate(real, exec, graph, param, #name);                                   \
  }
KVREMAP_RT_INSTANTIATE(cudaGraphInstantiate, unsigned long long)
KVREMAP_RT_INSTANTIATE(cudaGraphInstantiateWithFlags, unsigned long long)
KVREMAP_RT_INSTANTIATE(cudaGraphInstantiateWithParams, cudaGraphInstantiateParams*)
KVREMAP_RT_INSTANTIATE(cudaGraphInstantiateWithParams_ptsz, cudaGraphInstantiateParams*)

#define KVREMAP_RT_GRAPH_LAUNCH(name)                                        \
  KVREMAP_HOOK cudaError_t name(cudaGraphExec_t exec, cudaStream_t stream) { \
    KVREMAP_RT_ENTER(name, exec, stream);                                    \
    return graph_launch(real, exec, stream);                                 \
  }
KVREMAP_RT_GRAPH_LAUNCH(cudaGraphLaunch)
KVREMAP_RT_GRAPH_LAUNCH(cudaGraphLaunch_ptsz)

KVREMAP_HOOK cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  KVREMAP_RT_ENTER(cudaGraphExecDestroy, exec);
  return graph_exec_destroy(real, exec, "cudaGraphExecDestroy");
}

// Entry-point lookups take no HookScope: the resolver call cudart makes inside must reach the
// cuGetProcAddress wrapper, which substitutes.
#define KVREMAP_RT_ENTRY_POINT(name, per_thread)                                                           \
  KVREMAP_HOOK cudaError_t name(const char* symbol, void** fn, unsigned long long flags,                   \
                                cudaDriverEntryPointQueryResult* status) {                                 \
    auto real = KVREMAP_RT_REAL(name);                                                                     \
    if (!real) return cudaErrorInsufficientDriver;                                                         \
    cudaError_t r = real(symbol, fn, flags, status);                                                       \
    if (r == cudaSuccess)                                                                                  \
      substitute_entry_point(symbol, fn, runtime_version(), (per_thread && (flags & 3) == 0) ? 2 : flags); \
    return r;                                                                                              \
  }
KVREMAP_RT_ENTRY_POINT(cudaGetDriverEntryPoint, false)
KVREMAP_RT_ENTRY_POINT(cudaGetDriverEntryPoint_ptsz, true)

#define KVREMAP_RT_ENTRY_POINT_BY_VERSION(name, per_thread)                                                        \
  KVREMAP_HOOK cudaError_t name(const char* symbol, void** fn, unsigned int version, unsigned long long flags,     \
                                cudaDriverEntryPointQueryResult* status) {                                         \
    auto real = KVREMAP_RT_REAL(name);                                                                             \
    if (!real) return cudaErrorInsufficientDriver;                                                                 \
    cudaError_t r = real(symbol, fn, version, flags, status);                                                      \
    if (r == cudaSuccess)                                                                                          \
      substitute_entry_point(symbol, fn, static_cast<int>(version), (per_thread && (flags & 3) == 0) ? 2 : flags); \
    return r;                                                                                                      \
  }
KVREMAP_RT_ENTRY_POINT_BY_VERSION(cudaGetDriverEntryPointByVersion, false)
KVREMAP_RT_ENTRY_POINT_BY_VERSION(cudaGetDriverEntryPointByVersion_ptsz, true)
