// The KV arena's VMM mechanics: carving regions, device/host chunks, scratch aliasing, and rollback on failure.
#include "interpose/kv/kv_arena.h"

#include <algorithm>

namespace kvremap::interpose {
namespace {

std::uint64_t round_up(std::uint64_t value, std::uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace

std::unique_ptr<KvArena> KvArena::create(const ArenaDriver& driver, const ArenaConfig& config, CUresult* error) {
  *error = CUDA_ERROR_INVALID_VALUE;
  if (config.chunk_bytes == 0 || config.scratch_bytes == 0 || config.granularity == 0 ||
      config.chunk_bytes % config.scratch_bytes != 0 || config.scratch_bytes % config.granularity != 0 ||
      config.reserve_bytes < config.chunk_bytes)
    return nullptr;
  ArenaConfig c = config;
  c.reserve_bytes = round_up(config.reserve_bytes, config.chunk_bytes);
  std::unique_ptr<KvArena> arena(new KvArena(driver, c));
  // Chunk-aligned, so a chunk never straddles a larger-page boundary the driver might prefer.
  *error = driver.address_reserve(&arena->base_, c.reserve_bytes, c.chunk_bytes, 0, 0);
  if (*error != CUDA_SUCCESS) {
    arena->base_ = 0;
    return nullptr;
  }
  return arena;
}

KvArena::~KvArena() {
  while (!regions_.empty()) release(regions_.begin()->first);
  for (CUmemGenericAllocationHandle h : release_later_) driver_.release(h);
  if (scratch_) driver_.release(scratch_);
  if (granule_scratch_) driver_.release(granule_scratch_);
  if (base_) driver_.address_free(base_, config_.reserve_bytes);
}

CUresult KvArena::create_handle(const Region* region, bool host, std::uint64_t bytes,
                                CUmemGenericAllocationHandle* handle) {
  CUmemAllocationProp prop{};
  if (region && region->adopted) {
    // The engine's own properties (handle types, RDMA, compression): what it may export or register later.
    prop = region->prop;
    if (host) {
      prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
      prop.location.id = 0;
      prop.allocFlags.gpuDirectRDMACapable = 0;  // registers device memory only
    }
    return driver_.create(handle, bytes, &prop, 0);
  }
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = host ? 0 : config_.device;
  if (!host) {
    prop.requestedHandleTypes =
        config_.posix_fd_handles ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    prop.allocFlags.gpuDirectRDMACapable = config_.rdma_capable ? 1 : 0;
  }
  return driver_.create(handle, bytes, &prop, 0);
}

CUresult KvArena::grant_access(const Region& region, CUdeviceptr va, std::uint64_t bytes) {
  // An adopted region gets back every grant its engine made (peers included), whatever backs it now.
  if (region.adopted && !region.access.empty())
    return driver_.set_access(va, bytes, region.access.data(), region.access.size());
  return grant_own_device(va, bytes);
}

CUresult KvArena::grant_own_device(CUdeviceptr va, std::uint64_t bytes) {
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = config_.device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return driver_.set_access(va, bytes, &access, 1);
}

CUresult KvArena::map_chunks(const Region& region, CUdeviceptr va, const std::vector<Chunk>& chunks) {
  std::uint64_t offset = 0;
  for (const Chunk& c : chunks) {
    const CUresult r = driver_.map(va + offset, c.bytes, 0, c.handle, 0);
    if (r != CUDA_SUCCESS) {
      if (offset) driver_.unmap(va, offset);
      return r;
    }
    offset += c.bytes;
  }
  // One access grant for the whole contiguous run: a call per chunk costs tens of microseconds each.
  const CUresult r = grant_access(region, va, offset);
  if (r != CUDA_SUCCESS) driver_.unmap(va, offset);
  return r;
}

CUresult KvArena::map_scratch(const Region& region, CUdeviceptr va, std::uint64_t bytes) {
  for (std::uint64_t off = 0; off < bytes;) {
    // Large aliases where they fit (few mappings), single granules for the remainder.
    const bool large = bytes - off >= config_.scratch_bytes;
    const std::uint64_t step = large ? config_.scratch_bytes : config_.granularity;
    const CUresult r = driver_.map(va + off, step, 0, large ? scratch_ : granule_scratch_, 0);
    if (r != CUDA_SUCCESS) {
      if (off) driver_.unmap(va, off);
      return r;
    }
    off += step;
  }
  const CUresult r = grant_access(region, va, bytes);
  if (r != CUDA_SUCCESS) driver_.unmap(va, bytes);
  return r;
}

void KvArena::release_handles(std::vector<Chunk>& chunks) {
  // Earlier releases that failed: the driver may take them now.
  std::vector<CUmemGenericAllocationHandle> still;
  for (CUmemGenericAllocationHandle h : release_later_)
    if (driver_.release(h) != CUDA_SUCCESS) still.push_back(h);
  release_later_.swap(still);
  for (Chunk& c : chunks) {
    // Once more at once (a transient failure), else kept and retried at the next release.
    if (c.handle && driver_.release(c.handle) != CUDA_SUCCESS && driver_.release(c.handle) != CUDA_SUCCESS)
      release_later_.push_back(c.handle);
    c.handle = 0;
  }
}

bool KvArena::has_address_space(std::uint64_t bytes) const {
  CUdeviceptr at = 0;
  return find_va(round_up(bytes, config_.chunk_bytes), &at) == CUDA_SUCCESS;  // as allocate() reserves
}

CUresult KvArena::find_va(std::uint64_t bytes, CUdeviceptr* out) const {
  CUdeviceptr at = base_;
  for (const auto& [region_base, region] : regions_) {
    if (region.adopted) continue;  // the engine's own VA, outside the reserved range
    if (region_base - at >= bytes) break;
    at = region_base + region.bytes;
  }
  if (at + bytes > base_ + config_.reserve_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  *out = at;
  return CUDA_SUCCESS;
}

CUresult KvArena::allocate(std::uint64_t bytes, CUdeviceptr* out, bool on_host) {
  if (bytes == 0 || !out) return CUDA_ERROR_INVALID_VALUE;
  const std::uint64_t size = round_up(bytes, config_.granularity);
  CUdeviceptr va = 0;
  // Regions start on chunk boundaries so every chunk of every region is aligned like the first.
  if (CUresult r = find_va(round_up(size, config_.chunk_bytes), &va); r != CUDA_SUCCESS) return r;
  Region region;
  region.bytes = size;
  const std::uint64_t step = chunk_step(size, false);
  for (std::uint64_t off = 0; off < size; off += step)
    region.chunks.push_back(Chunk{0, on_host, std::min(step, size - off)});
  for (Chunk& c : region.chunks) {
    if (CUresult r = create_handle(&region, on_host, c.bytes, &c.handle); r != CUDA_SUCCESS) {
      c.handle = 0;
      release_handles(region.chunks);
      return r;
    }
  }
  if (CUresult r = map_chunks(region, va, region.chunks); r != CUDA_SUCCESS) {
    release_handles(region.chunks);
    return r;
  }
  regions_.emplace(va, std::move(region));
  *out = va;
  return CUDA_SUCCESS;
}

CUresult KvArena::release(CUdeviceptr base) {
  auto it = regions_.find(base);
  if (it == regions_.end()) return CUDA_ERROR_INVALID_VALUE;
  const CUresult r = it->second.unmapped ? CUDA_SUCCESS : driver_.unmap(base, it->second.bytes);
  release_handles(it->second.chunks);
  regions_.erase(it);
  return r;
}

CUresult KvArena::ensure_scratch() {
  // Created at the first deferral, not with the arena: until then the engine measures its memory
  // and sizes its KV cache, and must not see kvremap's scratch in those numbers.
  if (!scratch_) {
    if (CUresult r = create_handle(nullptr, false, config_.scratch_bytes, &scratch_); r != CUDA_SUCCESS) {
      scratch_ = 0;
      return r;
    }
  }
  if (!granule_scratch_) {
    if (CUresult r = create_handle(nullptr, false, config_.granularity, &granule_scratch_); r != CUDA_SUCCESS) {
      granule_scratch_ = 0;
      return r;
    }
  }
  return CUDA_SUCCESS;
}

CUresult KvArena::defer(CUdeviceptr base) {
  auto it = regions_.find(base);
  if (it == regions_.end()) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = ensure_scratch(); r != CUDA_SUCCESS) return r;
  Region& region = it->second;
  for (const Chunk& c : region.chunks)
    if (!c.handle) return CUDA_ERROR_ILLEGAL_STATE;  // already (partly) on scratch
  if (CUresult r = driver_.unmap(base, region.bytes); r != CUDA_SUCCESS) return r;
  if (CUresult r = map_scratch(region, base, region.bytes); r != CUDA_SUCCESS) {
    // Back to where it was: the chunks are still held, only their mappings went.
    region.unmapped = map_chunks(region, base, region.chunks) != CUDA_SUCCESS;
    return r;
  }
  release_handles(region.chunks);
  return CUDA_SUCCESS;
}

std::vector<KvArena::Chunk> KvArena::commit_layout(const Region& region, std::uint64_t device_bytes) const {
  std::vector<Chunk> chunks;
  const std::uint64_t bytes = region.bytes;
  const std::uint64_t step = chunk_step(bytes, region.adopted);
  for (std::uint64_t off = 0; off < bytes; off += step) {
    const std::uint64_t end = std::min(bytes, off + step);
    if (end <= device_bytes) {
      chunks.push_back(Chunk{0, false, end - off});
    } else if (off >= device_bytes) {
      chunks.push_back(Chunk{0, true, end - off});
    } else {
      chunks.push_back(Chunk{0, false, device_bytes - off});
      chunks.push_back(Chunk{0, true, end - device_bytes});
    }
  }
  return chunks;
}

CUresult KvArena::commit(CUdeviceptr base, std::uint64_t device_bytes, std::uint64_t* on_device) {
  auto it = regions_.find(base);
  if (it == regions_.end()) return CUDA_ERROR_INVALID_VALUE;
  Region& region = it->second;
  for (const Chunk& c : region.chunks)
    if (c.handle) return CUDA_ERROR_ILLEGAL_STATE;  // not deferred
  const std::uint64_t placed = std::min(region.bytes, device_bytes / config_.granularity * config_.granularity);
  std::vector<Chunk> fresh = commit_layout(region, placed);
  for (std::size_t i = 0; i < fresh.size(); ++i) {
    if (CUresult r = create_handle(&region, fresh[i].host, fresh[i].bytes, &fresh[i].handle); r != CUDA_SUCCESS) {
      fresh[i].handle = 0;
      release_handles(fresh);
      return r;  // still on scratch: nothing changed
    }
  }
  if (CUresult r = driver_.unmap(base, region.bytes); r != CUDA_SUCCESS) {
    release_handles(fresh);
    return r;
  }
  CUresult r = map_chunks(region, base, fresh);  // undoes itself on failure
  if (r == CUDA_SUCCESS) {
    // The engine asked for zeros (torch.zeros) and the scratch holds start-up garbage. The fill needs
    // kvremap's device to write, whatever the engine granted; an adopted region's grants come back after it.
    const bool regrant = region.adopted && !region.access.empty();
    if (regrant) r = grant_own_device(base, region.bytes);
    if (r == CUDA_SUCCESS) r = driver_.memset_d8(base, 0, region.bytes);
    if (r == CUDA_SUCCESS && regrant) r = grant_access(region, base, region.bytes);
    if (r != CUDA_SUCCESS) driver_.unmap(base, region.bytes);
  }
  if (r != CUDA_SUCCESS) {
    region.unmapped = map_scratch(region, base, region.bytes) != CUDA_SUCCESS;  // back on scratch, addresses valid
    release_handles(fresh);
    return r;
  }
  region.chunks = std::move(fresh);
  if (on_device) *on_device = placed;
  return CUDA_SUCCESS;
}

bool KvArena::release_scratch() {
  for (const auto& [base, region] : regions_)
    if (!region.unmapped && !region.chunks.empty() && !region.chunks.front().handle) return false;  // on scratch
  // Unmapped everywhere once no region is on it, so a release frees the memory at once.
  for (CUmemGenericAllocationHandle* h : {&scratch_, &granule_scratch_}) {
    if (*h && driver_.release(*h) != CUDA_SUCCESS) release_later_.push_back(*h);
    *h = 0;
  }
  return true;
}

bool KvArena::contains(CUdeviceptr ptr) const { return base_ && ptr >= base_ && ptr < base_ + config_.reserve_bytes; }

bool KvArena::holds(CUdeviceptr ptr) const {
  CUdeviceptr base = 0;
  std::uint64_t bytes = 0;
  return contains(ptr) || adopted_region_of(ptr, &base, &bytes);
}

CUresult KvArena::adopt(CUdeviceptr va, std::uint64_t bytes, CUmemGenericAllocationHandle handle,
                        const CUmemAllocationProp& prop) {
  if (bytes == 0 || handle == 0 || bytes % config_.granularity != 0 || va % config_.granularity != 0)
    return CUDA_ERROR_INVALID_VALUE;
  // Never over another region: the engine's reservation is its own, but a stale record would alias it.
  auto next = regions_.lower_bound(va);
  if (next != regions_.end() && next->first < va + bytes) return CUDA_ERROR_INVALID_VALUE;
  if (next != regions_.begin() && std::prev(next)->first + std::prev(next)->second.bytes > va)
    return CUDA_ERROR_INVALID_VALUE;
  Region region;
  region.bytes = bytes;
  region.adopted = true;
  region.prop = prop;
  region.chunks.push_back(Chunk{handle, prop.location.type == CU_MEM_LOCATION_TYPE_HOST, bytes});
  regions_.emplace(va, std::move(region));
  return CUDA_SUCCESS;
}

void KvArena::record_access(CUdeviceptr base, const CUmemAccessDesc* desc, std::size_t count) {
  auto it = regions_.find(base);
  if (it == regions_.end() || !it->second.adopted || !desc) return;
  std::vector<CUmemAccessDesc>& access = it->second.access;
  for (std::size_t i = 0; i < count; ++i) {
    auto same = std::find_if(access.begin(), access.end(), [&](const CUmemAccessDesc& a) {
      return a.location.type == desc[i].location.type && a.location.id == desc[i].location.id;
    });
    if (same == access.end()) {
      access.push_back(desc[i]);
    } else {
      same->flags = desc[i].flags;
    }
  }
}

CUresult KvArena::unadopt(CUdeviceptr base, CUmemGenericAllocationHandle* kept) {
  auto it = regions_.find(base);
  if (it == regions_.end() || !it->second.adopted) return CUDA_ERROR_INVALID_VALUE;
  Region& region = it->second;
  const CUresult r = region.unmapped ? CUDA_SUCCESS : driver_.unmap(base, region.bytes);
  if (r != CUDA_SUCCESS) return r;  // still mapped: the region stays as it is
  if (kept) *kept = 0;
  if (kept && region.chunks.size() == 1 && region.chunks.front().handle) {
    *kept = region.chunks.front().handle;
    region.chunks.front().handle = 0;
  }
  release_handles(region.chunks);
  regions_.erase(it);
  return CUDA_SUCCESS;
}

CUmemGenericAllocationHandle KvArena::sole_handle(CUdeviceptr base) const {
  auto it = regions_.find(base);
  if (it == regions_.end() || it->second.unmapped || it->second.chunks.size() != 1) return 0;
  return it->second.chunks.front().handle;
}

bool KvArena::adopted(CUdeviceptr base) const {
  auto it = regions_.find(base);
  return it != regions_.end() && it->second.adopted;
}

bool KvArena::adopted_region_of(CUdeviceptr ptr, CUdeviceptr* base, std::uint64_t* bytes) const {
  auto it = regions_.upper_bound(ptr);
  if (it == regions_.begin()) return false;
  --it;
  if (!it->second.adopted || ptr >= it->first + it->second.bytes) return false;
  *base = it->first;
  *bytes = it->second.bytes;
  return true;
}

std::uint64_t KvArena::region_bytes(CUdeviceptr base) const {
  auto it = regions_.find(base);
  return it == regions_.end() ? 0 : it->second.bytes;
}

Backing KvArena::backing(CUdeviceptr base) const {
  auto it = regions_.find(base);
  if (it == regions_.end() || it->second.chunks.empty() || it->second.unmapped) return Backing::none;
  // Operations keep a region all-chunks or all-scratch; the first chunk tells which.
  return it->second.chunks.front().handle ? Backing::chunks : Backing::scratch;
}

std::uint64_t KvArena::host_bytes() const {
  std::uint64_t n = 0;
  for (const auto& [base, region] : regions_)
    for (const Chunk& c : region.chunks) n += c.host ? c.bytes : 0;
  return n;
}

std::uint64_t KvArena::host_bytes(CUdeviceptr base) const {
  auto it = regions_.find(base);
  std::uint64_t n = 0;
  if (it != regions_.end())
    for (const Chunk& c : it->second.chunks) n += c.host ? c.bytes : 0;
  return n;
}

std::size_t KvArena::handles(CUdeviceptr base) const {
  auto it = regions_.find(base);
  std::size_t n = 0;
  if (it != regions_.end())
    for (const Chunk& c : it->second.chunks) n += c.handle ? 1 : 0;
  return n;
}

std::uint64_t KvArena::host_chunks() const {
  std::uint64_t n = 0;
  for (const auto& [base, region] : regions_)
    for (const Chunk& c : region.chunks) n += c.host;
  return n;
}

}  // namespace kvremap::interpose
