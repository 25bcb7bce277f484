// vLLM's CuMemAllocator (csrc/cumem_allocator.cpp + device_allocator/cumem.py) as a C library, for the simulator.
//
// Linked against libcuda (the simulator's), so its driver calls bind to whatever is preloaded: kvremap's
// exports when kvremap is in LD_PRELOAD, exactly as vLLM's pluggable allocator extension binds. Every
// driver result is checked and turned into an error code, never an abort: the engine decides.
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#define CUMEM_STUB_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// One allocation as cumem.py's pointer_to_data keeps it (AllocationData: handle tuple, tag, CPU backup).
struct Allocation {
  CUdeviceptr va = 0;
  std::size_t size = 0;  // rounded up to the granularity: what was reserved, created and mapped
  int device = 0;
  CUmemGenericAllocationHandle handle = 0;
  bool mapped = false;    // false between sleep and wake_up
  bool reserved = false;  // the VA reservation, kept across sleep
  std::string tag;
  std::vector<unsigned char> backup;  // cumem.py's cpu_backup_tensor (pinned there; plain host memory here)
};

std::mutex g_lock;
std::vector<Allocation> g_allocations;

// Error codes: negative, one per step, so a failing run names the call that failed.
enum StubError : int {
  kOk = 0,
  kNoContext = -1,
  kGranularity = -2,
  kReserve = -3,
  kCreate = -4,
  kMap = -5,
  kAccess = -6,
  kUnmap = -7,
  kRelease = -8,
  kAddressFree = -9,
  kSynchronize = -10,
  kCopy = -11,
  kUnknownPointer = -12,
  kBadArgument = -13,
};

int report(int code, const char* call, CUresult r) {
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  std::fprintf(stderr, "cumem stub: %s failed: %s (%d)\n", call, name ? name : "?", static_cast<int>(r));
  return code;
}

// cumem_allocator.cpp ensure_context: the allocator may be called on a thread with no current context;
// it then makes the device's primary context current.
int ensure_context(int* device) {
  CUcontext ctx = nullptr;
  if (CUresult r = cuCtxGetCurrent(&ctx); r != CUDA_SUCCESS) return report(kNoContext, "cuCtxGetCurrent", r);
  if (!ctx) {
    if (CUresult r = cuDevicePrimaryCtxRetain(&ctx, 0); r != CUDA_SUCCESS)
      return report(kNoContext, "cuDevicePrimaryCtxRetain", r);
    if (CUresult r = cuCtxSetCurrent(ctx); r != CUDA_SUCCESS) return report(kNoContext, "cuCtxSetCurrent", r);
  }
  CUdevice dev = 0;
  if (CUresult r = cuCtxGetDevice(&dev); r != CUDA_SUCCESS) return report(kNoContext, "cuCtxGetDevice", r);
  *device = static_cast<int>(dev);
  return kOk;
}

// cumem_allocator.cpp create_and_map: a physical handle of `a.size` on the device, FABRIC first and
// POSIX_FILE_DESCRIPTOR when the driver refuses FABRIC (no IMEX), mapped at a.va and made RW there.
int create_and_map(Allocation& a) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = a.device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
  CUresult r = cuMemCreate(&a.handle, a.size, &prop, 0);
  if (r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_NOT_PERMITTED) {
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    r = cuMemCreate(&a.handle, a.size, &prop, 0);
  }
  if (r != CUDA_SUCCESS) return report(kCreate, "cuMemCreate", r);
  if (r = cuMemMap(a.va, a.size, 0, a.handle, 0); r != CUDA_SUCCESS) {
    cuMemRelease(a.handle);
    return report(kMap, "cuMemMap", r);
  }
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = a.device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (r = cuMemSetAccess(a.va, a.size, &access, 1); r != CUDA_SUCCESS) {
    cuMemUnmap(a.va, a.size);
    cuMemRelease(a.handle);
    return report(kAccess, "cuMemSetAccess", r);
  }
  a.mapped = true;
  return kOk;
}

// cumem_allocator.cpp unmap_and_release: the VA reservation stays.
int unmap_and_release(Allocation& a) {
  if (CUresult r = cuMemUnmap(a.va, a.size); r != CUDA_SUCCESS) return report(kUnmap, "cuMemUnmap", r);
  a.mapped = false;
  if (CUresult r = cuMemRelease(a.handle); r != CUDA_SUCCESS) return report(kRelease, "cuMemRelease", r);
  a.handle = 0;
  return kOk;
}

Allocation* find(void* ptr) {
  for (Allocation& a : g_allocations)
    if (a.va == reinterpret_cast<CUdeviceptr>(ptr)) return &a;
  return nullptr;
}

}  // namespace

// cumem_allocator.cpp my_malloc: granularity, reserve, then create_and_map (the Python callback that
// records the allocation under the current tag sits between the reservation and the handle).
CUMEM_STUB_EXPORT int cumem_stub_malloc(std::size_t size, const char* tag, void** out) {
  if (!out || size == 0) return kBadArgument;
  std::lock_guard<std::mutex> guard(g_lock);
  Allocation a;
  if (int e = ensure_context(&a.device); e != kOk) return e;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = a.device;
  std::size_t granularity = 0;
  if (CUresult r = cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
      r != CUDA_SUCCESS || granularity == 0)
    return report(kGranularity, "cuMemGetAllocationGranularity", r);
  a.size = (size + granularity - 1) / granularity * granularity;
  if (CUresult r = cuMemAddressReserve(&a.va, a.size, 0, 0, 0); r != CUDA_SUCCESS)
    return report(kReserve, "cuMemAddressReserve", r);
  a.reserved = true;
  a.tag = tag ? tag : "";
  if (int e = create_and_map(a); e != kOk) {
    cuMemAddressFree(a.va, a.size);
    return e;
  }
  *out = reinterpret_cast<void*>(a.va);
  g_allocations.push_back(std::move(a));
  return kOk;
}

// cumem_allocator.cpp my_free (after cumem.py's torch.cuda.synchronize): unmap, release, free the VA.
CUMEM_STUB_EXPORT int cumem_stub_free(void* ptr) {
  std::lock_guard<std::mutex> guard(g_lock);
  Allocation* a = find(ptr);
  if (!a) return kUnknownPointer;
  int device = 0;
  if (int e = ensure_context(&device); e != kOk) return e;
  if (CUresult r = cuCtxSynchronize(); r != CUDA_SUCCESS) return report(kSynchronize, "cuCtxSynchronize", r);
  if (a->mapped)
    if (int e = unmap_and_release(*a); e != kOk) return e;
  if (CUresult r = cuMemAddressFree(a->va, a->size); r != CUDA_SUCCESS)
    return report(kAddressFree, "cuMemAddressFree", r);
  g_allocations.erase(g_allocations.begin() + (a - g_allocations.data()));
  return kOk;
}

// cumem.py CuMemAllocator.sleep: level 1 offloads the "weights" tag to host memory (level 2 offloads
// nothing); every allocation's handle is then unmapped and released, the KV's contents discarded, the
// VA reservations kept so wake_up maps at the same addresses. Returns the bytes released.
CUMEM_STUB_EXPORT long long cumem_stub_sleep(int level) {
  if (level != 1 && level != 2) return kBadArgument;
  std::lock_guard<std::mutex> guard(g_lock);
  int device = 0;
  if (int e = ensure_context(&device); e != kOk) return e;
  // All the copies first, as cumem.py does: a failed copy leaves every allocation mapped.
  for (Allocation& a : g_allocations) {
    if (!a.mapped || level != 1 || a.tag != "weights") continue;
    a.backup.resize(a.size);
    if (CUresult r = cuMemcpyDtoH(a.backup.data(), a.va, a.size); r != CUDA_SUCCESS)
      return report(kCopy, "cuMemcpyDtoH", r);
  }
  long long released = 0;
  for (Allocation& a : g_allocations) {
    if (!a.mapped) continue;
    if (int e = unmap_and_release(a); e != kOk) return e;
    released += static_cast<long long>(a.size);
  }
  // The unmapped pages are gone on return, as after cumem.py's gc.collect + empty_cache.
  if (CUresult r = cuCtxSynchronize(); r != CUDA_SUCCESS) return report(kSynchronize, "cuCtxSynchronize", r);
  return released;
}

// cumem.py CuMemAllocator.wake_up(tags): a new handle of the same size at the same address for every
// sleeping allocation of those tags (all when null), and the host backup copied back.
CUMEM_STUB_EXPORT int cumem_stub_wake(const char* tag) {
  std::lock_guard<std::mutex> guard(g_lock);
  int device = 0;
  if (int e = ensure_context(&device); e != kOk) return e;
  for (Allocation& a : g_allocations) {
    if (a.mapped || (tag && a.tag != tag)) continue;
    if (int e = create_and_map(a); e != kOk) return e;
    if (!a.backup.empty()) {
      if (CUresult r = cuMemcpyHtoD(a.va, a.backup.data(), a.size); r != CUDA_SUCCESS)
        return report(kCopy, "cuMemcpyHtoD", r);
      std::vector<unsigned char>().swap(a.backup);
    }
  }
  return kOk;
}

// For the engine's checks (not vLLM's API): 1 when `ptr` is an allocation whose VA reservation the stub
// still holds, 2 when it is also mapped, 0 when the stub does not know it.
CUMEM_STUB_EXPORT int cumem_stub_state(void* ptr) {
  std::lock_guard<std::mutex> guard(g_lock);
  const Allocation* a = find(ptr);
  if (!a || !a->reserved) return 0;
  return a->mapped ? 2 : 1;
}
