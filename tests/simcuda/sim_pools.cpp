// Stream-ordered memory pools: cuMemPoolCreate/Destroy, attributes, trimming, per-device default and current pools.
#include <algorithm>
#include <cstring>

#include "sim_state.h"

namespace simcuda {
namespace {

bool valid_device(const State& s, CUdevice dev) { return dev >= 0 && dev < static_cast<int>(s.devices.size()); }

Pool* find_pool(State& s, CUmemoryPool handle) {
  auto* p = reinterpret_cast<Pool*>(handle);
  auto it = s.pools.find(p);
  return it == s.pools.end() || p->destroyed ? nullptr : p;
}

// Returns idle bytes to the device until the pool holds at most `keep` bytes (used ones are never released).
void trim(State& s, Pool& p, std::uint64_t keep) {
  const std::uint64_t reserved = p.used + p.idle;
  if (reserved <= keep) return;
  const std::uint64_t release = std::min(p.idle, reserved - keep);
  uncharge_device(s, p.device, release);
  p.idle -= release;
}

// Runs `body(state, pool)` under the simulator's lock on a live pool; an unknown or destroyed pool is
// CUDA_ERROR_INVALID_VALUE, as the driver answers.
template <typename Body>
CUresult with_pool(CUmemoryPool handle, Body&& body) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  Pool* p = find_pool(s, handle);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return body(s, *p);
}

}  // namespace
}  // namespace simcuda

using namespace simcuda;

SIM_EXPORT CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  SIM_ENTER("cuMemPoolCreate");
  SIM_GUARDED_BEGIN
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(s, props->location.id)) return CUDA_ERROR_INVALID_DEVICE;
  // Shareable pools (POSIX fd, fabric) would need exportable memory, which pools here do not have.
  if (props->handleTypes != CU_MEM_HANDLE_TYPE_NONE) return CUDA_ERROR_NOT_SUPPORTED;
  if (props->win32SecurityAttributes) return CUDA_ERROR_INVALID_VALUE;
  auto p = std::make_unique<Pool>();
  p->device = props->location.id;
  p->max_size = props->maxSize;
  *pool = reinterpret_cast<CUmemoryPool>(p.get());
  s.pools.emplace(p.get(), std::move(p));
  return CUDA_SUCCESS;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  SIM_ENTER("cuMemPoolDestroy");
  SIM_GUARDED_BEGIN
  return with_pool(pool, [](State& s, Pool& p) {
    if (p.is_default) return CUDA_ERROR_INVALID_VALUE;
    for (Device& d : s.devices)
      if (d.current_pool == &p) d.current_pool = nullptr;
    trim(s, p, 0);
    // Outstanding allocations keep the pool until the last one is freed (cuda.h).
    if (p.used == 0)
      s.pools.erase(&p);
    else
      p.destroyed = true;
    return CUDA_SUCCESS;
  });
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  SIM_ENTER("cuMemPoolTrimTo");
  return with_pool(pool, [&](State& s, Pool& p) {
    trim(s, p, minBytesToKeep);
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  SIM_ENTER("cuMemPoolSetAttribute");
  // Read as an integer: the caller's value may be one the enum does not name (the driver rejects it).
  int attribute = 0;
  std::memcpy(&attribute, &attr, sizeof attribute);
  return with_pool(pool, [&](State& s, Pool& p) {
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    switch (attribute) {
      case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        p.reuse_follow_event_dependencies = *static_cast<int*>(value) != 0;
        break;
      case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        p.reuse_allow_opportunistic = *static_cast<int*>(value) != 0;
        break;
      case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        p.reuse_allow_internal_dependencies = *static_cast<int*>(value) != 0;
        break;
      case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        p.release_threshold = *static_cast<cuuint64_t*>(value);
        // Idle memory above the new threshold would be released at the next synchronisation, which is now.
        trim(s, p, p.used + std::min(p.idle, p.release_threshold));
        break;
      case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        // Watermarks can only be reset, to the current value (cuda.h: "It is illegal to set this attribute to a
        // non-zero value").
        if (*static_cast<cuuint64_t*>(value) != 0) return CUDA_ERROR_INVALID_VALUE;
        if (attribute == CU_MEMPOOL_ATTR_USED_MEM_HIGH)
          p.used_high = p.used;
        else
          p.reserved_high = p.used + p.idle;
        break;
      default:
        return CUDA_ERROR_INVALID_VALUE;  // the CURRENT counters are read-only, others unknown
    }
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  SIM_ENTER("cuMemPoolGetAttribute");
  // Read as an integer: the caller's value may be one the enum does not name (the driver rejects it).
  int attribute = 0;
  std::memcpy(&attribute, &attr, sizeof attribute);
  return with_pool(pool, [&](State&, const Pool& p) {
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    switch (attribute) {
      case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        *static_cast<int*>(value) = p.reuse_follow_event_dependencies;
        break;
      case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        *static_cast<int*>(value) = p.reuse_allow_opportunistic;
        break;
      case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *static_cast<int*>(value) = p.reuse_allow_internal_dependencies;
        break;
      case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        *static_cast<cuuint64_t*>(value) = p.release_threshold;
        break;
      case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
        *static_cast<cuuint64_t*>(value) = p.used + p.idle;
        break;
      case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        *static_cast<cuuint64_t*>(value) = p.reserved_high;
        break;
      case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
        *static_cast<cuuint64_t*>(value) = p.used;
        break;
      case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        *static_cast<cuuint64_t*>(value) = p.used_high;
        break;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  SIM_ENTER("cuDeviceGetDefaultMemPool");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(s, dev)) return CUDA_ERROR_INVALID_DEVICE;
  *pool = reinterpret_cast<CUmemoryPool>(default_pool(s, dev));
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  SIM_ENTER("cuDeviceGetMemPool");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(s, dev)) return CUDA_ERROR_INVALID_DEVICE;
  *pool = reinterpret_cast<CUmemoryPool>(current_pool(s, dev));
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  SIM_ENTER("cuDeviceSetMemPool");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!valid_device(s, dev)) return CUDA_ERROR_INVALID_DEVICE;
  Pool* p = find_pool(s, pool);
  // A pool serves the device it was created on only.
  if (!p || p->device != dev) return CUDA_ERROR_INVALID_VALUE;
  s.devices[static_cast<std::size_t>(dev)].current_pool = p;
  return CUDA_SUCCESS;
}

static CUresult alloc_from_pool(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream stream,
                                bool per_thread) {
  Pool* p = nullptr;
  {
    std::lock_guard<std::mutex> guard(lock());
    State& s = state();
    if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
    p = find_pool(s, pool);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    if (!resolve_stream(s, stream, per_thread)) return CUDA_ERROR_INVALID_HANDLE;
  }
  return allocate_from_pool(dptr, bytesize, p);
}

SIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream stream) {
  SIM_ENTER("cuMemAllocFromPoolAsync");
  SIM_GUARDED_BEGIN
  return alloc_from_pool(dptr, bytesize, pool, stream, false);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                                 CUstream stream) {
  SIM_ENTER("cuMemAllocFromPoolAsync");
  SIM_GUARDED_BEGIN
  return alloc_from_pool(dptr, bytesize, pool, stream, true);
  SIM_GUARDED_END
}
