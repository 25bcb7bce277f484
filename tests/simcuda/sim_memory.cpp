// Simulated device memory: cuMemAlloc family, VMM (reserve/create/map/access/unmap), memset/memcpy, pointer queries.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sim_state.h"
#include "simcuda.h"

namespace simcuda {
namespace {

constexpr std::uint64_t kPage = 4096;
// Below this, a zero fill is a plain memset; above, whole pages are dropped so 80 GiB stays sparse.
constexpr std::uint64_t kPunchThreshold = 1ULL << 20;

std::uint64_t round_down(std::uint64_t value, std::uint64_t multiple) { return value / multiple * multiple; }

void* map_none(void* at, std::uint64_t size, bool fixed) {
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (fixed ? MAP_FIXED : 0);
  return mmap(at, size, PROT_NONE, flags, -1, 0);
}

struct Region {
  const Allocation* allocation = nullptr;
  const Mapping* mapping = nullptr;
};

Region find_region(const State& s, std::uint64_t ptr) {
  Region r;
  auto a = s.allocations.upper_bound(ptr);
  if (a != s.allocations.begin()) {
    --a;
    if (ptr < a->second.va + a->second.mapped) r.allocation = &a->second;
  }
  auto m = s.mappings.upper_bound(ptr);
  if (m != s.mappings.begin()) {
    --m;
    if (ptr < m->second.va + m->second.size) r.mapping = &m->second;
  }
  return r;
}

const Reservation* find_reservation(const State& s, std::uint64_t ptr) {
  auto it = s.reservations.upper_bound(ptr);
  if (it == s.reservations.begin()) return nullptr;
  --it;
  return ptr < it->second.va + it->second.size ? &it->second : nullptr;
}

// The mappings that exactly tile [ptr, ptr+size), or empty if the range starts/ends inside a
// mapping or has a gap: what cuMemUnmap and cuMemSetAccess require.
std::vector<Mapping*> exact_mappings(State& s, std::uint64_t ptr, std::uint64_t size) {
  std::vector<Mapping*> out;
  std::uint64_t at = ptr;
  const std::uint64_t end = ptr + size;
  while (at < end) {
    auto it = s.mappings.find(at);
    if (it == s.mappings.end() || it->second.va + it->second.size > end) return {};
    out.push_back(&it->second);
    at += it->second.size;
  }
  return out;
}

void destroy_handle_if_unused(State& s, CUmemGenericAllocationHandle h) {
  auto it = s.handles.find(h);
  if (it == s.handles.end()) return;
  PhysicalHandle& p = it->second;
  if (!p.released || p.mappings > 0 || p.retains > 0) return;
  if (p.imported) {
    // Another process's memory: nothing was charged here.
  } else if (p.location == CU_MEM_LOCATION_TYPE_DEVICE) {
    uncharge_device(s, p.device, p.size);
  } else {
    s.host_used -= p.size;
  }
  close(p.fd);
  s.handles.erase(it);
}

// An address of `mapped` bytes from the unbacked range (reserved at first use: four times the
// devices' capacity, as sizes that never repeat cannot reuse each other's addresses); MAP_FAILED when
// it is used up.
void* unbacked_take(State& s, std::uint64_t mapped) {
  UnbackedRange& u = s.unbacked;
  if (auto it = u.freed.find(mapped); it != u.freed.end() && !it->second.empty()) {
    const std::uint64_t va = it->second.back();
    it->second.pop_back();
    return reinterpret_cast<void*>(va);
  }
  if (u.base == 0) {
    const std::uint64_t size = 4 * s.config.device_memory * static_cast<std::uint64_t>(s.config.device_count);
    void* base = map_none(nullptr, size, false);
    if (base == MAP_FAILED) return MAP_FAILED;
    u.base = reinterpret_cast<std::uint64_t>(base);
    u.size = size;
  }
  if (mapped > u.size - u.next) return MAP_FAILED;
  const std::uint64_t va = u.base + u.next;
  u.next += mapped;
  return reinterpret_cast<void*>(va);
}

// What an allocation holds of its device's capacity: managed memory holds none (see allocate_managed).
std::uint64_t charged_bytes(const Allocation& a) { return a.managed ? 0 : a.mapped; }

// Gives an allocation's address range back: unmapped, or kept for reuse in the unbacked range.
void release_address(State& s, const Allocation& a) {
  if (a.ipc_fd >= 0) close(a.ipc_fd);
  if (a.backed) {
    munmap(reinterpret_cast<void*>(a.va), a.mapped);
  } else {
    s.unbacked.freed[a.mapped].push_back(a.va);
  }
}

// Tracks a new allocation as the current context's, with a fresh buffer id, and hands out its address.
void record_allocation(State& s, Allocation& a, CUdeviceptr* out) {
  a.context = get_current_context(s);
  a.buffer_id = s.next_buffer_id++;
  s.allocations[a.va] = a;
  *out = a.va;
}

CUresult allocate(CUdeviceptr* out, std::uint64_t bytes, bool stream_ordered, Pool* pool = nullptr) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  if (!out || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (!stream_ordered) {
    if (CUresult r = check_unsafe_during_capture(s); r != CUDA_SUCCESS) return r;
  }
  // Larger than the device (SIZE_MAX included): nothing is rounded up, so nothing can overflow.
  if (bytes > s.config.device_memory) return CUDA_ERROR_OUT_OF_MEMORY;
  const std::uint64_t mapped = round_up(bytes, s.config.granularity);
  if (stream_ordered) {
    if (!pool) pool = current_pool(s, device);
    device = pool->device;
    // The pool's reservation after this allocation: what is used, plus the idle bytes it does not reuse.
    const std::uint64_t reserved = pool->used + std::max(pool->idle, mapped);
    if (pool->max_size && reserved > pool->max_size) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  // A pool's idle bytes are still charged: an allocation that fits in them charges nothing new.
  const std::uint64_t from_idle = pool ? std::min(pool->idle, mapped) : 0;
  if (!charge_device(s, device, mapped - from_idle)) return CUDA_ERROR_OUT_OF_MEMORY;
  const bool backed = s.config.host_backing;
  void* p = backed ? mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                   : unbacked_take(s, mapped);
  if (p == MAP_FAILED) {
    uncharge_device(s, device, mapped - from_idle);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (pool) {
    pool->idle -= from_idle;
    pool->used += mapped;
    pool->used_high = std::max(pool->used_high, pool->used);
    pool->reserved_high = std::max(pool->reserved_high, pool->used + pool->idle);
  }
  Allocation a;
  a.backed = backed;
  a.va = reinterpret_cast<std::uint64_t>(p);
  a.size = bytes;
  a.mapped = mapped;
  a.device = device;
  a.stream_ordered = stream_ordered;
  a.pool = pool;
  record_allocation(s, a, out);
  return CUDA_SUCCESS;
}

// Unified addressing: the pointer names its allocation and the context that made it, so cuMemFree
// needs no current context (a client may free after popping its contexts, as Numba's reset does).
// cuMemFreeAsync enqueues on a stream, which does need one.
CUresult release_allocation(std::uint64_t ptr, bool stream_ordered) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (stream_ordered) {
    int device = 0;
    if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  } else {
    if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
    if (CUresult r = check_unsafe_during_capture(s); r != CUDA_SUCCESS) return r;
  }
  auto it = s.allocations.find(ptr);
  if (it == s.allocations.end() || it->second.stream_ordered != stream_ordered || it->second.ipc_opened)
    return CUDA_ERROR_INVALID_VALUE;
  release_address(s, it->second);
  if (Pool* pool = it->second.pool) {
    pool->used -= it->second.mapped;
    // Freed work is complete at once, so the block is idle now: kept while under the release threshold.
    if (!pool->destroyed && pool->idle + it->second.mapped <= pool->release_threshold)
      pool->idle += it->second.mapped;
    else
      uncharge_device(s, it->second.device, it->second.mapped);
    if (pool->destroyed && pool->used == 0) s.pools.erase(pool);
  } else {
    uncharge_device(s, it->second.device, charged_bytes(it->second));
  }
  s.allocations.erase(it);
  return CUDA_SUCCESS;
}

// cuMemAllocManaged: memory the host and every device reach at one address. On a device with
// CONCURRENT_MANAGED_ACCESS (an H100), managed memory "may not be populated when this API returns and
// instead may be populated on access", and oversubscribing the device is allowed (cuda.h). Nothing here
// runs on a device, so its pages stay in host RAM and no device capacity is charged; an address space
// that cannot hold it is CUDA_ERROR_OUT_OF_MEMORY. Always host-backed, whatever SIMCUDA_HOST_BACKING
// says: the host touches it directly.
CUresult allocate_managed(CUdeviceptr* out, std::uint64_t bytes, unsigned flags) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  if (!out || bytes == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
    return CUDA_ERROR_INVALID_VALUE;
  if (bytes > UINT64_MAX - s.config.granularity) return CUDA_ERROR_OUT_OF_MEMORY;
  const std::uint64_t mapped = round_up(bytes, s.config.granularity);
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  Allocation a;
  a.va = reinterpret_cast<std::uint64_t>(p);
  a.size = bytes;
  a.mapped = mapped;
  a.device = device;
  a.managed = true;
  record_allocation(s, a, out);
  return CUDA_SUCCESS;
}

// Zero-fills without touching RAM where whole pages can be dropped; everything else is a plain
// memset, which faults (SIGSEGV) on memory that is unmapped or not writable, like a GPU would.
void fill(std::uint64_t dst, unsigned char value, std::uint64_t bytes) {
  if (value != 0 || bytes < kPunchThreshold) {
    std::memset(reinterpret_cast<void*>(dst), value, bytes);
    return;
  }
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  std::uint64_t at = dst;
  const std::uint64_t end = dst + bytes;
  while (at < end) {
    Region r = find_region(s, at);
    std::uint64_t region_end = end;
    bool punchable = false;
    int fd = -1;
    std::uint64_t file_offset = 0;
    if (r.allocation) {
      region_end = std::min(end, r.allocation->va + r.allocation->mapped);
      // An IPC-shared allocation is a MAP_SHARED memfd, where MADV_DONTNEED would bring the old data back.
      fd = r.allocation->ipc_fd;
      file_offset = at - r.allocation->va;
      punchable = !r.allocation->ipc_opened;
    } else if (r.mapping && r.mapping->access == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
      region_end = std::min(end, r.mapping->va + r.mapping->size);
      fd = s.handles.at(r.mapping->handle).fd;
      file_offset = at - r.mapping->va;
      punchable = true;
    }
    if (!punchable) {
      std::memset(reinterpret_cast<void*>(at), 0, end - at);  // faults on inaccessible memory
      return;
    }
    const std::uint64_t inner_begin = round_up(at, kPage);
    const std::uint64_t inner_end = round_down(region_end, kPage);
    if (inner_begin >= inner_end) {
      std::memset(reinterpret_cast<void*>(at), 0, region_end - at);
    } else {
      std::memset(reinterpret_cast<void*>(at), 0, inner_begin - at);
      if (fd >= 0) {
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(file_offset + (inner_begin - at)),
                  static_cast<off_t>(inner_end - inner_begin));
      } else {
        madvise(reinterpret_cast<void*>(inner_begin), inner_end - inner_begin, MADV_DONTNEED);
      }
      std::memset(reinterpret_cast<void*>(inner_end), 0, region_end - inner_end);
    }
    at = region_end;
  }
}

// True when [ptr, ptr+bytes) lies wholly in device memory the simulator knows: allocations,
// reservations and device-mapped host memory, several adjacent ones included (a VMM range may span mappings of
// contiguous reservations). A range that wraps around the address space is never known.
bool device_range_known(const State& s, std::uint64_t ptr, std::uint64_t bytes) {
  if (bytes > UINT64_MAX - ptr) return false;
  const std::uint64_t end = ptr + bytes;
  std::uint64_t at = ptr;
  while (at < end) {
    const Region r = find_region(s, at);
    if (r.allocation) {
      // Only the bytes the caller asked for: the rounding up to the granularity is not the allocation's.
      const std::uint64_t allocation_end = r.allocation->va + r.allocation->size;
      if (at >= allocation_end) return false;
      at = allocation_end;
    } else if (const Reservation* res = find_reservation(s, at)) {
      at = res->va + res->size;
    } else if (const HostBlock* h = find_host_block(s, at)) {
      // Pinned and registered host memory is device memory at the same address (unified addressing).
      at = h->va + h->size;
    } else {
      return false;
    }
  }
  return true;
}

CUresult memset_api(CUdeviceptr dst, unsigned char value, size_t bytes, CUstream stream, bool per_thread,
                    bool synchronous, unsigned element = 1, std::uint32_t pattern = 0) {
  Work work;
  work.kind = Work::Kind::kMemset;
  work.dst = dst;
  work.value = value;
  work.element = element;
  work.pattern = pattern;
  work.bytes = bytes;
  bool run_now = false;
  {
    std::lock_guard<std::mutex> guard(lock());
    State& s = state();
    int device = 0;
    if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
    if (synchronous) {
      if (CUresult r = check_unsafe_during_capture(s); r != CUDA_SUCCESS) return r;
    }
    if (bytes == 0) return CUDA_SUCCESS;
    if (!device_range_known(s, dst, bytes)) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = submit_work(s, stream, per_thread, synchronous, work, run_now); r != CUDA_SUCCESS) return r;
  }
  if (run_now) run_work(work);
  return CUDA_SUCCESS;
}

enum class Side { kHost, kDevice, kAny };

// A copy's side: device memory must hold the whole range; host memory cannot be checked beyond
// not wrapping around the address space. kAny is device memory when its first byte is.
bool side_valid(const State& s, std::uint64_t ptr, Side side, std::uint64_t bytes) {
  if (side == Side::kDevice || (side == Side::kAny && is_device_pointer(s, ptr)))
    return device_range_known(s, ptr, bytes);
  return bytes <= UINT64_MAX - ptr;
}

CUresult memcpy_api(CUdeviceptr dst, Side dst_side, CUdeviceptr src, Side src_side, size_t bytes, CUstream stream,
                    bool per_thread, bool synchronous) {
  Work work;
  work.kind = Work::Kind::kMemcpy;
  work.dst = dst;
  work.src = src;
  work.bytes = bytes;
  bool run_now = false;
  {
    std::lock_guard<std::mutex> guard(lock());
    State& s = state();
    int device = 0;
    if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
    if (synchronous) {
      if (CUresult r = check_unsafe_during_capture(s); r != CUDA_SUCCESS) return r;
    }
    if (bytes == 0) return CUDA_SUCCESS;
    if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
    if (!side_valid(s, dst, dst_side, bytes) || !side_valid(s, src, src_side, bytes)) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = submit_work(s, stream, per_thread, synchronous, work, run_now); r != CUDA_SUCCESS) return r;
  }
  if (run_now) run_work(work);
  return CUDA_SUCCESS;
}

CUresult check_location(const State& s, const CUmemLocation& location, bool& host) {
  switch (location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      if (location.id < 0 || location.id >= static_cast<int>(s.devices.size())) return CUDA_ERROR_INVALID_DEVICE;
      host = false;
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST:
      if (!s.config.host_vmm) return CUDA_ERROR_NOT_SUPPORTED;
      host = true;
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
      if (!s.config.host_numa_vmm) return CUDA_ERROR_NOT_SUPPORTED;
      if (location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA && location.id != 0) return CUDA_ERROR_INVALID_VALUE;
      host = true;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// An imported handle takes the exporter's location and flags from its memfd's name (cuMemCreate wrote them);
// an fd the simulator did not create keeps the importer's device.
void describe_imported(int fd, PhysicalHandle& p) {
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  char target[256] = {};
  if (readlink(link, target, sizeof target - 1) <= 0) return;
  int type = 0, id = 0, rdma = 0;
  if (std::sscanf(target, "/memfd:simcuda-handle t=%d i=%d r=%d", &type, &id, &rdma) != 3) return;
  p.location = static_cast<CUmemLocationType>(type);
  p.location_id = id;
  p.rdma = rdma != 0;
}

}  // namespace

CUresult copy_work(CUdeviceptr dst, CUdeviceptr src, std::uint64_t bytes, unsigned device_sides, CUstream stream,
                   bool per_thread, bool synchronous) {
  return memcpy_api(dst, (device_sides & 1) ? Side::kDevice : Side::kAny, src,
                    (device_sides & 2) ? Side::kDevice : Side::kAny, bytes, stream, per_thread, synchronous);
}

CUresult fill_work(CUdeviceptr dst, std::uint32_t value, unsigned element, std::uint64_t count, CUstream stream,
                   bool per_thread, bool synchronous) {
  if (count > UINT64_MAX / element) return CUDA_ERROR_INVALID_VALUE;
  // The real driver requires D16/D32 destinations aligned to the element.
  if (dst % element != 0) return CUDA_ERROR_INVALID_VALUE;
  return memset_api(dst, static_cast<unsigned char>(value), count * element, stream, per_thread, synchronous, element,
                    value);
}

CUresult allocate_from_pool(CUdeviceptr* out, std::uint64_t bytes, Pool* pool) {
  return allocate(out, bytes, true, pool);
}

Pool* default_pool(State& s, int device) {
  Device& d = s.devices[static_cast<std::size_t>(device)];
  if (!d.default_pool) {
    auto pool = std::make_unique<Pool>();
    pool->device = device;
    pool->is_default = true;
    d.default_pool = pool.get();
    s.pools.emplace(pool.get(), std::move(pool));
  }
  return d.default_pool;
}

Pool* current_pool(State& s, int device) {
  Device& d = s.devices[static_cast<std::size_t>(device)];
  return d.current_pool ? d.current_pool : default_pool(s, device);
}

namespace {
// Frees one allocation of the map (a reset or a context's destruction); returns the next entry.
std::map<std::uint64_t, Allocation>::iterator drop_allocation(State& s,
                                                              std::map<std::uint64_t, Allocation>::iterator it) {
  if (it->second.ipc_opened) {
    munmap(reinterpret_cast<void*>(it->first), it->second.mapped);
  } else {
    release_address(s, it->second);
    uncharge_device(s, it->second.device, charged_bytes(it->second));
    if (it->second.pool) it->second.pool->used -= it->second.mapped;
  }
  return s.allocations.erase(it);
}
}  // namespace

void release_device_allocations(State& s, int device) {
  for (auto it = s.allocations.begin(); it != s.allocations.end();) {
    const Context* owner = it->second.context;
    if (it->second.device == device && (!owner || owner->primary))
      it = drop_allocation(s, it);
    else
      ++it;
  }
}

void release_context_memory(State& s, const Context* context) {
  for (auto it = s.allocations.begin(); it != s.allocations.end();) {
    if (it->second.context == context && !it->second.stream_ordered)
      it = drop_allocation(s, it);
    else
      ++it;
  }
  for (auto it = s.host_blocks.begin(); it != s.host_blocks.end();) {
    if (it->second.context == context && !it->second.registered) {
      munmap(reinterpret_cast<void*>(it->first), it->second.size);
      it = s.host_blocks.erase(it);
    } else {
      ++it;
    }
  }
}

const HostBlock* find_host_block(const State& s, std::uint64_t ptr) {
  auto it = s.host_blocks.upper_bound(ptr);
  if (it == s.host_blocks.begin()) return nullptr;
  --it;
  return ptr < it->second.va + it->second.size ? &it->second : nullptr;
}

bool is_device_pointer(const State& s, std::uint64_t ptr) {
  Region r = find_region(s, ptr);
  return r.allocation || r.mapping || find_reservation(s, ptr);
}

void run_work(const Work& work) {
  switch (work.kind) {
    case Work::Kind::kMemset:
      if (work.element == 1 || work.pattern == 0) {
        fill(work.dst, work.value, work.bytes);
      } else if (work.element == 2) {
        const auto v = static_cast<std::uint16_t>(work.pattern);
        for (std::uint64_t i = 0; i < work.bytes; i += 2) std::memcpy(reinterpret_cast<void*>(work.dst + i), &v, 2);
      } else {
        for (std::uint64_t i = 0; i < work.bytes; i += 4)
          std::memcpy(reinterpret_cast<void*>(work.dst + i), &work.pattern, 4);
      }
      break;
    case Work::Kind::kMemcpy:
      std::memmove(reinterpret_cast<void*>(work.dst), reinterpret_cast<const void*>(work.src), work.bytes);
      break;
    case Work::Kind::kKernel: {
      std::vector<void*> params;
      params.reserve(work.args.size());
      for (const auto& arg : work.args) params.push_back(const_cast<unsigned char*>(arg.data()));
      work.function->host(params.data());
      break;
    }
  }
}

void destroy_all_memory(State& s) {
  for (auto& [va, m] : s.mappings) map_none(reinterpret_cast<void*>(va), m.size, true);
  s.mappings.clear();
  for (auto& [h, p] : s.handles) close(p.fd);
  s.handles.clear();
  for (auto& [va, r] : s.reservations) munmap(reinterpret_cast<void*>(va), r.size);
  s.reservations.clear();
  for (auto& [va, a] : s.allocations) release_address(s, a);
  s.allocations.clear();
  for (auto& [va, b] : s.host_blocks)
    if (!b.registered) munmap(reinterpret_cast<void*>(va), b.size);
  s.host_blocks.clear();
  if (s.unbacked.base != 0) munmap(reinterpret_cast<void*>(s.unbacked.base), s.unbacked.size);
  s.unbacked = UnbackedRange{};
}

}  // namespace simcuda

using namespace simcuda;

// ---- cuMemAlloc family ----

SIM_EXPORT int simcuda_fill_device(unsigned long long dst, unsigned char value, unsigned long long bytes) {
  simcuda::fill(dst, value, bytes);
  return 0;
}

SIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  SIM_ENTER("cuMemAlloc_v2");
  SIM_GUARDED_BEGIN
  return allocate(dptr, bytesize, false);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                                       unsigned int element_size) {
  SIM_ENTER("cuMemAllocPitch_v2");
  SIM_GUARDED_BEGIN
  if (!dptr || !pitch || width == 0 || height == 0 || (element_size != 4 && element_size != 8 && element_size != 16))
    return CUDA_ERROR_INVALID_VALUE;
  constexpr std::uint64_t kPitchAlignment = 512;  // the texture pitch alignment of recent GPUs
  std::uint64_t bytes = 0;
  // A pitch or a size beyond 64 bits is more than any device holds.
  if (width > UINT64_MAX - (kPitchAlignment - 1) ||
      __builtin_mul_overflow(round_up(width, kPitchAlignment), static_cast<std::uint64_t>(height), &bytes))
    return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = allocate(dptr, bytes, false);
  if (r == CUDA_SUCCESS) *pitch = round_up(width, kPitchAlignment);
  return r;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  SIM_ENTER("cuMemFree_v2");
  SIM_GUARDED_BEGIN
  return release_allocation(dptr, false);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  SIM_ENTER("cuMemAllocManaged");
  SIM_GUARDED_BEGIN
  return allocate_managed(dptr, bytesize, flags);
  SIM_GUARDED_END
}

// Stream-ordered allocation is immediate: the simulator runs stream work at enqueue time anyway.
static CUresult alloc_async(CUdeviceptr* dptr, size_t bytesize, CUstream stream, bool per_thread) {
  {
    std::lock_guard<std::mutex> guard(lock());
    State& s = state();
    if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
    if (!resolve_stream(s, stream, per_thread)) return CUDA_ERROR_INVALID_HANDLE;
  }
  return allocate(dptr, bytesize, true);
}

static CUresult free_async(CUdeviceptr dptr, CUstream stream, bool per_thread) {
  {
    std::lock_guard<std::mutex> guard(lock());
    State& s = state();
    if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
    if (!resolve_stream(s, stream, per_thread)) return CUDA_ERROR_INVALID_HANDLE;
  }
  return release_allocation(dptr, true);
}

SIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  SIM_ENTER("cuMemAllocAsync");
  SIM_GUARDED_BEGIN
  return alloc_async(dptr, bytesize, stream, false);
  SIM_GUARDED_END
}
SIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  SIM_ENTER("cuMemAllocAsync");
  SIM_GUARDED_BEGIN
  return alloc_async(dptr, bytesize, stream, true);
  SIM_GUARDED_END
}
SIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
  SIM_ENTER("cuMemFreeAsync");
  SIM_GUARDED_BEGIN
  return free_async(dptr, stream, false);
  SIM_GUARDED_END
}
SIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
  SIM_ENTER("cuMemFreeAsync");
  SIM_GUARDED_BEGIN
  return free_async(dptr, stream, true);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  SIM_ENTER("cuMemGetInfo_v2");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  if (!free_bytes || !total_bytes) return CUDA_ERROR_INVALID_VALUE;
  const std::uint64_t used = s.devices[static_cast<std::size_t>(device)].used;
  *total_bytes = s.config.device_memory;
  *free_bytes = used >= s.config.device_memory ? 0 : s.config.device_memory - used;
  return CUDA_SUCCESS;
}

// ---- memset / memcpy ----

SIM_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t n) {
  SIM_ENTER("cuMemsetD8_v2");
  SIM_GUARDED_BEGIN
  return memset_api(dst, value, n, nullptr, false, true);
  SIM_GUARDED_END
}
SIM_EXPORT CUresult cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char value, size_t n) {
  SIM_ENTER("cuMemsetD8_v2");
  SIM_GUARDED_BEGIN
  return memset_api(dst, value, n, nullptr, true, true);
  SIM_GUARDED_END
}
SIM_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream stream) {
  SIM_ENTER("cuMemsetD8Async");
  SIM_GUARDED_BEGIN
  return memset_api(dst, value, n, stream, false, false);
  SIM_GUARDED_END
}
SIM_EXPORT CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char value, size_t n, CUstream stream) {
  SIM_ENTER("cuMemsetD8Async");
  SIM_GUARDED_BEGIN
  return memset_api(dst, value, n, stream, true, false);
  SIM_GUARDED_END
}

#define SIM_COPY_EXPORTS(NAME, COUNTED, DST_T, DST_SIDE, SRC_T, SRC_SIDE)                               \
  SIM_EXPORT CUresult NAME(DST_T dst, SRC_T src, size_t n) {                                            \
    SIM_ENTER(COUNTED);                                                                                 \
    SIM_GUARDED_BEGIN                                                                                   \
    return memcpy_api((CUdeviceptr)dst, DST_SIDE, (CUdeviceptr)src, SRC_SIDE, n, nullptr, false, true); \
    SIM_GUARDED_END                                                                                     \
  }                                                                                                     \
  SIM_EXPORT CUresult NAME##_ptds(DST_T dst, SRC_T src, size_t n) {                                     \
    SIM_ENTER(COUNTED);                                                                                 \
    SIM_GUARDED_BEGIN                                                                                   \
    return memcpy_api((CUdeviceptr)dst, DST_SIDE, (CUdeviceptr)src, SRC_SIDE, n, nullptr, true, true);  \
    SIM_GUARDED_END                                                                                     \
  }

#define SIM_COPY_ASYNC_EXPORTS(NAME, COUNTED, DST_T, DST_SIDE, SRC_T, SRC_SIDE)                         \
  SIM_EXPORT CUresult NAME(DST_T dst, SRC_T src, size_t n, CUstream stream) {                           \
    SIM_ENTER(COUNTED);                                                                                 \
    SIM_GUARDED_BEGIN                                                                                   \
    return memcpy_api((CUdeviceptr)dst, DST_SIDE, (CUdeviceptr)src, SRC_SIDE, n, stream, false, false); \
    SIM_GUARDED_END                                                                                     \
  }                                                                                                     \
  SIM_EXPORT CUresult NAME##_ptsz(DST_T dst, SRC_T src, size_t n, CUstream stream) {                    \
    SIM_ENTER(COUNTED);                                                                                 \
    SIM_GUARDED_BEGIN                                                                                   \
    return memcpy_api((CUdeviceptr)dst, DST_SIDE, (CUdeviceptr)src, SRC_SIDE, n, stream, true, false);  \
    SIM_GUARDED_END                                                                                     \
  }

SIM_COPY_EXPORTS(cuMemcpy, "cuMemcpy", CUdeviceptr, Side::kAny, CUdeviceptr, Side::kAny)
SIM_COPY_EXPORTS(cuMemcpyHtoD_v2, "cuMemcpyHtoD_v2", CUdeviceptr, Side::kDevice, const void*, Side::kHost)
SIM_COPY_EXPORTS(cuMemcpyDtoH_v2, "cuMemcpyDtoH_v2", void*, Side::kHost, CUdeviceptr, Side::kDevice)
SIM_COPY_EXPORTS(cuMemcpyDtoD_v2, "cuMemcpyDtoD_v2", CUdeviceptr, Side::kDevice, CUdeviceptr, Side::kDevice)
SIM_COPY_ASYNC_EXPORTS(cuMemcpyAsync, "cuMemcpyAsync", CUdeviceptr, Side::kAny, CUdeviceptr, Side::kAny)
SIM_COPY_ASYNC_EXPORTS(cuMemcpyHtoDAsync_v2, "cuMemcpyHtoDAsync_v2", CUdeviceptr, Side::kDevice, const void*,
                       Side::kHost)
SIM_COPY_ASYNC_EXPORTS(cuMemcpyDtoHAsync_v2, "cuMemcpyDtoHAsync_v2", void*, Side::kHost, CUdeviceptr, Side::kDevice)
SIM_COPY_ASYNC_EXPORTS(cuMemcpyDtoDAsync_v2, "cuMemcpyDtoDAsync_v2", CUdeviceptr, Side::kDevice, CUdeviceptr,
                       Side::kDevice)

// ---- virtual memory management ----

SIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                                  CUmemAllocationGranularity_flags option) {
  SIM_ENTER("cuMemGetAllocationGranularity");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!granularity || !prop) return CUDA_ERROR_INVALID_VALUE;
  if (!s.config.vmm) return CUDA_ERROR_NOT_SUPPORTED;
  bool host = false;
  if (CUresult r = check_location(s, prop->location, host); r != CUDA_SUCCESS) return r;
  if (option == CU_MEM_ALLOC_GRANULARITY_MINIMUM) {
    *granularity = s.config.granularity;
  } else if (option == CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) {
    *granularity = s.config.recommended_granularity;
  } else {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                        unsigned long long flags) {
  SIM_ENTER("cuMemAddressReserve");
  SIM_GUARDED_BEGIN
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!ptr || size == 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!s.config.vmm) return CUDA_ERROR_NOT_SUPPORTED;
  const std::uint64_t g = s.config.granularity;
  if (size % g != 0 || (alignment != 0 && (alignment & (alignment - 1)) != 0)) return CUDA_ERROR_INVALID_VALUE;
  const std::uint64_t align = std::max<std::uint64_t>(alignment, g);
  // More address space than 64 bits hold: the aligned search below would wrap.
  if (size > UINT64_MAX - align) return CUDA_ERROR_OUT_OF_MEMORY;
  void* base = MAP_FAILED;
  if (addr != 0 && addr % align == 0) {
    // The hint is honoured when that range is free, as the real driver does; otherwise ignored.
    base = mmap(reinterpret_cast<void*>(addr), size, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (base != MAP_FAILED && reinterpret_cast<std::uint64_t>(base) != addr) {
      munmap(base, size);
      base = MAP_FAILED;
    }
  }
  std::uint64_t va = 0;
  if (base != MAP_FAILED) {
    va = reinterpret_cast<std::uint64_t>(base);
  } else {
    void* raw = map_none(nullptr, size + align, false);
    if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    const std::uint64_t start = reinterpret_cast<std::uint64_t>(raw);
    va = round_up(start, align);
    if (va > start) munmap(raw, va - start);
    const std::uint64_t tail = start + size + align - (va + size);
    if (tail) munmap(reinterpret_cast<void*>(va + size), tail);
  }
  s.reservations[va] = Reservation{va, size};
  *ptr = va;
  return CUDA_SUCCESS;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  SIM_ENTER("cuMemAddressFree");
  SIM_GUARDED_BEGIN
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  auto it = s.reservations.find(ptr);
  if (it == s.reservations.end() || it->second.size != size) return CUDA_ERROR_INVALID_VALUE;
  // Freeing a range that still has mappings would strand them; the simulator refuses.
  auto m = s.mappings.lower_bound(ptr);
  if (m != s.mappings.end() && m->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;
  munmap(reinterpret_cast<void*>(ptr), size);
  s.reservations.erase(it);
  return CUDA_SUCCESS;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                                unsigned long long flags) {
  SIM_ENTER("cuMemCreate");
  SIM_GUARDED_BEGIN
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!handle || !prop || size == 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!s.config.vmm) return CUDA_ERROR_NOT_SUPPORTED;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  // POSIX file descriptors are the one shareable handle type of a Linux machine without fabric (IMEX).
  if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE &&
      prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return CUDA_ERROR_NOT_SUPPORTED;
  bool host = false;
  if (CUresult r = check_location(s, prop->location, host); r != CUDA_SUCCESS) return r;
  // GPUDirect RDMA registers device memory; a host-located handle with the flag is refused.
  if (prop->allocFlags.gpuDirectRDMACapable && host) return CUDA_ERROR_NOT_SUPPORTED;
  if (size % s.config.granularity != 0) return CUDA_ERROR_INVALID_VALUE;
  PhysicalHandle p;
  p.size = size;
  p.location = prop->location.type;
  p.posix_fd = prop->requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  p.rdma = prop->allocFlags.gpuDirectRDMACapable != 0;
  if (host) {
    if (size > s.config.host_memory - std::min(s.host_used, s.config.host_memory)) return CUDA_ERROR_OUT_OF_MEMORY;
    s.host_used += size;
  } else {
    p.device = prop->location.id;
    if (!charge_device(s, p.device, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  p.location_id = prop->location.id;
  // The name carries the properties across cuMemExportToShareableHandle: an importing process reads them
  // from /proc/self/fd (describe_imported) to answer cuMemGetAllocationPropertiesFromHandle as the exporter.
  char name[64];
  std::snprintf(name, sizeof name, "simcuda-handle t=%d i=%d r=%d", static_cast<int>(p.location), p.location_id,
                p.rdma ? 1 : 0);
  p.fd = memfd_create(name, MFD_CLOEXEC);
  if (p.fd < 0 || ftruncate(p.fd, static_cast<off_t>(size)) != 0) {
    if (p.fd >= 0) close(p.fd);
    if (host) {
      s.host_used -= size;
    } else {
      uncharge_device(s, p.device, size);
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const CUmemGenericAllocationHandle h = s.next_handle++;
  s.handles[h] = p;
  *handle = h;
  return CUDA_SUCCESS;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  SIM_ENTER("cuMemRelease");
  SIM_GUARDED_BEGIN
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  auto it = s.handles.find(handle);
  if (it == s.handles.end() || (it->second.released && it->second.retains == 0)) return CUDA_ERROR_INVALID_VALUE;
  if (it->second.retains > 0)
    --it->second.retains;  // references are counted, not owned: any release drops one
  else
    it->second.released = true;
  destroy_handle_if_unused(s, handle);
  return CUDA_SUCCESS;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                             unsigned long long flags) {
  SIM_ENTER("cuMemMap");
  SIM_GUARDED_BEGIN
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (offset != 0 || flags != 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  auto h = s.handles.find(handle);
  if (h == s.handles.end() || h->second.released) return CUDA_ERROR_INVALID_VALUE;
  // Whole handles only: the simulator does not model partial mappings of a handle.
  if (size != h->second.size || ptr % s.config.granularity != 0) return CUDA_ERROR_INVALID_VALUE;
  const Reservation* res = find_reservation(s, ptr);
  if (!res || ptr + size > res->va + res->size) return CUDA_ERROR_INVALID_VALUE;
  auto next = s.mappings.lower_bound(ptr);
  if (next != s.mappings.end() && next->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;
  if (next != s.mappings.begin()) {
    auto prev = std::prev(next);
    if (prev->second.va + prev->second.size > ptr) return CUDA_ERROR_INVALID_VALUE;
  }
  void* at = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->second.fd, 0);
  if (at == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  Mapping m;
  m.va = ptr;
  m.size = size;
  m.handle = handle;
  m.buffer_id = s.next_buffer_id++;
  s.mappings[ptr] = m;
  ++h->second.mappings;
  return CUDA_SUCCESS;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  SIM_ENTER("cuMemUnmap");
  SIM_GUARDED_BEGIN
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  std::vector<Mapping*> covered = exact_mappings(s, ptr, size);
  if (covered.empty()) return CUDA_ERROR_INVALID_VALUE;
  std::vector<CUmemGenericAllocationHandle> touched;
  for (Mapping* m : covered) {
    touched.push_back(m->handle);
    --s.handles.at(m->handle).mappings;
  }
  // One mmap restores the whole range to an inaccessible reservation.
  map_none(reinterpret_cast<void*>(ptr), size, true);
  s.mappings.erase(s.mappings.find(ptr), s.mappings.lower_bound(ptr + size));
  for (CUmemGenericAllocationHandle h : touched) destroy_handle_if_unused(s, h);
  return CUDA_SUCCESS;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  SIM_ENTER("cuMemSetAccess");
  SIM_GUARDED_BEGIN
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!desc || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  CUmemAccess_flags access = CU_MEM_ACCESS_FLAGS_PROT_NONE;
  bool for_a_device = false;
  for (size_t i = 0; i < count; ++i) {
    const CUmemAccessDesc& d = desc[i];
    if (d.flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && d.flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        d.flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return CUDA_ERROR_INVALID_VALUE;
    if (d.location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
      if (d.location.id < 0 || d.location.id >= static_cast<int>(s.devices.size())) return CUDA_ERROR_INVALID_DEVICE;
      // Host pointers are device pointers here, so the most permissive device grant decides.
      if (!for_a_device || d.flags > access) access = d.flags;
      for_a_device = true;
    } else if (d.location.type != CU_MEM_LOCATION_TYPE_HOST && d.location.type != CU_MEM_LOCATION_TYPE_HOST_NUMA &&
               d.location.type != CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  std::vector<Mapping*> covered = exact_mappings(s, ptr, size);
  if (covered.empty()) return CUDA_ERROR_INVALID_VALUE;
  for (Mapping* m : covered)
    for (size_t i = 0; i < count; ++i) m->granted[access_key(desc[i].location)] = desc[i].flags;
  if (!for_a_device) return CUDA_SUCCESS;
  const int prot = access == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
                   : access == CU_MEM_ACCESS_FLAGS_PROT_READ    ? PROT_READ
                                                                : PROT_NONE;
  if (mprotect(reinterpret_cast<void*>(ptr), size, prot) != 0) return CUDA_ERROR_INVALID_VALUE;
  for (Mapping* m : covered) m->access = access;
  return CUDA_SUCCESS;
  SIM_GUARDED_END
}

// ---- pointer queries ----

SIM_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr dptr) {
  SIM_ENTER("cuMemGetAddressRange_v2");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  Region region = find_region(s, dptr);
  std::uint64_t b = 0;
  std::uint64_t n = 0;
  if (region.allocation) {
    b = region.allocation->va;
    n = region.allocation->size;
  } else if (region.mapping) {
    b = region.mapping->va;
    n = region.mapping->size;
  } else if (const HostBlock* h = find_host_block(s, dptr)) {
    // Device-mapped host memory: the device pointer is the host address (unified addressing), and the
    // range is the pinned allocation or registration containing it.
    b = h->va;
    n = h->size;
  } else {
    return CUDA_ERROR_NOT_FOUND;
  }
  if (base) *base = b;
  if (size) *size = n;
  return CUDA_SUCCESS;
}

// The handle behind a mapped address, as one more reference (released with cuMemRelease).
SIM_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  SIM_ENTER("cuMemRetainAllocationHandle");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  const Region region = find_region(s, reinterpret_cast<std::uint64_t>(addr));
  if (!region.mapping) return CUDA_ERROR_INVALID_VALUE;  // not VMM memory
  ++s.handles.at(region.mapping->handle).retains;
  *handle = region.mapping->handle;
  return CUDA_SUCCESS;
}

// A handle created with POSIX_FILE_DESCRIPTOR as a file descriptor another process imports: a duplicate of
// the handle's memfd (close-on-exec; a forked child or SCM_RIGHTS carries it). A handle not created for that
// type, another type, or flags: CUDA_ERROR_INVALID_VALUE.
SIM_EXPORT CUresult cuMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                                 CUmemAllocationHandleType type, unsigned long long flags) {
  SIM_ENTER("cuMemExportToShareableHandle");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  auto it = s.handles.find(handle);
  if (!shareable || flags != 0 || it == s.handles.end() || (it->second.released && it->second.retains == 0))
    return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || !it->second.posix_fd) return CUDA_ERROR_INVALID_VALUE;
  const int fd = fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *static_cast<int*>(shareable) = fd;
  return CUDA_SUCCESS;
}

// The importing side: a new handle on the same memory (`os_handle` is the fd itself, cast to a pointer, as
// cuda.h documents for POSIX_FILE_DESCRIPTOR). Not charged: the exporting process holds the memory.
SIM_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                                   CUmemAllocationHandleType type) {
  SIM_ENTER("cuMemImportFromShareableHandle");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!handle || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
  const int source = static_cast<int>(reinterpret_cast<std::intptr_t>(os_handle));
  struct stat st {};
  if (source < 0 || fstat(source, &st) != 0 || st.st_size <= 0) return CUDA_ERROR_INVALID_VALUE;
  const int fd = fcntl(source, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  PhysicalHandle p;
  p.fd = fd;
  p.size = static_cast<std::uint64_t>(st.st_size);
  p.posix_fd = true;
  p.imported = true;
  if (CUresult r = current_device(s, &p.device); r != CUDA_SUCCESS) p.device = 0;
  p.location_id = p.device;
  describe_imported(fd, p);
  const CUmemGenericAllocationHandle h = s.next_handle++;
  s.handles[h] = p;
  *handle = h;
  return CUDA_SUCCESS;
}

// dma-buf export of a device range: no such thing on the simulator (as on a driver without it).
SIM_EXPORT CUresult cuMemGetHandleForAddressRange(void* handle, CUdeviceptr dptr, size_t size,
                                                  CUmemRangeHandleType type, unsigned long long flags) {
  SIM_ENTER("cuMemGetHandleForAddressRange");
  (void)dptr;
  (void)size;
  if (!handle || type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD ||
      (flags & ~static_cast<unsigned long long>(CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE)) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_NOT_SUPPORTED;
}

// One attribute of page-locked host memory: host memory type, the same address on the device (UVA).
static CUresult host_pointer_attribute(State& s, const HostBlock& h, void* data, CUpointer_attribute attribute,
                                       CUdeviceptr ptr) {
  Context* current = get_current_context(s);
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = reinterpret_cast<CUcontext>(current ? current : &s.devices[0].primary);
      break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned int*>(data) = CU_MEMORYTYPE_HOST;
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      *static_cast<CUdeviceptr*>(data) = ptr;
      break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      *static_cast<int*>(data) = 0;
      break;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      *static_cast<int*>(data) = 1;
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = current ? current->device : 0;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = h.va;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = h.size;
      break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      *static_cast<unsigned long long*>(data) = h.buffer_id;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// One attribute of the allocation or mapping at `ptr`; the caller holds the lock.
static CUresult pointer_attribute(State& s, void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  Region region = find_region(s, ptr);
  if (!region.allocation && !region.mapping) {
    if (const HostBlock* h = find_host_block(s, ptr)) return host_pointer_attribute(s, *h, data, attribute, ptr);
    return CUDA_ERROR_INVALID_VALUE;
  }
  const Allocation* a = region.allocation;
  const Mapping* m = region.mapping;
  const int device = a ? a->device : s.handles.at(m->handle).device;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = reinterpret_cast<CUcontext>(
          a && a->context ? a->context : &s.devices[static_cast<std::size_t>(device)].primary);
      break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned int*>(data) = CU_MEMORYTYPE_DEVICE;
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *static_cast<CUdeviceptr*>(data) = ptr;
      break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      // Only host-accessible memory has a host pointer; managed memory is, at the same address.
      if (!a || !a->managed) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<CUdeviceptr*>(data) = ptr;
      break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<int*>(data) = a && a->managed ? 1 : 0;
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = device;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = a ? a->va : m->va;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = a ? a->size : m->size;
      break;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      *static_cast<int*>(data) = 1;
      break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      *static_cast<int*>(data) = a && !a->stream_ordered && !a->managed ? 1 : 0;
      break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      *static_cast<unsigned long long*>(data) = a ? a->buffer_id : m->buffer_id;
      break;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
      *static_cast<CUdeviceptr*>(data) = a ? a->va : m->va;
      break;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
      *static_cast<size_t*>(data) = a ? a->mapped : m->size;
      break;
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
      // The physical allocation: every alias of one VMM handle reports the same id.
      *static_cast<unsigned long long*>(data) = a ? a->buffer_id : m->handle;
      break;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
      *static_cast<CUDA_POINTER_ATTRIBUTE_ACCESS_FLAGS*>(data) =
          a ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE : static_cast<CUDA_POINTER_ATTRIBUTE_ACCESS_FLAGS>(m->access);
      break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
      // The pool a stream-ordered allocation came from; NULL for memory no pool gave out (cuda.h).
      *static_cast<CUmemoryPool*>(data) = a && a->pool ? reinterpret_cast<CUmemoryPool>(a->pool) : nullptr;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// The size of an attribute's value, as cuda.h types it (booleans as int); 0 for an unknown attribute.
static std::size_t pointer_attribute_size(int attribute) {
  switch (attribute) {  // an int: the caller's value may be none of the enum's
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_MAPPED:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
      return sizeof(int);
    case CU_POINTER_ATTRIBUTE_CONTEXT:
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
      return sizeof(std::uint64_t);
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
      return sizeof(CUDA_POINTER_ATTRIBUTE_P2P_TOKENS);
    default:
      return 0;
  }
}

SIM_EXPORT CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  SIM_ENTER("cuPointerGetAttribute");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  return pointer_attribute(s, data, attribute, ptr);
}

SIM_EXPORT CUresult cuPointerGetAttributes(unsigned int count, CUpointer_attribute* attributes, void** data,
                                           CUdeviceptr ptr) {
  SIM_ENTER("cuPointerGetAttributes");
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!attributes || !data) return CUDA_ERROR_INVALID_VALUE;
  // cuda.h: unlike cuPointerGetAttribute, a pointer that is not a valid CUDA pointer is no error here;
  // every attribute gets its default NULL value.
  const Region region = find_region(s, ptr);
  if (!region.allocation && !region.mapping && !find_host_block(s, ptr)) {
    for (unsigned int i = 0; i < count; ++i) {
      if (!data[i]) return CUDA_ERROR_INVALID_VALUE;
      // Read as the integer the caller stored: a client built against a newer cuda.h may pass an attribute
      // this enum lacks, and loading that through the enum type is undefined.
      int raw = 0;
      std::memcpy(&raw, &attributes[i], sizeof raw);
      const std::size_t bytes = pointer_attribute_size(raw);
      if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
      std::memset(data[i], 0, bytes);
    }
    return CUDA_SUCCESS;
  }
  for (unsigned int i = 0; i < count; ++i)
    if (CUresult r = pointer_attribute(s, data[i], attributes[i], ptr); r != CUDA_SUCCESS) return r;
  return CUDA_SUCCESS;
}

// The fields of a CUipcMemHandle this simulator writes: what another process needs to map the memory.
namespace {
struct IpcFields {
  std::uint64_t magic;
  std::uint64_t pid;
  std::uint64_t buffer_id;
  std::uint64_t fd;  // the exporter's memfd, opened by the importer through /proc/PID/fd/FD
  std::uint64_t mapped;
  std::uint64_t size;
};
static_assert(sizeof(IpcFields) <= sizeof(CUipcMemHandle));
constexpr std::uint64_t kIpcMagic = 0x51c0da1bcULL;

// Moves an allocation's private pages into a memfd mapped at the same address, so that another
// process can map the same memory. Only resident, non-zero pages are copied: an untouched 80 GiB
// allocation stays free.
bool share_allocation(Allocation& a) {
  if (a.ipc_fd >= 0) return true;
  const int fd = static_cast<int>(syscall(SYS_memfd_create, "simcuda-ipc", MFD_CLOEXEC));
  if (fd < 0) return false;
  if (ftruncate(fd, static_cast<off_t>(a.mapped)) != 0) {
    close(fd);
    return false;
  }
  std::vector<unsigned char> resident((a.mapped + kPage - 1) / kPage);
  static const unsigned char zero[kPage] = {};
  if (mincore(reinterpret_cast<void*>(a.va), a.mapped, resident.data()) == 0) {
    for (std::size_t i = 0; i < resident.size(); ++i) {
      const auto* page = reinterpret_cast<const unsigned char*>(a.va + i * kPage);
      if ((resident[i] & 1) && std::memcmp(page, zero, kPage) != 0 &&
          pwrite(fd, page, kPage, static_cast<off_t>(i * kPage)) != static_cast<ssize_t>(kPage)) {
        close(fd);
        return false;
      }
    }
  }
  if (mmap(reinterpret_cast<void*>(a.va), a.mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
      MAP_FAILED) {
    close(fd);
    return false;
  }
  a.ipc_fd = fd;
  return true;
}

CUresult open_ipc(CUdeviceptr* out, const CUipcMemHandle& handle, unsigned flags) {
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  if (!out || (flags & ~static_cast<unsigned>(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  IpcFields f{};
  std::memcpy(&f, handle.reserved, sizeof f);
  if (f.magic != kIpcMagic || f.mapped == 0) return CUDA_ERROR_INVALID_HANDLE;
  // The exporting process cannot open its own handle.
  if (f.pid == static_cast<std::uint64_t>(getpid())) return CUDA_ERROR_INVALID_CONTEXT;
  for (auto& [va, a] : s.allocations) {
    if (a.ipc_opened && a.ipc_key_pid == f.pid && a.ipc_key_buffer == f.buffer_id) {
      ++a.ipc_opens;  // opened again: the same address, one more reference
      *out = va;
      return CUDA_SUCCESS;
    }
  }
  const std::string path = "/proc/" + std::to_string(f.pid) + "/fd/" + std::to_string(f.fd);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_MAP_FAILED;
  void* p = mmap(nullptr, f.mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return CUDA_ERROR_MAP_FAILED;
  Allocation a;
  a.va = reinterpret_cast<std::uint64_t>(p);
  a.size = f.size;
  a.mapped = f.mapped;
  a.device = device;
  a.context = get_current_context(s);
  a.ipc_opened = true;
  a.ipc_opens = 1;
  a.ipc_key_pid = f.pid;
  a.ipc_key_buffer = f.buffer_id;
  a.buffer_id = s.next_buffer_id++;
  s.allocations[a.va] = a;
  *out = a.va;
  return CUDA_SUCCESS;
}
}  // namespace

SIM_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) {
  SIM_ENTER("cuIpcGetMemHandle");
  SIM_GUARDED_BEGIN
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  if (CUresult r = require_init(s); r != CUDA_SUCCESS) return r;
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  Region region = find_region(s, dptr);
  // Legacy IPC works on cuMemAlloc memory only: VMM mappings, pool and managed memory are refused.
  if (!region.allocation || region.allocation->stream_ordered || region.allocation->ipc_opened ||
      region.allocation->managed)
    return CUDA_ERROR_INVALID_VALUE;
  Allocation& a = s.allocations.at(region.allocation->va);
  // Unbacked addresses (SIMCUDA_HOST_BACKING=0) have no memory to share: the handle still names the
  // allocation, but no other process can open it.
  if (a.backed && !share_allocation(a)) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(handle->reserved, 0, sizeof handle->reserved);
  const IpcFields f{kIpcMagic,
                    static_cast<std::uint64_t>(getpid()),
                    a.buffer_id,
                    static_cast<std::uint64_t>(a.ipc_fd < 0 ? 0 : a.ipc_fd),
                    a.backed ? a.mapped : 0,
                    a.size};
  std::memcpy(handle->reserved, &f, sizeof f);
  return CUDA_SUCCESS;
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags) {
  SIM_ENTER("cuIpcOpenMemHandle_v2");
  SIM_GUARDED_BEGIN
  return open_ipc(pdptr, handle, flags);
  SIM_GUARDED_END
}

// The CUDA 4.1 ABI of the same call, which cuda.h's macro otherwise renames to _v2.
#undef cuIpcOpenMemHandle
extern "C" CUresult cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags);
SIM_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags) {
  SIM_ENTER("cuIpcOpenMemHandle");
  SIM_GUARDED_BEGIN
  return open_ipc(pdptr, handle, flags);
  SIM_GUARDED_END
}

SIM_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  SIM_ENTER("cuIpcCloseMemHandle");
  SIM_GUARDED_BEGIN
  std::lock_guard<std::mutex> guard(lock());
  State& s = state();
  int device = 0;
  if (CUresult r = current_device(s, &device); r != CUDA_SUCCESS) return r;
  auto it = s.allocations.find(dptr);
  if (it == s.allocations.end() || !it->second.ipc_opened) return CUDA_ERROR_INVALID_VALUE;
  if (--it->second.ipc_opens == 0) {
    munmap(reinterpret_cast<void*>(it->first), it->second.mapped);
    s.allocations.erase(it);
  }
  return CUDA_SUCCESS;
  SIM_GUARDED_END
}
