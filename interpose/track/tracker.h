// What kvremap observes, in CUDA-neutral terms: allocations by category, queries, captures, graphs, modules.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "interpose/base/hot_path.h"
#include "policy/events.h"
#include "policy/overflow_gate.h"

namespace kvremap::interpose {

// How an allocation was made; the category follows from this and from capture state.
enum class AllocKind { kPlain, kStreamOrdered, kVmmHandle, kKvArena };

// The `api` of the free event written for an allocation whose key the driver handed out again before
// kvremap saw its free (a free made while tracking was off: other threads' frees once the exit began).
inline constexpr const char* kUnseenFreeApi = "unseen free";

// Every on_* function is called by a hook after the real call succeeded, never throws, and does
// nothing once tracking is off. `api` is the name of the function the program called.
// `device`: the caller's device when the hook knows it cheaply (the runtime's cudaGetDevice), or -1
// to ask the driver for the current context's device.
void on_alloc(std::uint64_t ptr, std::uint64_t bytes, AllocKind kind, const char* api, void* return_address,
              int device = -1);
// Returns false when the pointer/handle was not tracked (e.g. allocated before tracking started).
// For frees kvremap itself performs; a hook forwarding the program's free uses tracked_free.
bool on_free(std::uint64_t ptr, AllocKind kind, const char* api);

// The kinds of tracked objects that hold device memory until the program releases them.
enum class Held : std::uint8_t { kAllocation, kVmmHandle, kGraphExec, kModule };

// What a release took out of tracking before its real call (see tracked_free).
struct FreeTicket {
  std::uint64_t key = 0;
  std::uint64_t bytes = 0;
  int device = 0;
  std::uint8_t category = 0;
  Held held = Held::kAllocation;
  bool tracked = false;
};
FreeTicket begin_free(std::uint64_t key, Held held);
// `ok`: the real call succeeded, so the release is accounted and traced; otherwise the entry goes back.
void end_free(const FreeTicket& ticket, bool ok, const char* api);

// Runs a release hook's real call (a free, cuMemRelease, a graph exec's destruction, a module
// unload) with the object's entry already out of the live map. Once the driver has released an
// address or handle, another thread may get it back at once and record it; taking ours out
// afterwards would take that thread's entry instead (and lose its release).
template <typename Result, typename Call>
Result tracked_free(std::uint64_t key, Held held, const char* api, Result success, Call&& call) {
  const FreeTicket ticket = begin_free(key, held);
  const Result r = call();
  end_free(ticket, r == success, api);
  return r;
}

void on_memory_query(const char* api, std::size_t driver_free, std::size_t driver_total, std::size_t returned_free,
                     std::size_t returned_total);

// mode: 0 global, 1 thread-local, 2 relaxed (the CUstreamCaptureMode values).
void on_capture_begin(std::uint64_t stream, int mode);
void on_capture_end(std::uint64_t stream, bool ok);

// Free device memory right now, for measuring what an instantiation or a module load consumed.
// Returns false when it cannot be measured.
bool free_device_bytes(std::uint64_t* free_bytes);
void on_graph_instantiate(std::uint64_t exec, std::uint64_t bytes, const char* api);
void on_graph_launch();
void on_kernel_launch();
// A 1D copy of `bytes` into memory addressed by a device pointer (weights arrive so; policy/phases.h).
void on_copy_into_device(std::uint64_t bytes);
void on_module_load(std::uint64_t handle, std::uint64_t bytes, const char* api);

// What the KV manager needs from phase inference, for `device`.
bool kv_window(int device);                 // an allocation now may be part of the KV cache
std::uint64_t kv_tensor_bytes(int device);  // size of each tensor of the recognised KV burst, or 0
bool kv_burst_recognised(int device);       // phase is kv_allocation or later
bool serving_phase(int device);             // phase inference says the device is serving
// Every KV tensor of the device's burst was freed before its commit: phase inference looks for the KV
// burst again (policy::PhaseTracker::rearm_kv).
void rearm_kv_recognition(int device);
bool capture_open();  // any capture this thread or a global one is open
// The activation peak of the engine's profiling pass (its allocations above what was live at the
// query before it), measured at the query that ended it; 0 if none was seen.
std::uint64_t profiling_peak_bytes(int device);
// From now on, per-category peaks are also kept since this point (the end of the KV burst, later the
// commit); post_kv_windows reads them.
// With `combined`, the peak of every category but kv together is kept as well (post_kv_combined_rise),
// which only the commit reads: the call at the commit passes false, so serving's allocations skip it.
void start_post_kv_peaks(int device, bool combined);
// Since start_post_kv_peaks: what stays resident beyond the KV cache (every other category's live
// bytes above their level then), and what came and went (each category's peak above its live now).
struct PostKvNeeds {
  std::uint64_t resident_growth = 0;
  std::uint64_t transient = 0;
};
PostKvNeeds post_kv_needs(int device);
// Since start_post_kv_peaks(device, true): how far every category but kv together rose above its level then, at its
// highest (one moment, unlike the per-category peaks, which may fall at different times).
std::uint64_t post_kv_combined_rise(int device);
// The free memory the engine's last query before its KV burst returned: what it sized the KV cache from.
std::uint64_t sizing_free_bytes(int device);
// What the process allocated beside its KV cache since that query and still holds (every category but kv,
// above its level then): what an engine's own reserve pays for once its KV cache is sized (SGLang's
// req_to_token table before its KV pool, then graphs, workspaces, modules).
std::uint64_t held_since_sizing_bytes(int device);
// The memory query the engine sized its KV cache from: its index among the process's memory queries,
// the phase it fell in, and the free bytes the driver reported. Nothing when none was seen.
struct SizingQueryInfo {
  std::uint64_t index = 0;
  std::string phase;
  std::uint64_t driver_free = 0;
};
std::optional<SizingQueryInfo> sizing_query(int device);
// The memory query about to be recorded on `device` (called before on_memory_query): its index and
// phase as sizing_query() would name them, and whether it comes before the KV burst (only such a
// query can be the sizing query).
struct UpcomingQuery {
  std::uint64_t index = 0;
  std::string phase;
  bool before_kv = false;
};
UpcomingQuery upcoming_memory_query(int device);
// How many memory queries (cudaMemGetInfo, cuMemGetInfo) this process has made, on every device.
std::size_t memory_queries_made();
// Per category (policy::Category's order), since start_post_kv_peaks: live bytes then, the peak since,
// and live bytes now.
struct CategoryWindow {
  std::int64_t at_start = 0;
  std::int64_t peak = 0;
  std::int64_t live = 0;
};
std::array<CategoryWindow, policy::kCategoryCount> post_kv_windows(int device);
// Since tracking started on `device`: its successful allocations, its frees and the bytes they gave back, of
// every category (what the serving overflow's gate compares across a refusal and its retry).
policy::DeviceAllocationCounts device_allocation_counts(int device);
// Moves a live allocation's bytes to another category (KV arena placements that are not KV).
void reclassify(std::uint64_t ptr, bool to_kv);
// Where the KV cache kvremap placed on `device` lies now, for the trace's counters (docs/trace-format.md, Counters):
// bytes of it deferred onto the scratch, the scratch's own device memory while any is, bytes on host memory. A change
// samples the device's counters at once.
void set_kv_placement(int device, std::uint64_t on_scratch, std::uint64_t scratch_bytes, std::uint64_t on_host);
// Moves a live VMM handle (cuMemCreate) to category `to`: the memory a wake re-creates for a KV tensor is KV.
void reclassify_handle(std::uint64_t handle, policy::Category to);
// The post-KV peaks start again from what is live now, each category's level at the window's start kept: what came
// and went before (a sleep's and wake's memory, while the KV cache was released) is no longer in them.
void restart_post_kv_peaks(int device);
// A KV event: `write` writes it (a function of trace/kv_events.h); the tracker guards it as it does
// its own events and samples every device's counters after it. Outside a CUDA hook, before this
// process's first tracked CUDA call, it is kept for the trace that call opens, and starts nothing.
void kv_event(const std::function<void()>& write);
// Whether tracking has started in this process: at its first tracked CUDA call, a call of either API
// that kvremap hooks and accounts for (an allocation or free of any kind, a memory query, a module or
// library load, a stream capture, a graph instantiation or launch) reaching the real library. Only
// such a process opens a trace, installs its exit handlers and says anything at exit.
bool tracking_started();
int tracked_device_now();

namespace tracker_detail {
// Outside the per-process state so that every hook reads them with two plain loads; a forked child
// clears them (it tracks afresh).
inline constinit std::atomic<bool> g_disabled{false};  // an internal failure turned tracking off
inline constinit std::atomic<bool> g_finished{false};  // the summary has been written (exit, signal)
}  // namespace tracker_detail

// True while tracking is on (nothing failed internally, the process is not exiting).
[[gnu::always_inline]] inline bool tracking() {
  return !tracker_detail::g_disabled.load(std::memory_order_relaxed) &&
         !tracker_detail::g_finished.load(std::memory_order_relaxed);
}

// Writes the summary and closes the trace; `reason` is "atexit", "SIGTERM" or "SIGINT".
void finish(const char* reason);

// How many lookups (cuGetProcAddress, entry points, dlsym on libcuda) were answered with a wrapper:
// the evidence, in the trace summary, that cudart's own driver calls are routed through kvremap.
std::uint64_t routed_lookups();
void count_routed_lookup();

// What to run when tracking starts in a process (process/: the exit and signal handlers), given once
// at load; run at once when tracking has started already.
void set_tracking_start_hook(void (*hook)());

// In a forked child (process/fork.cpp): a fresh state, nothing tracked, the trace opened anew.
void tracker_child_after_fork();

}  // namespace kvremap::interpose
