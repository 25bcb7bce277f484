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
// KV tensors a sleep released after the commit, asleep or woken (DeviceKv::sleeping): the engine's own mappings
// and unmappings are looked at only while there are some.
inline constinit std::atomic<std::size_t> g_sleeping_kv{0};
void vmm_engine_mapped(CUdeviceptr ptr, std::size_t size, CUmemGenericAllocationHandle handle);
void vmm_engine_unmapped(CUdeviceptr ptr, std::size_t size);
bool vmm_create(CUmemGenericAllocationHandle* handle, std::size_t size, const CUmemAllocationProp* prop,
                unsigned long long flags, void* return_address, CUresult* result);
bool vmm_map(CUdeviceptr ptr, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle handle,
             unsigned long long flags, CUresult* result);
bool vmm_release(CUmemGenericAllocationHandle handle, CUresult* result);
bool vmm_properties(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle, CUresult* result);
CUresult vmm_translate(CUmemGenericAllocationHandle* handle, const char* api);
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
// The calls that take a handle, each true (with *result) when `handle` is one of kvremap's virtual handles
// and false, without a lookup while none exists, for a driver handle, which the caller passes on.
// cuMemMap: a whole-handle mapping in the device's KV burst becomes an adopted region of its arena
// (deferred at the burst's end like kvremap's own placements); any other mapping maps the memory behind it.
inline bool kv_vmm_map(CUdeviceptr ptr, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle handle,
                       unsigned long long flags, CUresult* result) {
  return kv_detail::g_virtual_handles.load(std::memory_order_relaxed) != 0 &&
         kv_detail::vmm_map(ptr, size, offset, handle, flags, result);
}
// cuMemRelease: drops one reference; the memory goes once the last is dropped and nothing maps it.
inline bool kv_vmm_release(CUmemGenericAllocationHandle handle, CUresult* result) {
  return kv_detail::g_virtual_handles.load(std::memory_order_relaxed) != 0 && kv_detail::vmm_release(handle, result);
}
// cuMemGetAllocationPropertiesFromHandle: the engine's own properties.
inline bool kv_vmm_properties(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle, CUresult* result) {
  return kv_detail::g_virtual_handles.load(std::memory_order_relaxed) != 0 &&
         kv_detail::vmm_properties(prop, handle, result);
}
// For a call that hands a handle to the driver (an export, a multicast binding, an array mapping): a
// virtual *handle is replaced by the driver handle behind it, its region committed first where it is on
// scratch, since the call could expose the scratch; it fails with one line where no single driver handle
// stands behind it. A driver handle is left as it is (CUDA_SUCCESS).
inline CUresult kv_vmm_translate(CUmemGenericAllocationHandle* handle, const char* api) {
  return kv_detail::g_virtual_handles.load(std::memory_order_relaxed) == 0 ? CUDA_SUCCESS
                                                                           : kv_detail::vmm_translate(handle, api);
}
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
// After the driver mapped a handle of the engine's own (not a virtual one): a mapping of the size and address of
// a KV tensor a sleep released is its wake, and the handle's memory is KV, not serving's need (kv_vmm.cpp).
inline void kv_vmm_engine_mapped(CUdeviceptr ptr, std::size_t size, CUmemGenericAllocationHandle handle) {
  if (kv_detail::g_sleeping_kv.load(std::memory_order_relaxed) != 0) kv_detail::vmm_engine_mapped(ptr, size, handle);
}
// After the driver unmapped a range of the engine's: a woken KV tensor unmapped again is the next sleep.
inline void kv_vmm_engine_unmapped(CUdeviceptr ptr, std::size_t size) {
  if (kv_detail::g_sleeping_kv.load(std::memory_order_relaxed) != 0) kv_detail::vmm_engine_unmapped(ptr, size);
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
