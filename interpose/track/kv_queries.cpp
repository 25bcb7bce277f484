// What the KV manager asks the tracker: the KV window and burst from phase inference, the sizing query, post-KV peaks.
#include <algorithm>
#include <array>
#include <mutex>
#include <optional>
#include <string>

#include "interpose/base/device_index.h"
#include "interpose/track/tracker.h"
#include "interpose/track/tracking_state.h"
#include "policy/events.h"
#include "policy/phases.h"

namespace kvremap::interpose {

using namespace tracker_detail;
using policy::Category;

bool kv_window(int device) {
  std::lock_guard<std::mutex> g(S().lock);
  const auto di = static_cast<std::size_t>(device_index(device));
  const auto& t = S().phases[di];
  // Launches since the last event count: a forward pass that closed the window has run.
  return t && t->kv_window_after(S().devices[di].pending_launches.load(std::memory_order_relaxed));
}

std::uint64_t kv_tensor_bytes(int device) {
  std::lock_guard<std::mutex> g(S().lock);
  const auto& t = S().phases[static_cast<std::size_t>(device_index(device))];
  return t ? t->kv_tensor_bytes() : 0;
}

bool kv_burst_recognised(int device) {
  std::lock_guard<std::mutex> g(S().lock);
  const auto& t = S().phases[static_cast<std::size_t>(device_index(device))];
  return t && t->current() >= policy::Phase::kv_allocation;
}

bool serving_phase(int device) {
  std::lock_guard<std::mutex> g(S().lock);
  const auto& t = S().phases[static_cast<std::size_t>(device_index(device))];
  return t && t->current() == policy::Phase::serving;
}

void start_post_kv_peaks(int device, bool combined) {
  DeviceStats& d = S().devices[static_cast<std::size_t>(device_index(device))];
  for (CategoryStats& c : d.categories) {
    c.post_kv_start.store(c.live.load());
    c.post_kv_peak.store(c.live.load());
  }
  d.post_kv_combined_start.store(live_beside_kv(d));
  d.post_kv_combined_peak.store(live_beside_kv(d));
  d.post_kv_combined.store(combined);
  d.post_kv.store(true);
}

void restart_post_kv_peaks(int device) {
  DeviceStats& d = S().devices[static_cast<std::size_t>(device_index(device))];
  for (CategoryStats& c : d.categories) c.post_kv_peak.store(c.live.load());
  d.post_kv_combined_peak.store(live_beside_kv(d));
}

std::uint64_t post_kv_combined_rise(int device) {
  const DeviceStats& d = S().devices[static_cast<std::size_t>(device_index(device))];
  const std::int64_t rise = d.post_kv_combined_peak.load() - d.post_kv_combined_start.load();
  return rise > 0 ? static_cast<std::uint64_t>(rise) : 0;
}

PostKvNeeds post_kv_needs(int device) {
  const DeviceStats& d = S().devices[static_cast<std::size_t>(device_index(device))];
  PostKvNeeds n;
  for (std::size_t i = 0; i < kCategories; ++i) {
    const CategoryStats& c = d.categories[i];
    const std::int64_t live = c.live.load(), start = c.post_kv_start.load(), peak = c.post_kv_peak.load();
    if (kAllCategories[i] != policy::Category::kv && live > start) n.resident_growth += static_cast<std::uint64_t>(live - start);
    if (peak > live) n.transient += static_cast<std::uint64_t>(peak - live);
  }
  return n;
}

std::uint64_t sizing_free_bytes(int device) {
  return S().devices[static_cast<std::size_t>(device_index(device))].sizing_free.load();
}

std::uint64_t held_since_sizing_bytes(int device) {
  const DeviceStats& d = S().devices[static_cast<std::size_t>(device_index(device))];
  const std::int64_t held = live_beside_kv(d) - d.sizing_beside_kv.load();
  return held > 0 ? static_cast<std::uint64_t>(held) : 0;
}

std::optional<SizingQueryInfo> sizing_query(int device) {
  const DeviceStats& d = S().devices[static_cast<std::size_t>(device_index(device))];
  const std::int64_t index = d.sizing_index.load();
  if (index < 0) return std::nullopt;
  return SizingQueryInfo{static_cast<std::uint64_t>(index), std::string(policy::to_string(
                                                               static_cast<policy::Phase>(d.sizing_phase.load()))),
                         d.sizing_driver_free.load()};
}

UpcomingQuery upcoming_memory_query(int device) {
  const std::size_t i = static_cast<std::size_t>(device_index(device));
  const DeviceStats& d = S().devices[i];
  UpcomingQuery q;
  q.before_kv = !d.post_kv.load() && static_cast<policy::Phase>(d.phase_now.load()) < policy::Phase::kv_allocation;
  std::lock_guard<std::mutex> g(S().lock);
  const auto& tracker = S().phases[i];
  q.index = S().checkpoints.size();
  q.phase = std::string(policy::to_string(tracker ? tracker->current() : policy::Phase::init));
  return q;
}

std::size_t memory_queries_made() {
  std::lock_guard<std::mutex> g(S().lock);
  return S().checkpoints.size();
}

std::array<CategoryWindow, policy::kCategoryCount> post_kv_windows(int device) {
  const DeviceStats& d = S().devices[static_cast<std::size_t>(device_index(device))];
  std::array<CategoryWindow, policy::kCategoryCount> out{};
  for (std::size_t i = 0; i < kCategories; ++i) {
    const CategoryStats& c = d.categories[i];
    out[i] = CategoryWindow{c.post_kv_start.load(), c.post_kv_peak.load(), c.live.load()};
  }
  return out;
}

policy::DeviceAllocationCounts device_allocation_counts(int device) {
  const DeviceStats& d = S().devices[static_cast<std::size_t>(device_index(device))];
  policy::DeviceAllocationCounts out;
  std::int64_t live = 0;
  std::uint64_t allocated = 0;
  for (std::size_t i = 0; i < kCategories; ++i) {
    const CategoryStats& c = d.categories[i];
    out.allocations += c.allocations.load(std::memory_order_relaxed);
    out.frees += c.frees.load(std::memory_order_relaxed);
    allocated += c.allocated.load(std::memory_order_relaxed);
    live += c.live.load(std::memory_order_relaxed);
  }
  // Every byte allocated is live or was freed.
  const std::uint64_t held = live > 0 ? static_cast<std::uint64_t>(live) : 0;
  out.freed_bytes = allocated > held ? allocated - held : 0;
  return out;
}

std::uint64_t profiling_peak_bytes(int device) {
  return S().devices[static_cast<std::size_t>(device_index(device))].profiling_peak.load();
}

bool capture_open() { return own_capture_open() || S().global_captures.load(std::memory_order_relaxed) > 0; }

}  // namespace kvremap::interpose
