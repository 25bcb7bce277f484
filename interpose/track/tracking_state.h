// Tracking state shared by the tracker, its trace events and the exit handlers (internal to interpose/).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "interpose/base/device_index.h"
#include "interpose/trace/events.h"
#include "interpose/base/hot_path.h"
#include "interpose/base/process_object.h"
#include "interpose/track/live_map.h"
#include "interpose/base/thread_hot.h"
#include "interpose/trace/trace_writer.h"
#include "policy/events.h"
#include "policy/phases.h"

namespace kvremap::interpose::tracker_detail {

using policy::Category;

constexpr std::size_t kCategories = policy::kCategoryCount;
constexpr std::array<Category, kCategories> kAllCategories{Category::kv,     Category::graph_pool, Category::graph_exec,
                                                           Category::module, Category::async_pool, Category::vmm,
                                                           Category::other};
// Counter events for one device at most once a millisecond, plus at every checkpoint, phase change
// and exit.
constexpr std::uint64_t kCounterIntervalMs = 1;

// One cache line each: an allocation writes its category's line and no other.
struct alignas(64) CategoryStats {
  std::atomic<std::int64_t> live{0};
  std::atomic<std::int64_t> peak{0};
  std::atomic<std::uint64_t> peak_ts_ns{0};
  std::atomic<std::uint64_t> allocated{0};
  std::atomic<std::uint64_t> allocations{0};
  std::atomic<std::uint64_t> frees{0};
  // Highest live bytes since the KV burst ended (post_kv_from set): what autotuning, graph pools,
  // graph execs and modules really needed after the engine sized its KV cache.
  std::atomic<std::int64_t> post_kv_peak{0};
  std::atomic<std::int64_t> post_kv_start{0};  // live bytes when the KV burst ended
};

// Laid out by cache line for the allocation path, which runs right after the driver's system calls
// have evicted most of the caches: it reads one line of flags, writes one line of sums and its
// category's line (and reads the kv category's), where it touched nine lines before.
struct DeviceStats {
  // Read by every allocation, written seldom.
  alignas(64) std::atomic<bool> seen{false};
  std::atomic<bool> post_kv{false};
  std::atomic<bool> post_kv_combined{false};  // post_kv_combined_peak kept: from the KV burst's end to the commit
  // !PhaseTracker::needs_each_allocation(): when true, allocations only add their size to
  // pending_alloc_bytes, folded in before the device's next event.
  std::atomic<bool> sum_allocations{false};
  std::atomic<std::uint8_t> phase_now{0};            // the phase each allocation event is stamped with
  std::atomic<std::uint64_t> next_counter_ticks{0};  // throttled counter samples wait until then
  // The most `other` bytes live since the last memory query; at each query, how far above what is
  // live then that went (memory that came and went); frozen when the KV burst starts.
  std::atomic<std::int64_t> other_max_since_query{0};
  // Written by every summed allocation (and kernel launch).
  alignas(64) std::atomic<std::uint64_t> pending_alloc_bytes{0};
  std::atomic<std::uint64_t> pending_alloc_ticks{0};
  // Kernel launches not yet shown to the phase tracker; fed in order before the device's next event.
  std::atomic<std::uint32_t> pending_launches{0};
  std::array<CategoryStats, kCategories> categories;
  // Since the KV burst ended (post_kv): the most bytes of every category but kv live at one time, and the
  // live bytes then — what a start without kvremap needed at once beside its KV cache.
  alignas(64) std::atomic<std::int64_t> post_kv_combined_peak{0};
  std::atomic<std::int64_t> post_kv_combined_start{0};
  std::atomic<std::uint64_t> total{0};
  std::atomic<std::uint64_t> last_transient_peak{0};
  // The largest transient measured at any query of the profiling phase: engines that estimate graph
  // memory query again after the profiling forward, which must not hide its activations.
  std::atomic<std::uint64_t> profiling_transient_max{0};
  std::atomic<std::uint64_t> profiling_peak{0};
  // Free memory the engine was told at its last query before the KV burst: the one it sized from.
  std::atomic<std::uint64_t> sizing_free{0};
  // That query's index among the process's memory queries (-1: none yet), its phase, the driver's free.
  std::atomic<std::int64_t> sizing_index{-1};
  std::atomic<std::uint8_t> sizing_phase{0};
  std::atomic<std::uint64_t> sizing_driver_free{0};
  // What the process held beside KV at that query (live_beside_kv).
  std::atomic<std::int64_t> sizing_beside_kv{0};
  // State::copied_to_device at this device's previous memory query.
  std::atomic<std::uint64_t> copied_at_query{0};
  // Where the KV cache kvremap placed lies (set_kv_placement): its bytes on the scratch, the scratch's own
  // device memory, its bytes on host memory; kv_placed from the first placement on.
  std::atomic<bool> kv_placed{false};
  std::atomic<std::uint64_t> kv_on_scratch{0};
  std::atomic<std::uint64_t> kv_scratch{0};
  std::atomic<std::uint64_t> kv_on_host{0};
  // Phases (bit per policy::Phase) whose first out-of-memory error has been snapshotted.
  std::atomic<std::uint32_t> oom_phases{0};
};

// Live bytes of every category but kv: what the engine holds beside its KV cache.
inline std::int64_t live_beside_kv(const DeviceStats& d) {
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < kCategories; ++i)
    if (kAllCategories[i] != policy::Category::kv) sum += d.categories[i].live.load(std::memory_order_relaxed);
  return sum;
}

// Captures open on the calling thread's streams. Not a plain thread-local count: a relaxed capture
// may be ended by another thread, which must close it for the thread that began it. Allocated at a
// thread's first capture; freed when the thread has ended and no capture it began is still open
// (a capture may outlive the thread that began it).
struct OwnCaptures {
  std::atomic<int> open{0};
  std::atomic<int> refs{1};  // the beginning thread's, and one per ActiveCapture naming it
};

struct ActiveCapture {
  std::uint64_t stream = 0;
  std::uint64_t id = 0;
  int mode = 0;
  int tid = 0;
  std::uint64_t begin_ns = 0;  // trace time, fenced on the capturing thread's track
  std::uint64_t allocated = 0;
  OwnCaptures* owner = nullptr;  // the beginning thread's
};

// Everything below is heap-allocated and never destroyed: hooks may run during and after exit.
struct State {
  // In a forked child, the parent's state, kept reachable but never used or destroyed: its mutex
  // may have been held by another thread at the fork.
  State* forked_from = nullptr;
  std::atomic<bool> trace_opened{false};
  std::atomic<int> global_captures{0};  // beside trace_opened: both are read by every allocation
  std::once_flag open_once;
  std::array<DeviceStats, kMaxDevices> devices;
  LiveMap allocations;  // device pointers (cuMemAlloc family, async)
  LiveMap handles;      // VMM handles
  LiveMap execs;        // graph execs: bytes consumed at instantiation
  LiveMap modules;      // modules and libraries: bytes consumed at load

  std::mutex lock;  // captures, checkpoints, phase trackers
  std::vector<ActiveCapture> captures;
  std::uint64_t next_capture_id = 1;
  std::vector<trace_events::MemoryQuery> checkpoints;  // every memory query, for the summary
  std::array<std::optional<policy::PhaseTracker>, kMaxDevices> phases;
  std::atomic<bool> all_serving{false};

  std::atomic<std::uint64_t> capture_count{0};
  std::atomic<std::uint64_t> graph_launches{0};
  std::atomic<std::uint64_t> kernel_launches{0};
  // Bytes copied into device memory by 1D copies while loading (the weights rule of policy/phases.h).
  std::atomic<std::uint64_t> copied_to_device{0};
  std::atomic<std::uint64_t> module_loads{0};
};

// A forked child swaps in a fresh state (tracker_child_after_fork).
inline constinit ProcessObject<State> g_state;
[[gnu::always_inline]] inline State& S() { return g_state.get(); }
// Whether a capture is open on one of the calling thread's streams (its OwnCaptures, in t_hot).
inline bool own_capture_open() {
  const OwnCaptures* c = t_hot.own_captures;
  return KVREMAP_UNLIKELY(c != nullptr) && c->open.load(std::memory_order_relaxed) > 0;
}

inline std::size_t index_of(Category c) { return static_cast<std::size_t>(c); }

}  // namespace kvremap::interpose::tracker_detail
