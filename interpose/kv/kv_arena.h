// The KV arena: KV allocations in one reserved VA range, backed by device chunks, a shared scratch, or host chunks.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "interpose/driver/driver_api.h"

namespace kvremap::interpose {

// The driver functions the arena uses: the interposer passes the real driver's (real_vmm_functions()),
// tests the simulated driver's. All must be set.
using ArenaDriver = VmmFunctions;

struct ArenaConfig {
  int device = 0;
  std::uint64_t reserve_bytes = 0;  // VA reserved once (default 2x device memory)
  std::uint64_t chunk_bytes = 0;    // one physical handle per chunk; a multiple of the granularity
  std::uint64_t scratch_bytes = 0;  // the aliased scratch handle; divides chunk_bytes
  std::uint64_t granularity = 0;    // VMM minimum granularity: regions and their last chunk round to it
  bool one_handle = false;          // a region is one chunk (its device part and host part one each)
  // What the engine's own allocation would allow a KV connector or NIC, where the device supports it:
  // device handles exportable as POSIX file descriptors (cuMemExportToShareableHandle) and registrable
  // for GPUDirect RDMA. Host handles request neither.
  bool posix_fd_handles = false;
  bool rdma_capable = false;
};

// Where a region's bytes live right now: its own chunks (device or host), or the shared scratch.
enum class Backing : std::uint8_t { chunks, scratch, none };

// Not thread-safe: the interposer serialises calls (KV allocation, deferral and commit happen on
// the engine's thread, outside capture). Every operation either completes or leaves the region as
// it was (the driver failure is returned); no region is ever left without a mapping.
class KvArena {
 public:
  // Reserves the VA range (the scratch is created at the first deferral). Null with *error set on failure.
  static std::unique_ptr<KvArena> create(const ArenaDriver& driver, const ArenaConfig& config, CUresult* error);
  ~KvArena();  // unmaps and releases everything, frees the VA
  KvArena(const KvArena&) = delete;
  KvArena& operator=(const KvArena&) = delete;

  // A new region of `bytes` rounded up to the granularity — whole chunks, and a smaller last chunk
  // for the remainder — backed by device memory, readable and writable. Out of device memory is
  // CUDA_ERROR_OUT_OF_MEMORY with nothing left behind.
  // With `on_host`, backed by host memory (CU_MEM_LOCATION_TYPE_HOST) instead, device-accessible at the
  // region's addresses: serving's allocations the device can no longer hold (docs/kv-deferral.md).
  CUresult allocate(std::uint64_t bytes, CUdeviceptr* out, bool on_host = false);
  // Unmaps and releases a region (any backing) and returns its VA. Unknown address: INVALID_VALUE.
  CUresult release(CUdeviceptr base);

  // Re-backs a device-backed region with scratch aliases and releases its device chunks: every
  // address stays valid (reads return scratch contents, writes land in the shared scratch). The
  // caller has synchronised and no capture is active.
  CUresult defer(CUdeviceptr base);
  // Backs a deferred region again, zero-filled, at the same addresses: its first `device_bytes`
  // (rounded down to the granularity, at most the region) on the device, the rest — the end of the
  // region's VA — on host memory (CU_MEM_LOCATION_TYPE_HOST). Both parts keep the region's chunk
  // grid: the chunk that straddles the boundary becomes a smaller device handle and a host handle,
  // so every handle is a multiple of the granularity. Returns the bytes placed on the device in
  // *on_device.
  CUresult commit(CUdeviceptr base, std::uint64_t device_bytes, std::uint64_t* on_device = nullptr);

  // A region the engine reserved and mapped itself (VMM KV: cuMemCreate, then cuMemMap at `va`, outside the
  // arena's range): `handle`, created with the engine's `prop`, mapped over [va, va + bytes) and owned by
  // the arena from now on. defer() and commit() treat it as their own, except that its commit creates
  // handles with the engine's properties (one for its device part, one for a host tail) and every access
  // grant the engine made on it (record_access) is replayed after each remap. Never moved, never freed
  // as VA: the engine owns its reservation.
  CUresult adopt(CUdeviceptr va, std::uint64_t bytes, CUmemGenericAllocationHandle handle,
                 const CUmemAllocationProp& prop);
  // An access grant the engine made over an adopted region (cuMemSetAccess), kept per location.
  void record_access(CUdeviceptr base, const CUmemAccessDesc* desc, std::size_t count);
  // The engine unmaps an adopted region: whatever backs it now is unmapped. Its one handle, when it has
  // exactly one (not on scratch, no host tail), goes back to the caller in *kept (the engine's handle may
  // be mapped again or released later); any other handle is released. Unknown base: INVALID_VALUE.
  CUresult unadopt(CUdeviceptr base, CUmemGenericAllocationHandle* kept);
  // The one handle backing a region now: 0 on scratch, or when a host tail makes it two.
  CUmemGenericAllocationHandle sole_handle(CUdeviceptr base) const;
  bool adopted(CUdeviceptr base) const;
  // The adopted region holding `ptr`: its base and bytes. False when none does.
  bool adopted_region_of(CUdeviceptr ptr, CUdeviceptr* base, std::uint64_t* bytes) const;

  // Gives the scratch handles back to the device once no region is on them (after the commit); a
  // later deferral creates them again. False, keeping them, while any region still uses them.
  bool release_scratch();

  // Whether a region of `bytes` still fits in the reserved range (allocate's out-of-memory error
  // can mean either a full reservation or a device out of memory).
  bool has_address_space(std::uint64_t bytes) const;

  bool contains(CUdeviceptr ptr) const;  // in the reserved range (adopted regions are not)
  // In the reserved range or in an adopted region.
  bool holds(CUdeviceptr ptr) const;
  // Region size in bytes, or 0 for an unknown base.
  std::uint64_t region_bytes(CUdeviceptr base) const;
  Backing backing(CUdeviceptr base) const;  // none: unknown base, or a mapping lost to a double failure
  std::uint64_t chunk_bytes() const { return config_.chunk_bytes; }
  std::uint64_t granularity() const { return config_.granularity; }
  CUdeviceptr base() const { return base_; }
  std::uint64_t reserved_bytes() const { return config_.reserve_bytes; }
  std::uint64_t host_chunks() const;                 // host handles over all regions
  std::uint64_t host_bytes() const;                  // over all regions
  std::uint64_t host_bytes(CUdeviceptr base) const;  // one region's; 0 for an unknown base
  std::size_t handles(CUdeviceptr base) const;       // one region's physical handles; 0 on scratch or unknown

 private:
  struct Chunk {
    CUmemGenericAllocationHandle handle = 0;  // 0 while the chunk is on scratch
    bool host = false;
    std::uint64_t bytes = 0;
  };
  struct Region {
    std::uint64_t bytes = 0;
    std::vector<Chunk> chunks;
    bool unmapped = false;  // a failure and then its undo failed too: the driver refuses to map
    // Adopted (the engine's own VMM mapping): its handles take the engine's properties, its access the
    // engine's grants, and it is one handle (plus a host tail) whatever the chunk size.
    bool adopted = false;
    CUmemAllocationProp prop{};
    std::vector<CUmemAccessDesc> access;
  };

  KvArena(const ArenaDriver& driver, const ArenaConfig& config) : driver_(driver), config_(config) {}

  // `region`: the region the handle is for (its properties where adopted); nullptr for the scratch.
  CUresult create_handle(const Region* region, bool host, std::uint64_t bytes, CUmemGenericAllocationHandle* handle);
  CUresult grant_access(const Region& region, CUdeviceptr va, std::uint64_t bytes);
  CUresult grant_own_device(CUdeviceptr va, std::uint64_t bytes);  // read-write for the arena's device
  // Maps `handles` one chunk each from `va`, grants access; on failure unmaps what it mapped.
  CUresult map_chunks(const Region& region, CUdeviceptr va, const std::vector<Chunk>& chunks);
  // Maps the scratch repeatedly over [va, va+bytes) and grants access; undoes itself on failure.
  CUresult map_scratch(const Region& region, CUdeviceptr va, std::uint64_t bytes);
  void release_handles(std::vector<Chunk>& chunks);
  // The handles a commit creates for a region of `bytes`: the chunk grid, device below
  // `device_bytes` (a granularity multiple), host from there to the end.
  std::vector<Chunk> commit_layout(const Region& region, std::uint64_t device_bytes) const;
  CUresult find_va(std::uint64_t bytes, CUdeviceptr* out) const;
  // The chunk grid's step for a region of `bytes`.
  std::uint64_t chunk_step(std::uint64_t bytes, bool adopted) const {
    return config_.one_handle || adopted ? bytes : config_.chunk_bytes;
  }
  CUresult ensure_scratch();

  ArenaDriver driver_;
  ArenaConfig config_;
  CUdeviceptr base_ = 0;
  CUmemGenericAllocationHandle scratch_ = 0;
  CUmemGenericAllocationHandle granule_scratch_ = 0;  // covers what is left below scratch_bytes
  std::map<CUdeviceptr, Region> regions_;             // by base address
  // Handles whose cuMemRelease failed: retried when the arena goes, so a transient failure leaks nothing.
  std::vector<CUmemGenericAllocationHandle> release_later_;
};

}  // namespace kvremap::interpose
