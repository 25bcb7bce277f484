// Page-locked host memory: cuMemHostAlloc/cuMemAllocHost/cuMemFreeHost, cuMemHostRegister/Unregister and their queries.
#include <sys/mman.h>

#include "sim_state.h"

namespace simcuda {
namespace {

constexpr unsigned kHostAllocFlags =
    CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
constexpr unsigned kHostRegisterFlags = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                                        CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;

// Pinned memory is ordinary host memory here, charged against no device: the real driver takes it from RAM.
CUresult host_alloc(void** pp, std::uint64_t bytes, unsigned flags) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  if (!pp || bytes == 0 || (flags & ~kHostAllocFlags) != 0) return CUDA_ERROR_INVALID_VALUE;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  HostBlock b;
  b.va = reinterpret_cast<std::uint64_t>(p);
  b.size = bytes;
  // Every pinned allocation is device-mapped and portable on a UVA system (cuda.h).
  b.flags = flags | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE;
  b.buffer_id = s.next_buffer_id++;
  b.context = get_current_context(s);
  s.host_blocks[b.va] = b;
  *pp = p;
  return CUDA_SUCCESS;
}

bool overlaps_host_block(const State& s, std::uint64_t va, std::uint64_t size) {
  auto it = s.host_blocks.lower_bound(va + size);
  if (it == s.host_blocks.begin()) return false;
  --it;
  return it->second.va + it->second.size > va;
}

}  // namespace
}  // namespace simcuda

using namespace simcuda;

SIM_EXPORT CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  SIM_ENTER("cuMemHostAlloc");
  SIM_GUARDED_BEGIN
  return host_alloc(pp, bytesize, Flags);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
  SIM_ENTER("cuMemAllocHost_v2");
  SIM_GUARDED_BEGIN
  return host_alloc(pp, bytesize, 0);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuMemFreeHost(void* p) {
  SIM_ENTER("cuMemFreeHost");
  SIM_GUARDED_BEGIN
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  auto it = s.host_blocks.find(reinterpret_cast<std::uint64_t>(p));
  if (it == s.host_blocks.end() || it->second.registered) return CUDA_ERROR_INVALID_VALUE;
  munmap(p, it->second.size);
  s.host_blocks.erase(it);
  return CUDA_SUCCESS;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int Flags) {
  SIM_ENTER("cuMemHostRegister_v2");
  SIM_GUARDED_BEGIN
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  const auto va = reinterpret_cast<std::uint64_t>(p);
  if (!p || bytesize == 0 || (Flags & ~kHostRegisterFlags) != 0 || bytesize > UINT64_MAX - va)
    return CUDA_ERROR_INVALID_VALUE;
  // Device memory is not host memory to register.
  if (is_device_pointer(s, va)) return CUDA_ERROR_INVALID_VALUE;
  if (overlaps_host_block(s, va, bytesize)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  HostBlock b;
  b.va = va;
  b.size = bytesize;
  b.flags = Flags;
  b.registered = true;
  b.buffer_id = s.next_buffer_id++;
  s.host_blocks[va] = b;
  return CUDA_SUCCESS;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuMemHostUnregister(void* p) {
  SIM_ENTER("cuMemHostUnregister");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  auto it = s.host_blocks.find(reinterpret_cast<std::uint64_t>(p));
  if (it == s.host_blocks.end() || !it->second.registered) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  s.host_blocks.erase(it);
  return CUDA_SUCCESS;
}

// Unified addressing: the device sees pinned memory at the host address.
SIM_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p, unsigned int Flags) {
  SIM_ENTER("cuMemHostGetDevicePointer_v2");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  if (!pdptr || Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!find_host_block(s, reinterpret_cast<std::uint64_t>(p))) return CUDA_ERROR_INVALID_VALUE;
  *pdptr = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemHostGetFlags(unsigned int* pFlags, void* p) {
  SIM_ENTER("cuMemHostGetFlags");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  if (!pFlags) return CUDA_ERROR_INVALID_VALUE;
  const HostBlock* b = find_host_block(s, reinterpret_cast<std::uint64_t>(p));
  if (!b || b->registered) return CUDA_ERROR_INVALID_VALUE;
  *pFlags = b->flags;
  return CUDA_SUCCESS;
}
