// A device's KV arena, reserved at its first KV placement after the checks only the device can make.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "interpose/base/library.h"
#include "interpose/driver/driver_api.h"
#include "interpose/kv/kv_arena.h"
#include "interpose/kv/kv_manager.h"
#include "interpose/kv/kv_state.h"
#include "interpose/trace/kv_events.h"
#include "interpose/track/tracker.h"
#include "policy/units.h"

namespace kvremap::interpose::kv_internal {
namespace {

// A configuration the device refuses: one line, then KV stays in ordinary allocations, or with
// KVREMAP_STRICT=1 the process stops as at load.
void refuse_arena(DeviceKv& d, const std::string& problem) {
  std::fprintf(stderr, "%s\n", problem.c_str());
  if (options().strict) {
    std::fprintf(stderr, "kvremap: exiting because KVREMAP_STRICT=1 and the configuration does not fit device %d\n",
                 d.device);
    finish("configuration problem");
    std::_Exit(1);
  }
  d.arena_failed = true;
  kv_event([&] { trace_events::kv_arena_refused(d.device, problem); });
}

}  // namespace

bool make_arena(DeviceKv& d) {
  if (d.arena) return true;
  if (d.arena_failed) return false;
  const ArenaDriver drv = real_vmm_functions();
  const std::uint64_t granule = real_vmm_granularity(d.device);
  const policy::Options& o = options();
  // The settings only the device can check: refused with one line before the driver sees them, as a
  // bad value is at load (a driver error code would name no variable).
  const std::string problem = policy::device_option_problem(o, d.device, granule, real_device_total(d.device));
  if (!problem.empty()) {
    refuse_arena(d, problem);
    return false;
  }
  ArenaConfig c;
  c.granularity = granule;
  c.device = d.device;
  c.chunk_bytes = o.chunk_bytes;
  c.one_handle = o.kv_one_handle;
  c.scratch_bytes = o.scratch_bytes;
  c.reserve_bytes = o.arena_bytes ? o.arena_bytes : 2 * real_device_total(d.device);
  // Probed once per device: a KV connector registers (NIXL, Mooncake) or exports (a POSIX fd) the KV range
  // as it would the engine's own allocation (ENGINES-2026.md finding 9).
  c.posix_fd_handles =
      real_device_attribute(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, d.device) == 1;
  c.rdma_capable = real_device_attribute(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, d.device) == 1;
  if (!drv.complete()) {
    d.arena_failed = true;
    log().error(
        "device {}: KV arena unavailable: the driver lacks virtual memory management functions; KV stays in "
        "ordinary allocations",
        d.device);
    return false;
  }
  CUresult error = CUDA_ERROR_INVALID_VALUE;
  const std::uint64_t requested = c.reserve_bytes;
  d.arena = KvArena::create(drv, c, &error);
  // The default size (twice the device's memory) may not fit beside the engine's own reservations (PyTorch's
  // expandable segments reserve 1.125 × the device's memory per stream and pool): then only what a KV cache
  // placed from now on can need, the device's free memory, so the address space left stays the engine's.
  std::size_t free_bytes = 0, total = 0;
  if (!d.arena && error == CUDA_ERROR_OUT_OF_MEMORY && o.arena_bytes == 0 && real_memory_info(&free_bytes, &total) &&
      free_bytes > 0 && free_bytes < requested) {
    const CUresult first_error = error;
    c.reserve_bytes = (free_bytes + granule - 1) / granule * granule;
    d.arena = KvArena::create(drv, c, &error);
    if (d.arena)
      log().warn(
          "device {}: reserving {} of address space for the KV arena (twice the device's memory) failed with driver "
          "error {} ({}); the arena reserves {} instead, the device's free memory: what a KV cache placed from now on "
          "can need (set KVREMAP_ARENA_BYTES to choose the size)",
          d.device, policy::format_bytes(requested), static_cast<int>(first_error), real_error_name(first_error),
          policy::format_bytes(d.arena->reserved_bytes()));
  }
  if (!d.arena) {
    refuse_arena(d,
                 fmt::format("kvremap: device {}: reserving {} of address space for the KV arena failed with "
                             "driver error {} (KVREMAP_ARENA_BYTES={}{}, KVREMAP_CHUNK_BYTES={}): set "
                             "KVREMAP_ARENA_BYTES to a smaller size; KV stays in ordinary allocations",
                             d.device, policy::format_bytes(c.reserve_bytes), static_cast<int>(error),
                             o.arena_bytes ? policy::format_bytes(o.arena_bytes) : "0",
                             o.arena_bytes ? "" : ": twice the device's memory", policy::format_bytes(c.chunk_bytes)));
    return false;
  }
  kv_detail::g_any_arena.store(true);
  kv_event([&] {
    trace_events::kv_arena_reserved({.device = d.device,
                                     .base = d.arena->base(),
                                     .reserved_bytes = d.arena->reserved_bytes(),
                                     .chunk_bytes = c.chunk_bytes,
                                     .one_handle = c.one_handle,
                                     .granularity = granule,
                                     .posix_fd_handles = c.posix_fd_handles,
                                     .rdma_capable = c.rdma_capable,
                                     .requested_bytes = requested});
  });
  return true;
}

}  // namespace kvremap::interpose::kv_internal
