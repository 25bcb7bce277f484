// KV the engine maps itself (cuMemCreate + cuMemMap in its KV window): virtual handles and adopted regions.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "interpose/kv/kv_manager.h"

namespace kvremap::interpose {

namespace kv_detail {
// Virtual handles alive: every hook taking a handle checks this first (one load) before any lookup.
inline constinit std::atomic<std::size_t> g_virtual_handles{0};
bool vmm_create(CUmemGenericAllocationHandle* handle, std::size_t size, const CUmemAllocationProp* prop,
                unsigned long long flags, void* return_address, CUresult* result);
bool is_virtual(CUmemGenericAllocationHandle handle);
bool vmm_unmap(CUdeviceptr ptr, std::size_t size, CUresult* result);
void vmm_access(CUdeviceptr ptr, std::size_t size, const CUmemAccessDesc* desc, std::size_t count);
bool vmm_retain(CUmemGenericAllocationHandle* handle, CUdeviceptr address);
void vmm_reserved(CUdeviceptr ptr, std::size_t size);
void vmm_reservation_freed(CUdeviceptr ptr);
}  // namespace kv_detail

// cuMemCreate: in a device's KV window, a KV-sized device allocation is made by kvremap with the engine's
// own properties, and the engine gets a virtual handle (a value the driver never hands out) standing for
// it, so kvremap can later move the memory behind it onto scratch and back. True when kvremap made it
// (*result the outcome, *handle the virtual handle); false to create normally.
inline bool kv_vmm_create(CUmemGenericAllocationHandle* handle, std::size_t size, const CUmemAllocationProp* prop,
                          unsigned long long flags, void* return_address, CUresult* result) {
  return kv_mode() && kv_candidate(size) && kv_detail::vmm_create(handle, size, prop, flags, return_address, result);
}
// Whether `handle` is one of kvremap's virtual handles (any call taking it must be translated).
inline bool kv_is_virtual(CUmemGenericAllocationHandle handle) {
  return kv_detail::g_virtual_handles.load(std::memory_order_relaxed) != 0 && kv_detail::is_virtual(handle);
}
// The calls that take a virtual handle; each is called only with one (kv_is_virtual).
// cuMemMap: a whole-handle mapping in the device's KV burst becomes an adopted region of its arena
// (deferred at the burst's end like kvremap's own placements); any other mapping maps the memory behind it.
CUresult kv_vmm_map(CUdeviceptr ptr, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle handle,
                    unsigned long long flags);
// cuMemRelease: drops one reference; the memory goes once the last is dropped and nothing maps it.
CUresult kv_vmm_release(CUmemGenericAllocationHandle handle);
// cuMemGetAllocationPropertiesFromHandle: the engine's own properties.
CUresult kv_vmm_properties(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle);
// The driver handle behind a virtual one, for a call that hands it to the driver (an export, a multicast
// binding, an array mapping): a deferred region is committed first, since the call could expose the
// scratch. Fails with one line where no single driver handle stands behind it.
CUresult kv_vmm_real_handle(CUmemGenericAllocationHandle handle, const char* api, CUmemGenericAllocationHandle* real);
// cuMemUnmap over an adopted region: unmaps whatever backs it (scratch or its committed memory), without
// committing, and gives the memory back to its handle (or frees it, when the handle was released): an
// engine that sleeps before the commit gets its memory back and nothing is committed. True when handled.
inline bool kv_vmm_unmap(CUdeviceptr ptr, std::size_t size, CUresult* result) {
  return kv_detail::g_virtual_handles.load(std::memory_order_relaxed) != 0 && kv_detail::vmm_unmap(ptr, size, result);
}
// After the engine's cuMemSetAccess succeeded: grants over adopted regions are kept and replayed after
// every remap (peers included).
inline void kv_vmm_access(CUdeviceptr ptr, std::size_t size, const CUmemAccessDesc* desc, std::size_t count) {
  if (kv_detail::g_virtual_handles.load(std::memory_order_relaxed) != 0) kv_detail::vmm_access(ptr, size, desc, count);
}
// The engine's VA reservations, recorded in defer mode: adoption needs a reservation of the handle's size.
inline void kv_vmm_reserved(CUdeviceptr ptr, std::size_t size) {
  if (kv_mode()) kv_detail::vmm_reserved(ptr, size);
}
inline void kv_vmm_reservation_freed(CUdeviceptr ptr) {
  if (kv_mode()) kv_detail::vmm_reservation_freed(ptr);
}
// cuMemRetainAllocationHandle on an adopted region: the engine's virtual handle, one more reference (the
// caller has committed the region through kv_touch). True when handled.
inline bool kv_vmm_retain(CUmemGenericAllocationHandle* handle, CUdeviceptr address) {
  return kv_detail::g_virtual_handles.load(std::memory_order_relaxed) != 0 && kv_detail::vmm_retain(handle, address);
}

}  // namespace kvremap::interpose
