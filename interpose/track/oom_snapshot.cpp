// Out-of-memory snapshots: the live bytes by category and the top callers at the first failure per phase.
#include "interpose/track/oom_snapshot.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "interpose/base/process_object.h"
#include "interpose/trace/events.h"
#include "interpose/track/caller.h"
#include "interpose/track/tracker.h"
#include "interpose/track/track_events.h"
#include "interpose/track/tracking_state.h"

namespace kvremap::interpose {
namespace {

using namespace tracker_detail;

// The KV layer's serving out-of-memory hook (set_out_of_memory_hook).
constinit std::atomic<void (*)(std::uint64_t, int)> g_out_of_memory_hook{nullptr};

// How many callers a snapshot names; the rest are summed.
constexpr std::size_t kTopCallers = 8;

struct HeldBy {
  int device = 0;
  std::uint64_t bytes = 0;
  std::string caller;
};

// Heap-allocated and never destroyed: hooks may run during and after exit. A forked child gets a
// fresh one (its parent's lock may be held by a thread that does not exist in the child).
struct Registry {
  std::mutex lock;
  std::map<std::pair<int, std::uint64_t>, HeldBy> held;
};
constinit ProcessObject<Registry> g_registry;

Registry& registry() { return g_registry.get(); }

using trace_events::CallerBytes;

std::vector<CallerBytes> callers_on(int device) {
  std::map<std::string, CallerBytes> by_caller;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> guard(r.lock);
    for (const auto& [key, h] : r.held) {
      if (h.device != device) continue;
      CallerBytes& c = by_caller[h.caller];
      c.caller = h.caller;
      c.bytes += h.bytes;
      ++c.allocations;
    }
  }
  std::vector<CallerBytes> out;
  for (auto& [name, c] : by_caller) out.push_back(std::move(c));
  std::sort(out.begin(), out.end(), [](const CallerBytes& a, const CallerBytes& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.caller < b.caller;
  });
  return out;
}

void write_snapshot(State& st, int device, std::uint64_t bytes, const char* api, void* return_address) {
  DeviceStats& d = st.devices[static_cast<std::size_t>(device)];
  const std::uint8_t phase = d.phase_now.load(std::memory_order_relaxed);
  const std::uint32_t bit = 1u << (phase % 32);
  if (d.oom_phases.fetch_or(bit, std::memory_order_relaxed) & bit) return;  // once per phase
  trace_events::OomSnapshot snapshot;
  snapshot.device = device;
  snapshot.phase = static_cast<policy::Phase>(phase);
  snapshot.api = api;
  snapshot.requested_bytes = bytes;
  const std::string caller = caller_object(return_address);
  snapshot.caller = caller;
  if (std::uint64_t free_bytes = 0; free_device_bytes(&free_bytes)) snapshot.device_free_bytes = free_bytes;
  for (std::size_t i = 0; i < kCategories; ++i)
    snapshot.live_bytes[i] = static_cast<std::uint64_t>(std::max<std::int64_t>(0, d.categories[i].live.load()));
  snapshot.top_callers = callers_on(device);
  if (snapshot.top_callers.size() > kTopCallers) snapshot.top_callers.resize(kTopCallers);
  trace_events::oom_snapshot(snapshot);
  emit_counter(st, device, true, ticks());
}

}  // namespace

void note_caller(int kind, std::uint64_t key, int device, std::uint64_t bytes, const std::string& caller) {
  Registry& r = registry();
  std::lock_guard<std::mutex> guard(r.lock);
  r.held[{kind, key}] = HeldBy{device, bytes, caller};
}

void forget_caller(int kind, std::uint64_t key) {
  Registry& r = registry();
  std::lock_guard<std::mutex> guard(r.lock);
  r.held.erase({kind, key});
}

void set_out_of_memory_hook(void (*hook)(std::uint64_t bytes, int device_hint)) {
  g_out_of_memory_hook.store(hook, std::memory_order_release);
}

void on_out_of_memory(std::uint64_t bytes, const char* api, void* return_address, int device_hint) {
  if (!tracking()) return;
  if (void (*hook)(std::uint64_t, int) = g_out_of_memory_hook.load(std::memory_order_acquire)) hook(bytes, device_hint);
  if (!trace().is_open()) return;
  try {
    State& st = S();
    const int device = device_hint >= 0 ? device_index(device_hint) : tracked_device_now();
    see_device(st, device);
    write_snapshot(st, device, bytes, api, return_address);
  } catch (...) {
    // A snapshot that cannot be written (out of host memory too) costs the snapshot, not the engine.
  }
}

void oom_child_after_fork() { g_registry.replace(nullptr); }

}  // namespace kvremap::interpose
