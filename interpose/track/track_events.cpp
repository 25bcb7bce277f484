// What the tracker samples for its trace events: first sight of a device, counter samples, the summary's figures.
#include "interpose/track/track_events.h"

#include <algorithm>
#include <mutex>

#include "interpose/driver/driver_api.h"
#include "interpose/trace/events.h"
#include "interpose/trace/trace_writer.h"
#include "interpose/track/tracker.h"

namespace kvremap::interpose::tracker_detail {

void first_sight_of_device(int device) {
  DeviceStats& d = S().devices[static_cast<std::size_t>(device)];
  if (d.seen.exchange(true)) return;
  const std::uint64_t total = real_device_total(device);
  d.total.store(total);
  trace_events::device_seen(device, total);
}

void emit_counter(int device, bool force) { emit_counter(S(), device, force, ticks()); }

void emit_counter_sample(int device, bool force, std::uint64_t now_ticks) {
  DeviceStats& d = S().devices[static_cast<std::size_t>(device)];
  std::uint64_t next = d.next_counter_ticks.load(std::memory_order_relaxed);
  if (!force && now_ticks < next) return;
  // One thread takes each throttled slot; forced samples (checkpoints, phase changes) always go.
  if (!d.next_counter_ticks.compare_exchange_strong(next, now_ticks + kCounterIntervalMs * ticks_per_ms()) && !force)
    return;
  if (!trace().is_open()) return;
  // Records like the allocations': formatted when the buffer is written out.
  std::uint64_t live[kCounterWords] = {};
  static_assert(kCategories <= kCounterKvReserved);
  for (std::size_t i = 0; i < kCategories; ++i)
    live[i] = static_cast<std::uint64_t>(std::max<std::int64_t>(0, d.categories[i].live.load()));
  if (d.kv_placed.load(std::memory_order_relaxed)) {
    // The KV category counts what the engine sees; the device holds only its part on the device, and the
    // scratch under the deferred part. The KV counter says where all of it lies.
    constexpr std::size_t kv = static_cast<std::size_t>(policy::Category::kv);
    const std::uint64_t reserved = live[kv];
    const std::uint64_t host = std::min(reserved, d.kv_on_host.load(std::memory_order_relaxed));
    const std::uint64_t scratch = std::min(reserved - host, d.kv_on_scratch.load(std::memory_order_relaxed));
    live[kCounterKvReserved] = reserved;
    live[kCounterKvDevice] = reserved - host - scratch;
    live[kCounterKvScratch] = scratch;
    live[kCounterKvHost] = host;
    live[kCounterKvPlaced] = 1;
    live[kv] = reserved - host - scratch + (scratch > 0 ? d.kv_scratch.load(std::memory_order_relaxed) : 0);
  }
  trace().hot_counter(now_ticks, device, live);
}

void emit_all_counters() {
  for (int d = 0; d < kMaxDevices; ++d)
    if (S().devices[static_cast<std::size_t>(d)].seen.load()) emit_counter(d, true);
}

std::string summary_json(const char* reason, int hooks_in_flight) {
  trace_events::Summary s;
  s.exit = reason;
  for (int d = 0; d < kMaxDevices; ++d) {
    const DeviceStats& dev = S().devices[static_cast<std::size_t>(d)];
    if (!dev.seen.load()) continue;
    trace_events::DeviceSummary& out = s.devices.emplace_back();
    out.device = d;
    out.total_bytes = dev.total.load();
    for (std::size_t i = 0; i < kCategories; ++i) {
      const CategoryStats& c = dev.categories[i];
      out.categories[i] = {c.live.load(), c.peak.load(), c.peak_ts_ns.load(), c.allocated.load(),
                           c.allocations.load(), c.frees.load()};
    }
  }
  {
    std::lock_guard<std::mutex> g(S().lock);
    s.checkpoints = S().checkpoints;
  }
  s.captures = S().capture_count.load();
  s.graph_launches = S().graph_launches.load();
  s.kernel_launches = S().kernel_launches.load();
  s.module_loads = S().module_loads.load();
  s.routed_lookups = routed_lookups();
  s.hooks_in_flight = static_cast<std::uint64_t>(hooks_in_flight);
  return trace_events::summary(s);
}

}  // namespace kvremap::interpose::tracker_detail

namespace kvremap::interpose {
namespace {
constinit std::atomic<std::uint64_t> g_routed_lookups{0};
}  // namespace

std::uint64_t routed_lookups() { return g_routed_lookups.load(std::memory_order_relaxed); }
void count_routed_lookup() { g_routed_lookups.fetch_add(1, std::memory_order_relaxed); }

}  // namespace kvremap::interpose
