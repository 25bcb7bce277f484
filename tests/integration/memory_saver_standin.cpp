// A stand-in for torch_memory_saver's preload library: cudaMalloc maps its own VMM memory inside a region;
// pause/resume. Like TMS (entrypoint.cpp, core.cpp): inside a region (a thread-local flag) an allocation is
// cuMemCreate, cuMemAddressReserve, cuMemMap, cuMemSetAccess, recorded here; outside it the call goes
// to the next definer (RTLD_NEXT). Pause unmaps and releases the physical memory and keeps the
// address range; resume creates new memory and maps it at the same address (contents are not kept).
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <mutex>
#include <vector>

namespace {

struct Allocation {
  CUdeviceptr base = 0;
  std::size_t bytes = 0;
  CUdevice device = 0;
  CUmemGenericAllocationHandle handle = 0;
  bool paused = false;
};

thread_local bool t_in_region = false;
std::mutex g_lock;
std::vector<Allocation> g_allocations;

template <typename Fn>
Fn next_definition(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

CUmemAllocationProp device_prop(CUdevice device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

// New physical memory mapped and made accessible at a's address range.
CUresult map_new(Allocation& a) {
  const CUmemAllocationProp prop = device_prop(a.device);
  if (CUresult r = cuMemCreate(&a.handle, a.bytes, &prop, 0); r != CUDA_SUCCESS) return r;
  if (CUresult r = cuMemMap(a.base, a.bytes, 0, a.handle, 0); r != CUDA_SUCCESS) {
    cuMemRelease(a.handle);
    return r;
  }
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (CUresult r = cuMemSetAccess(a.base, a.bytes, &access, 1); r != CUDA_SUCCESS) {
    cuMemUnmap(a.base, a.bytes);
    cuMemRelease(a.handle);
    return r;
  }
  return CUDA_SUCCESS;
}

CUresult unmap(Allocation& a) {
  if (CUresult r = cuMemUnmap(a.base, a.bytes); r != CUDA_SUCCESS) return r;
  return cuMemRelease(a.handle);
}

cudaError_t region_malloc(void** ptr, std::size_t size) {
  Allocation a;
  if (cuCtxGetDevice(&a.device) != CUDA_SUCCESS) return cudaErrorInitializationError;
  const CUmemAllocationProp prop = device_prop(a.device);
  std::size_t granularity = 0;
  if (cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS ||
      granularity == 0)
    return cudaErrorMemoryAllocation;
  a.bytes = (size + granularity - 1) / granularity * granularity;
  if (cuMemAddressReserve(&a.base, a.bytes, 0, 0, 0) != CUDA_SUCCESS) return cudaErrorMemoryAllocation;
  if (map_new(a) != CUDA_SUCCESS) {
    cuMemAddressFree(a.base, a.bytes);
    return cudaErrorMemoryAllocation;
  }
  std::lock_guard<std::mutex> g(g_lock);
  g_allocations.push_back(a);
  *ptr = reinterpret_cast<void*>(a.base);
  return cudaSuccess;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void standin_region_begin() { t_in_region = true; }
__attribute__((visibility("default"))) void standin_region_end() { t_in_region = false; }

__attribute__((visibility("default"))) cudaError_t cudaMalloc(void** ptr, std::size_t size) {
  if (!t_in_region || ptr == nullptr || size == 0)
    return next_definition<decltype(&cudaMalloc)>("cudaMalloc")(ptr, size);
  return region_malloc(ptr, size);
}

__attribute__((visibility("default"))) cudaError_t cudaFree(void* ptr) {
  {
    std::lock_guard<std::mutex> g(g_lock);
    for (auto it = g_allocations.begin(); it != g_allocations.end(); ++it) {
      if (it->base != reinterpret_cast<CUdeviceptr>(ptr)) continue;
      if (!it->paused && unmap(*it) != CUDA_SUCCESS) return cudaErrorInvalidValue;
      const CUresult r = cuMemAddressFree(it->base, it->bytes);
      g_allocations.erase(it);
      return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
    }
  }
  return next_definition<decltype(&cudaFree)>("cudaFree")(ptr);
}

// Releases the physical memory of every region allocation; 0, or the first driver error.
__attribute__((visibility("default"))) int standin_pause() {
  std::lock_guard<std::mutex> g(g_lock);
  for (Allocation& a : g_allocations) {
    if (a.paused) continue;
    if (CUresult r = unmap(a); r != CUDA_SUCCESS) return static_cast<int>(r);
    a.paused = true;
  }
  return 0;
}

// Backs every paused allocation again at its address; 0, or the first driver error.
__attribute__((visibility("default"))) int standin_resume() {
  std::lock_guard<std::mutex> g(g_lock);
  for (Allocation& a : g_allocations) {
    if (!a.paused) continue;
    if (CUresult r = map_new(a); r != CUDA_SUCCESS) return static_cast<int>(r);
    a.paused = false;
  }
  return 0;
}

}  // extern "C"
