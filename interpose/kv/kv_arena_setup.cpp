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

bool make_arena(DeviceKv& d) {
  if (d.arena) return true;
  if (d.arena_failed) return false;
  const ArenaDriver drv = real_vmm_functions();
  const std::uint64_t granule = real_vmm_granularity(d.device);
  const policy::Options& o = options();
  // The settings only the device can check: refused with one line, as a bad value is at load.
  std::string problem;
  const std::uint64_t device_total = real_device_total(d.device);
  if (granule != 0 && o.chunk_bytes % granule != 0)
    problem = fmt::format(
        "kvremap: KVREMAP_CHUNK_BYTES={} is not a multiple of device {}'s VMM granularity ({}): use "
        "a multiple such as {}",
        policy::format_bytes(o.chunk_bytes), d.device, policy::format_bytes(granule),
        policy::format_bytes((o.chunk_bytes / granule + 1) * granule));
  else if (device_total != 0 && o.headroom_bytes >= device_total)
    problem = fmt::format(
        "kvremap: KVREMAP_HEADROOM={} is not below device {}'s memory ({}): use a headroom such as "
        "1GiB",
        policy::format_bytes(o.headroom_bytes), d.device, policy::format_bytes(device_total));
  if (!problem.empty()) {
    std::fprintf(stderr, "%s\n", problem.c_str());
    if (o.strict) {
      finish("configuration problem");
      std::_Exit(1);
    }
    d.arena_failed = true;
    kv_event([&] { trace_events::kv_arena_refused(d.device, problem); });
    return false;
  }
  ArenaConfig c;
  c.granularity = granule;
  c.device = d.device;
  c.chunk_bytes = o.chunk_bytes;
  c.one_handle = o.kv_one_handle;
  c.scratch_bytes = o.scratch_bytes;
  c.reserve_bytes = o.arena_bytes ? o.arena_bytes : 2 * real_device_total(d.device);
  CUresult error = CUDA_ERROR_INVALID_VALUE;
  if (drv.complete()) d.arena = KvArena::create(drv, c, &error);
  if (!d.arena) {
    d.arena_failed = true;
    log().error(
        "device {}: KV arena unavailable: reserving {} of address space failed with driver error {}: KV stays "
        "in ordinary allocations",
        d.device, policy::format_bytes(c.reserve_bytes), static_cast<int>(error));
    return false;
  }
  kv_detail::g_any_arena.store(true);
  kv_event([&] {
    trace_events::kv_arena_reserved({.device = d.device,
                                     .base = d.arena->base(),
                                     .reserved_bytes = d.arena->reserved_bytes(),
                                     .chunk_bytes = c.chunk_bytes,
                                     .one_handle = c.one_handle,
                                     .granularity = granule});
  });
  return true;
}

}  // namespace kvremap::interpose::kv_internal
