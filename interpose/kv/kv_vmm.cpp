// KV the engine maps itself: virtual handles for the VMM allocations of its KV window, the regions they are mapped
// at adopted by the arena, and every call taking such a handle translated (docs/kv-deferral.md).
#include "interpose/kv/kv_vmm.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "interpose/base/library.h"
#include "interpose/driver/driver_api.h"
#include "interpose/kv/kv_stand_aside.h"
#include "interpose/kv/kv_state.h"
#include "interpose/kv/kv_tags.h"
#include "interpose/track/tracker.h"
#include "policy/units.h"

namespace kvremap::interpose {
using namespace kv_internal;
namespace {

VirtualHandle* find_virtual(KvState& k, CUmemGenericAllocationHandle handle) {
  auto it = k.virtual_handles.find(handle);
  return it == k.virtual_handles.end() ? nullptr : it->second.get();
}

void count_virtual(const KvState& k) {
  kv_detail::g_virtual_handles.store(k.virtual_handles.size(), std::memory_order_relaxed);
}

// The last reference is gone and nothing maps its memory: the handle stops existing, as the driver's would.
void forget(KvState& k, CUmemGenericAllocationHandle handle) {
  k.virtual_handles.erase(handle);
  count_virtual(k);
  on_free(handle, AllocKind::kKvArena, "cuMemRelease");
}

// The one driver handle behind `v` now, for a call that hands it to the driver: a region still on
// scratch is committed first (with the whole device's KV cache), since the call could expose scratch.
CUresult real_handle_locked(KvState& k, VirtualHandle& v, const char* api, CUmemGenericAllocationHandle* real) {
  if (v.real != 0) {
    *real = v.real;
    return CUDA_SUCCESS;
  }
  DeviceKv& d = k.at(v.device);
  if (v.mapped_at == 0 || !d.arena) {
    log().warn("{} of a KV handle whose memory was unmapped while deferred: it has no memory until mapped again", api);
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (d.arena->backing(v.mapped_at) == Backing::scratch && d.deferred && !d.committed) {
    const policy::CommitReason reason = capture_open() ? policy::CommitReason::none : d.trigger.on_kv_access();
    if (reason == policy::CommitReason::none) {
      log().warn(
          "{} of the KV tensor at {:#x} while it is deferred and cannot be committed (a capture is open): refused, "
          "since the call would hand out scratch memory",
          api, v.mapped_at);
      return CUDA_ERROR_NOT_PERMITTED;
    }
    commit_locked(d, reason, api);
  }
  *real = d.arena->sole_handle(v.mapped_at);
  if (*real == 0) {
    log().warn(
        "{} of the KV tensor at {:#x}: kvremap committed it as a device part and a host tail (the device could not "
        "hold it all), so no single driver handle stands for it; refused",
        api, v.mapped_at);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return CUDA_SUCCESS;
}

void count_sleeping(const KvState& k) {
  std::size_t n = 0;
  for (const auto& d : k.devices)
    if (d) n += d->sleeping.size();
  kv_detail::g_sleeping_kv.store(n, std::memory_order_relaxed);
}

// A KV tensor of `d` the engine released after the commit: a sleep (vLLM's CuMemAllocator.sleep unmaps and
// releases every allocation and keeps its reservation). The first tensor of a sleep keeps serving's need measured
// so far; until the wake maps every one again, nothing is measured as serving's need: what the process allocates
// meanwhile (a trainer beside the engine, the weights' sync) never competes with the KV cache.
void fell_asleep(KvState& k, DeviceKv& d, CUdeviceptr base, std::uint64_t bytes, bool kv_category) {
  try {
    if (!d.kv_asleep()) {
      d.serving_need_before_sleep = serving_need_so_far(d);
      log().info(
          "device {}: the engine released its KV tensor at {:#x} after the commit (a sleep): serving's need is not "
          "measured until its KV cache is mapped again",
          d.device, base);
    }
    const auto it = std::find_if(d.sleeping.begin(), d.sleeping.end(),
                                 [&](const SleepingKv& s) { return s.base == base && s.bytes == bytes; });
    if (it == d.sleeping.end()) {
      d.sleeping.push_back(SleepingKv{base, bytes, kv_category, true});
    } else {
      it->asleep = true;
    }
  } catch (...) {
    // Unrecorded: its wake's memory counts as serving's need (a profile that keeps too much room, never too little).
  }
  count_sleeping(k);
}

// Every KV tensor a sleep released is mapped again (or gone): serving's peaks start again from here. What the wake
// re-created is KV again, and what came and went while the KV cache slept is not in them.
void woke_if_awake(DeviceKv& d) {
  if (d.kv_asleep()) return;
  restart_post_kv_peaks(d.device);
  log().info("device {}: the engine's KV cache is mapped again (a wake): serving's need is measured again from here",
             d.device);
}

// The engine unmaps adopted region `it` of `d`: its memory goes back to its handle (or is freed when the
// handle was released), whether it was on scratch, in its burst or committed. Nothing is committed.
CUresult drop_adopted(KvState& k, DeviceKv& d, std::vector<Placement>::iterator it) {
  const CUdeviceptr base = it->base;
  const std::uint64_t handle = it->handle;
  VirtualHandle* v = find_virtual(k, handle);
  const bool on_scratch = d.arena->backing(base) == Backing::scratch;
  const std::uint64_t bytes = d.arena->region_bytes(base);
  const bool kv_category = it->kv_category;
  CUmemGenericAllocationHandle kept = 0;
  const bool keep = v != nullptr && v->references > 0;
  if (CUresult r = d.arena->unadopt(base, keep ? &kept : nullptr); r != CUDA_SUCCESS) return r;
  if (it->kv && on_scratch && d.deferred && !d.committed) d.deferred_bytes -= bytes;
  d.regions.erase(it);
  if (v) {
    v->mapped_at = 0;
    v->real = kept;
    if (v->references == 0) forget(k, handle);
  }
  if (on_scratch) {
    log().info(
        "device {}: the engine unmapped its deferred KV tensor at {:#x} ({}) before the commit (a sleep): it "
        "goes without being committed",
        d.device, base, policy::format_bytes(bytes));
    d.arena->release_scratch();  // gives the scratch back once nothing is on it
  }
  if (d.committed) fell_asleep(k, d, base, bytes, kv_category);
  refresh_counts(k);
  return CUDA_SUCCESS;
}

// cuMemMap of live virtual handle `v` (its value `handle`).
CUresult map_locked(KvState& k, VirtualHandle& v, CUdeviceptr ptr, std::size_t size, std::size_t offset,
                    CUmemGenericAllocationHandle handle, unsigned long long flags) {
  try {
    const VmmFunctions driver = real_vmm_functions();
    DeviceKv& d = k.at(v.device);
    if (v.mapped_at != 0) {
      // A second mapping of memory an adopted region holds: the driver handle behind it, committed first.
      CUmemGenericAllocationHandle real = 0;
      if (CUresult r = real_handle_locked(k, v, "cuMemMap", &real); r != CUDA_SUCCESS) return r;
      return driver.map(ptr, size, offset, real, flags);
    }
    if (v.real == 0) {
      // Its memory went with an unmap while it was deferred, and the engine maps it again: new memory with its
      // properties (the deferred contents were scratch).
      if (CUresult r = driver.create(&v.real, v.bytes, &v.prop, 0); r != CUDA_SUCCESS) {
        v.real = 0;
        return r;
      }
    }
    if (CUresult r = driver.map(ptr, size, offset, v.real, flags); r != CUDA_SUCCESS) return r;
    // Only a whole-handle mapping made in the device's KV burst, filling a reservation of its own size, is
    // deferred: the arena then holds it as one region, which the engine sees as its own mapping. vLLM's
    // CuMemAllocator and torch_memory_saver reserve each tensor's own range; an engine that reserves more
    // than it maps (elastic KV: kvcached, vLLM's extensible KV cache) grows into the rest itself and keeps
    // its memory as it mapped it.
    const auto reservation = k.reservations.find(ptr);
    const bool own_reservation = reservation != k.reservations.end() && reservation->second == size;
    const bool in_burst = !d.deferred && !d.committed && !capture_open();
    if (in_burst && own_reservation && offset == 0 && size == v.bytes && flags == 0 && make_arena(d) &&
        d.arena->adopt(ptr, size, v.real, v.prop) == CUDA_SUCCESS) {
      try {
        d.regions.push_back(Placement{ptr, size, v.tagged, v.tagged, nullptr, handle});
      } catch (...) {
        CUmemGenericAllocationHandle kept = 0;
        d.arena->unadopt(ptr, &kept);  // unmaps it: mapped again below, as the engine's own
        driver.map(ptr, size, offset, kept, flags);
        return CUDA_SUCCESS;
      }
      v.real = 0;
      v.mapped_at = ptr;
      refresh_counts(k);
    }
    return CUDA_SUCCESS;
  } catch (...) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
}

// cuMemRelease of virtual handle `v` (its value `handle`).
CUresult release_locked(KvState& k, VirtualHandle& v, CUmemGenericAllocationHandle handle) {
  if (v.references == 0) return CUDA_ERROR_INVALID_VALUE;
  if (--v.references > 0) return CUDA_SUCCESS;
  // Still mapped: its memory goes when it is unmapped, as the driver frees a released handle's memory.
  if (v.mapped_at != 0) return CUDA_SUCCESS;
  if (v.real != 0)
    if (CUresult r = real_vmm_functions().release(v.real); r != CUDA_SUCCESS) {
      ++v.references;
      return r;
    }
  forget(k, handle);
  return CUDA_SUCCESS;
}

}  // namespace

namespace kv_detail {

bool vmm_create(CUmemGenericAllocationHandle* handle, std::size_t size, const CUmemAllocationProp* prop,
                unsigned long long flags, void* return_address, CUresult* result) {
  if (!tracking() || !handle || !prop || flags != 0 || capture_open()) return false;
  // What the arena's scratch can stand in for: pinned memory of the calling thread's device.
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return false;
  const int device = tracked_device_now();
  if (prop->location.id != device) return false;
  // Another interposer behind kvremap owns what it creates (it may release it later), and where kvremap
  // stands aside for an allocation API, that interposer's own VMM calls (its resume's, say) stay its own too.
  if (kv_stands_aside("cuMemCreate") || !kv_stood_aside_for().empty()) return false;
  // An interposer ahead of kvremap (torch_memory_saver first in LD_PRELOAD) maps its regions itself and
  // frees them at its pause: its memory stays its own.
  if (kv_made_by_interposer(return_address)) return false;
  const VmmFunctions driver = real_vmm_functions();
  if (!driver.complete()) return false;
  const policy::KvTag tag = current_tag();
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  DeviceKv& d = k.at(device);
  // The arena (for its scratch) is made when a mapping is adopted: a handle never adopted needs none.
  if (!wants_placement(k, d, size, tag, false)) return false;
  CUmemGenericAllocationHandle real = 0;
  *result = driver.create(&real, size, prop, 0);
  if (*result != CUDA_SUCCESS) return true;  // what the engine's own call would have said
  try {
    auto record = std::make_unique<VirtualHandle>();
    record->device = device;
    record->bytes = size;
    record->prop = *prop;
    record->tagged = tag == policy::KvTag::kv;
    record->real = real;
    const auto value = static_cast<CUmemGenericAllocationHandle>(reinterpret_cast<std::uintptr_t>(record.get()));
    k.virtual_handles.emplace(value, std::move(record));
    count_virtual(k);
    on_alloc(value, size, AllocKind::kKvArena, "cuMemCreate", return_address, device);
    *handle = value;
    return true;
  } catch (...) {
    driver.release(real);
    return false;  // created normally instead
  }
}

bool vmm_unmap(CUdeviceptr ptr, std::size_t size, CUresult* result) {
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  const VmmFunctions driver = real_vmm_functions();
  const std::uint64_t end = ptr + size;
  struct Hit {
    DeviceKv* device;
    CUdeviceptr base;
    std::uint64_t bytes;
  };
  std::vector<Hit> hits;
  for (auto& slot : k.devices) {
    if (!slot || !slot->arena) continue;
    for (const Placement& r : slot->regions) {
      if (r.handle == 0) continue;
      const std::uint64_t bytes = slot->arena->region_bytes(r.base);
      if (r.base < end && ptr < r.base + bytes) hits.push_back({slot.get(), r.base, bytes});
    }
  }
  if (hits.empty()) return false;
  // The driver unmaps whole mappings only; an adopted region is one mapping to the engine, whatever
  // scratch aliases or chunks back it.
  for (const Hit& h : hits)
    if (h.base < ptr || h.base + h.bytes > end) {
      *result = CUDA_ERROR_INVALID_VALUE;
      return true;
    }
  std::sort(hits.begin(), hits.end(), [](const Hit& a, const Hit& b) { return a.base < b.base; });
  // The engine's other mappings in the range, between the regions, go as the driver would unmap them.
  CUdeviceptr at = ptr;
  for (const Hit& h : hits) {
    if (h.base > at)
      if (CUresult r = driver.unmap(at, h.base - at); r != CUDA_SUCCESS) {
        *result = r;
        return true;
      }
    at = h.base + h.bytes;
  }
  if (end > at)
    if (CUresult r = driver.unmap(at, end - at); r != CUDA_SUCCESS) {
      *result = r;
      return true;
    }
  *result = CUDA_SUCCESS;
  for (const Hit& h : hits) {
    auto it = std::find_if(h.device->regions.begin(), h.device->regions.end(),
                           [&](const Placement& r) { return r.base == h.base && r.handle != 0; });
    if (CUresult r = drop_adopted(k, *h.device, it); r != CUDA_SUCCESS) *result = r;
  }
  return true;
}

void vmm_access(CUdeviceptr ptr, std::size_t size, const CUmemAccessDesc* desc, std::size_t count) {
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  for (auto& slot : k.devices) {
    if (!slot || !slot->arena) continue;
    for (const Placement& r : slot->regions)
      if (r.handle != 0 && r.base < ptr + size && ptr < r.base + slot->arena->region_bytes(r.base))
        slot->arena->record_access(r.base, desc, count);
  }
}

void vmm_reserved(CUdeviceptr ptr, std::size_t size) {
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  try {
    k.reservations[ptr] = size;
  } catch (...) {
    // Unrecorded: a handle mapped there is not adopted (stays the engine's), never wrong.
  }
}

void vmm_reservation_freed(CUdeviceptr ptr) {
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  k.reservations.erase(ptr);
  if (g_sleeping_kv.load(std::memory_order_relaxed) == 0) return;
  // A KV tensor freed for good (its reservation with it), asleep or not, has no wake to wait for.
  for (auto& slot : k.devices) {
    if (!slot) continue;
    const bool asleep = slot->kv_asleep();
    std::erase_if(slot->sleeping, [&](const SleepingKv& s) { return s.base == ptr; });
    if (asleep) woke_if_awake(*slot);
  }
  count_sleeping(k);
}

void vmm_engine_mapped(CUdeviceptr ptr, std::size_t size, CUmemGenericAllocationHandle handle) {
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  for (auto& slot : k.devices) {
    if (!slot) continue;
    for (SleepingKv& s : slot->sleeping) {
      if (!s.asleep || s.base != ptr || s.bytes != size) continue;
      // cumem.py wake_up: create_and_map of the allocation's own (device, size, address) — the KV tensor again,
      // held by the tracker as what it was (KV), not as serving's VMM memory.
      s.asleep = false;
      reclassify_handle(handle, s.kv_category ? policy::Category::kv : policy::Category::other);
      woke_if_awake(*slot);
      return;
    }
  }
}

void vmm_engine_unmapped(CUdeviceptr ptr, std::size_t size) {
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  for (auto& slot : k.devices) {
    if (!slot) continue;
    for (std::size_t i = 0; i < slot->sleeping.size(); ++i) {
      const SleepingKv s = slot->sleeping[i];
      if (!s.asleep && ptr <= s.base && s.base + s.bytes <= ptr + size)
        fell_asleep(k, *slot, s.base, s.bytes, s.kv_category);  // marks entry i: nothing is added
    }
  }
}

bool vmm_retain(CUmemGenericAllocationHandle* handle, CUdeviceptr address) {
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  for (auto& slot : k.devices) {
    if (!slot || !slot->arena) continue;
    CUdeviceptr base = 0;
    std::uint64_t bytes = 0;
    if (!slot->arena->adopted_region_of(address, &base, &bytes)) continue;
    for (const Placement& r : slot->regions) {
      if (r.base != base || r.handle == 0) continue;
      VirtualHandle* v = find_virtual(k, r.handle);
      if (!v) return false;
      ++v->references;
      *handle = r.handle;
      return true;
    }
  }
  return false;
}

bool vmm_map(CUdeviceptr ptr, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle handle,
             unsigned long long flags, CUresult* result) {
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  VirtualHandle* v = find_virtual(k, handle);
  if (!v) return false;
  *result = v->references == 0 ? CUDA_ERROR_INVALID_VALUE : map_locked(k, *v, ptr, size, offset, handle, flags);
  return true;
}

bool vmm_release(CUmemGenericAllocationHandle handle, CUresult* result) {
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  VirtualHandle* v = find_virtual(k, handle);
  if (!v) return false;
  *result = release_locked(k, *v, handle);
  return true;
}

bool vmm_properties(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle, CUresult* result) {
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  const VirtualHandle* v = find_virtual(k, handle);
  if (!v) return false;
  if (prop) *prop = v->prop;
  *result = prop ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  return true;
}

CUresult vmm_translate(CUmemGenericAllocationHandle* handle, const char* api) {
  KvState& k = K();
  std::lock_guard<std::mutex> g(k.lock);
  VirtualHandle* v = find_virtual(k, *handle);
  if (!v) return CUDA_SUCCESS;  // a driver handle
  if (v->references == 0) return CUDA_ERROR_INVALID_VALUE;
  return real_handle_locked(k, *v, api, handle);
}

}  // namespace kv_detail

}  // namespace kvremap::interpose
