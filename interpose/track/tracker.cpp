// Tracking: live allocations per category and device, captures, checkpoints and phases, fed by the hooks.
// Over 400 lines on purpose: every hook handler here shares the allocation path's inline helpers
// (record, account_alloc/free, emit_counter, feed_phase), which must stay in this one translation unit
// to inline into the hot path (no LTO; docs/benchmarks.md, pass-through overhead).
#include "interpose/track/tracker.h"

#include <fmt/format.h>
#include <pthread.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "interpose/track/caller.h"
#include "interpose/track/oom_snapshot.h"
#include "interpose/track/track_events.h"
#include "interpose/driver/driver_api.h"
#include "interpose/base/guard.h"
#include "interpose/base/hot_path.h"
#include "interpose/base/process_id.h"
#include "interpose/trace/events.h"
#include "interpose/trace/hot_format.h"
#include "interpose/base/library.h"
#include "interpose/trace/trace_writer.h"
#include "interpose/track/tracking_state.h"
#include "policy/events.h"
#include "policy/phases.h"

namespace kvremap::interpose {
namespace {

using namespace tracker_detail;
using policy::Category;

void disable(const char* why) {
  if (g_disabled.exchange(true)) return;
  log().error("tracking disabled: {}; every call now passes straight through", why);
  try {
    trace_events::tracking_disabled(why);
  } catch (...) {
  }
}

// What the process layer runs when tracking starts (its exit and signal handlers), given at load.
constinit std::atomic<void (*)()> g_tracking_start_hook{nullptr};

[[gnu::noinline]] void start_tracking() {
  std::call_once(S().open_once, [] {
    trace_events::open_trace();
    if (void (*hook)() = g_tracking_start_hook.load(std::memory_order_acquire)) hook();
    S().trace_opened.store(true, std::memory_order_release);
  });
}

inline void ensure_started() {
  if (KVREMAP_UNLIKELY(!S().trace_opened.load(std::memory_order_acquire))) start_tracking();
}

// The phase rules count launches only up to small thresholds, so a long run of launches between two
// other events is fed as at most this many.
constexpr std::uint32_t kMaxLaunchesFed = 1024;

void announce_phase_change(int device, const policy::PhaseChange& change) {
  trace_events::phase_changed(device, change.from, change.to, change.reason);
  emit_all_counters();
  log().info("device {}: phase {} -> {} ({})", device, policy::to_string(change.from), policy::to_string(change.to),
             change.reason);
}

// What the lock-free paths read of the device's phase, after its tracker changed; under S().lock.
void publish_phase(std::size_t di, const policy::PhaseTracker& tracker) {
  S().devices[di].phase_now.store(static_cast<std::uint8_t>(tracker.current()));
  S().devices[di].sum_allocations.store(!tracker.needs_each_allocation(), std::memory_order_relaxed);
}

void feed_phase(int device, policy::EventKind kind) {
  std::optional<policy::PhaseChange> change;
  policy::Phase phase_now{};
  {
    std::lock_guard<std::mutex> g(S().lock);
    auto& tracker = S().phases[static_cast<std::size_t>(device)];
    if (!tracker) tracker.emplace();
    const std::uint64_t t = trace_now_ns();
    const auto tid = static_cast<std::uint64_t>(current_tid());
    const auto di = static_cast<std::size_t>(device);
    if (const std::uint64_t bytes = S().devices[di].pending_alloc_bytes.exchange(0))
      tracker->observe_allocated_bytes(
          bytes, trace_ns_of_ticks(S().devices[di].pending_alloc_ticks.load(std::memory_order_relaxed)));
    const std::uint32_t launches = std::min(S().devices[di].pending_launches.exchange(0), kMaxLaunchesFed);
    for (std::uint32_t i = 0; i < launches && !change; ++i)
      change = tracker->observe(policy::Event{t, tid, device, policy::KernelLaunch{}});
    policy::Event event{t, tid, device, std::move(kind)};
    if (!change) {
      change = tracker->observe(event);
    } else {
      tracker->observe(event);  // a launch changed the phase; the event itself still counts
    }
    phase_now = tracker->current();
    publish_phase(di, *tracker);
    // The KV cache is sized from the query that ended the profiling pass: its transient peak is
    // what serving's forward passes will need again.
    if (change && change->to == policy::Phase::kv_allocation && !S().devices[di].post_kv.load()) {
      DeviceStats& d = S().devices[static_cast<std::size_t>(device)];
      d.profiling_peak.store(std::max(d.last_transient_peak.load(), d.profiling_transient_max.load()));
    }
    if (change && phase_now == policy::Phase::serving) {
      bool all = true;
      for (auto& t : S().phases)
        if (t && t->current() != policy::Phase::serving) all = false;
      S().all_serving.store(all);
    }
  }
  if (change) announce_phase_change(device, *change);
}

// The device of the calling thread's last tracked call (t_hot.last_device): launches are
// attributed to it without a driver query per launch.
KVREMAP_HOT_PATH int tracked_device() {
  t_hot.last_device = only_one_device() ? 0 : device_index(current_device());
  return t_hot.last_device;
}

[[gnu::always_inline]] inline Category category_for(State& st, AllocKind kind) {
  if (KVREMAP_UNLIKELY(own_capture_open() || st.global_captures.load(std::memory_order_relaxed) > 0))
    return Category::graph_pool;
  switch (kind) {
    case AllocKind::kStreamOrdered:
      return Category::async_pool;
    case AllocKind::kVmmHandle:
      return Category::vmm;
    case AllocKind::kKvArena:
      return Category::kv;
    case AllocKind::kPlain:
      break;
  }
  return Category::other;
}

// `now_ticks`: the hook's timestamp (tick_clock.h), or 0 to read the clock here.
[[gnu::always_inline]] inline void account_alloc(State& st, int device, Category c, std::uint64_t bytes,
                                                 std::uint64_t now_ticks = 0) {
  CategoryStats& s = st.devices[static_cast<std::size_t>(device)].categories[index_of(c)];
  const std::int64_t live = s.live.fetch_add(static_cast<std::int64_t>(bytes)) + static_cast<std::int64_t>(bytes);
  s.allocated.fetch_add(bytes, std::memory_order_relaxed);
  s.allocations.fetch_add(1, std::memory_order_relaxed);
  std::int64_t peak = s.peak.load(std::memory_order_relaxed);
  while (KVREMAP_UNLIKELY(live > peak) && !s.peak.compare_exchange_weak(peak, live)) {
  }
  if (KVREMAP_UNLIKELY(live > peak))
    s.peak_ts_ns.store(trace_ns_of_ticks(now_ticks ? now_ticks : ticks()), std::memory_order_relaxed);
  if (st.devices[static_cast<std::size_t>(device)].post_kv.load(std::memory_order_relaxed)) {
    std::int64_t seen = s.post_kv_peak.load(std::memory_order_relaxed);
    while (live > seen && !s.post_kv_peak.compare_exchange_weak(seen, live)) {
    }
    DeviceStats& d = st.devices[static_cast<std::size_t>(device)];
    if (c != Category::kv && d.post_kv_combined.load(std::memory_order_relaxed)) {
      const std::int64_t combined = live_beside_kv(d);
      std::int64_t most = d.post_kv_combined_peak.load(std::memory_order_relaxed);
      while (combined > most && !d.post_kv_combined_peak.compare_exchange_weak(most, combined)) {
      }
    }
  }
  if (KVREMAP_LIKELY(c == Category::other || c == Category::kv)) {
    DeviceStats& d = st.devices[static_cast<std::size_t>(device)];
    const std::int64_t engine_live =
        d.categories[index_of(Category::other)].live.load() + d.categories[index_of(Category::kv)].live.load();
    std::int64_t seen = d.other_max_since_query.load(std::memory_order_relaxed);
    while (KVREMAP_UNLIKELY(engine_live > seen) && !d.other_max_since_query.compare_exchange_weak(seen, engine_live)) {
    }
  }
}

[[gnu::always_inline]] inline void account_free(State& st, int device, Category c, std::uint64_t bytes) {
  CategoryStats& s = st.devices[static_cast<std::size_t>(device)].categories[index_of(c)];
  s.live.fetch_sub(static_cast<std::int64_t>(bytes));
  s.frees.fetch_add(1, std::memory_order_relaxed);
}

void note_capture_allocation(std::uint64_t bytes) {
  std::lock_guard<std::mutex> g(S().lock);
  const int tid = current_tid();
  ActiveCapture* target = nullptr;
  for (ActiveCapture& c : S().captures) {
    if (c.tid == tid) {
      target = &c;
      break;
    }
    if (!target && c.mode == 0) target = &c;
  }
  if (target) target->allocated += bytes;
}

// The `free` event of an allocation released by `api` (its bytes, device and category in `live`), on the
// calling thread's track.
void write_free_record(std::uint64_t key, const Live& live, std::uint8_t category, const char* api,
                       std::uint64_t now) {
  if (!trace().is_open()) return;
  if (KVREMAP_LIKELY(live.bytes <= HotRecord::kMaxBytes)) {
    trace().hot(now, key, api, HotRecord::pack(live.bytes, live.device, kHotFree, category, 0));
  } else {
    trace_events::hot_line(HotRecord{now, key, api, HotRecord::pack(0, live.device, kHotFree, category, 0)}, nullptr,
                           &live.bytes);
  }
}

// Records an object (allocation, exec, module) that holds device memory in `map`.
[[gnu::always_inline]] inline void record(State& st, LiveMap& map, std::uint64_t key, int device, Category c,
                                          std::uint64_t bytes, std::uint64_t now_ticks = 0) {
  // The driver may reuse a key we still hold (its free was not seen: made while tracking was off, as
  // other threads' frees are once the exit has begun): the old record is retired, with a free event of
  // its own, so the events account for every free the counters do.
  if (std::optional<Live> previous = map.put(key, Live{bytes, device, c})) {
    account_free(st, previous->device, previous->category, previous->bytes);
    write_free_record(key, *previous, static_cast<std::uint8_t>(previous->category), kUnseenFreeApi,
                      now_ticks ? now_ticks : ticks());
  }
  account_alloc(st, device, c, bytes, now_ticks);
}

template <typename Body>
[[gnu::always_inline]] inline void guarded(const char* what, Body&& body) {
  if (KVREMAP_UNLIKELY(g_disabled.load(std::memory_order_relaxed))) return;
  try {
    ensure_started();
    body();
  } catch (const std::exception& e) {
    disable(fmt::format("internal error in {}: {}", what, e.what()).c_str());
  } catch (...) {
    disable(what);
  }
}

// Graph execs and modules: driver objects that hold device memory from creation to destruction.
// Returns the device charged.
int held_object_loaded(LiveMap& map, Category c, trace_events::HeldObject kind, std::uint64_t key, std::uint64_t bytes,
                       const char* api) {
  const int device = tracked_device();
  see_device(device);
  record(S(), map, key, device, c, bytes);
  trace_events::held_object_created(kind, api, key, bytes, device);
  emit_counter(device, false);
  return device;
}

// Allocations of every kind live in one map, except VMM handles (a handle is not an address).
Held held_of(AllocKind kind) {
  return KVREMAP_UNLIKELY(kind == AllocKind::kVmmHandle) ? Held::kVmmHandle : Held::kAllocation;
}

[[gnu::always_inline]] inline LiveMap& map_of(State& st, Held held) {
  if (KVREMAP_LIKELY(held == Held::kAllocation)) return st.allocations;  // the hot paths' case
  switch (held) {
    case Held::kVmmHandle:
      return st.handles;
    case Held::kGraphExec:
      return st.execs;
    case Held::kModule:
      return st.modules;
    case Held::kAllocation:
      break;
  }
  return st.allocations;
}

void release_own_captures(void* captures) {
  auto* c = static_cast<OwnCaptures*>(captures);
  if (c && c->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete c;
}

// The calling thread's OwnCaptures, created at its first capture; the thread's reference is
// dropped when it ends (a pthread key's destructor: t_hot itself has none).
OwnCaptures* this_threads_captures() {
  static const pthread_key_t key = [] {
    pthread_key_t k{};
    pthread_key_create(&k, release_own_captures);
    return k;
  }();
  if (!t_hot.own_captures) {
    t_hot.own_captures = new OwnCaptures;
    pthread_setspecific(key, t_hot.own_captures);
  }
  return t_hot.own_captures;
}

}  // namespace

int tracked_device_now() { return tracked_device(); }

namespace {

void reclassify_in(LiveMap& map, std::uint64_t ptr, Category to) {
  State& st = S();
  Live before;
  if (!map.update(ptr, [&](Live& live) {
        before = live;
        live.category = to;
      }))
    return;
  const Category from = before.category;
  if (from == to) return;
  account_free(st, before.device, from, before.bytes);
  account_alloc(st, before.device, to, before.bytes);
  trace_events::reclassified(
      ptr, before.bytes, before.device, from, to,
      static_cast<policy::Phase>(st.devices[static_cast<std::size_t>(before.device)].phase_now.load()));
}

}  // namespace

void reclassify_handle(std::uint64_t handle, Category to) {
  guarded("reclassify_handle", [&] { reclassify_in(S().handles, handle, to); });
}

void reclassify(std::uint64_t ptr, bool to_kv) {
  guarded("reclassify", [&] { reclassify_in(S().allocations, ptr, to_kv ? Category::kv : Category::other); });
}

void set_kv_placement(int device, std::uint64_t on_scratch, std::uint64_t scratch_bytes, std::uint64_t on_host) {
  if (device < 0 || device >= kMaxDevices) return;
  DeviceStats& d = S().devices[static_cast<std::size_t>(device)];
  const bool placed = d.kv_placed.exchange(true, std::memory_order_relaxed);
  const bool changed = d.kv_on_scratch.exchange(on_scratch, std::memory_order_relaxed) != on_scratch;
  const bool scratch_changed = d.kv_scratch.exchange(scratch_bytes, std::memory_order_relaxed) != scratch_bytes;
  const bool host_changed = d.kv_on_host.exchange(on_host, std::memory_order_relaxed) != on_host;
  if ((!placed || changed || scratch_changed || host_changed) && d.seen.load(std::memory_order_relaxed))
    guarded("set_kv_placement", [&] { emit_counter(device, true); });
}

bool tracking_started() { return S().trace_opened.load(std::memory_order_acquire); }

void kv_event(const std::function<void()>& write) {
  // Outside a CUDA hook in a process that has made no tracked CUDA call (the serving port opening in
  // vLLM's API server, which never uses CUDA): the event waits for the trace that the first such call
  // opens (trace_writer.h), and tracking does not start here, so such a process writes no trace.
  if (KVREMAP_UNLIKELY(!tracking_started()) && !inside_hook()) {
    if (g_disabled.load(std::memory_order_relaxed)) return;
    try {
      write();
    } catch (...) {
    }
    return;
  }
  guarded("kv_event", [&] {
    write();
    emit_all_counters();
  });
}

KVREMAP_HOT_PATH void on_alloc(std::uint64_t ptr, std::uint64_t bytes, AllocKind kind, const char* api,
                               void* return_address, int device_hint) {
  // cudaMalloc(0) succeeds with a null pointer: nothing was allocated, and nothing will be freed.
  if (KVREMAP_UNLIKELY(ptr == 0)) return;
  guarded("on_alloc", [&] {
    State& st = S();
    const int device = device_hint >= 0 ? (t_hot.last_device = device_index(device_hint)) : tracked_device();
    see_device(st, device);
    const Category c = category_for(st, kind);
    const std::uint64_t now = ticks();  // the one clock read of this hook
    record(st, map_of(st, held_of(kind)), ptr, device, kind == AllocKind::kKvArena ? Category::kv : c, bytes, now);
    if (KVREMAP_UNLIKELY(c == Category::graph_pool)) note_capture_allocation(bytes);
    if (KVREMAP_LIKELY(trace().is_open())) {
      const std::uint8_t phase = st.devices[static_cast<std::size_t>(device)].phase_now.load(std::memory_order_relaxed);
      const bool fits = bytes <= HotRecord::kMaxBytes;
      const std::uint64_t packed =
          HotRecord::pack(fits ? bytes : 0, device, kHotAlloc, static_cast<std::uint8_t>(c), phase);
      if (KVREMAP_LIKELY(bytes < stack_min_bytes_option() && fits)) {
        trace().hot(now, ptr, api, packed);
      } else {
        // Large allocations name their caller: the record's line, formatted here, plus that string.
        const std::string caller = caller_object(return_address);
        trace_events::hot_line(HotRecord{now, ptr, api, packed}, caller.empty() ? nullptr : caller.c_str(),
                               fits ? nullptr : &bytes);
        note_caller(static_cast<int>(held_of(kind)), ptr, device, bytes, caller);
      }
    }
    emit_counter(st, device, false, now);
    const auto di = static_cast<std::size_t>(device);
    if (KVREMAP_UNLIKELY(!st.devices[di].sum_allocations.load(std::memory_order_relaxed))) {
      feed_phase(device, policy::Alloc{ptr, bytes, c, api});
    } else if (c != Category::graph_pool) {
      // No phase rule looks at this allocation by itself: its size is added up, lock-free.
      st.devices[di].pending_alloc_bytes.fetch_add(bytes, std::memory_order_relaxed);
      st.devices[di].pending_alloc_ticks.store(now, std::memory_order_relaxed);
    }
  });
}

KVREMAP_HOT_PATH FreeTicket begin_free(std::uint64_t key, Held held) {
  FreeTicket ticket;
  ticket.key = key;
  ticket.held = held;
  // Without a state nothing was ever tracked, so none is created here; and a take neither allocates
  // nor throws, so this step needs no guard beyond the off switch.
  State* st = g_state.peek();
  if (KVREMAP_UNLIKELY(!st || g_disabled.load(std::memory_order_relaxed))) return ticket;
  const std::optional<Live> live = map_of(*st, held).take(key);
  if (KVREMAP_UNLIKELY(!live)) return ticket;
  ticket.bytes = live->bytes;
  ticket.device = live->device;
  ticket.category = static_cast<std::uint8_t>(live->category);
  ticket.tracked = true;
  return ticket;
}

KVREMAP_HOT_PATH void end_free(const FreeTicket& ticket, bool ok, const char* api) {
  if (KVREMAP_UNLIKELY(!ticket.tracked)) return;
  guarded("end_free", [&] {
    const Live live{ticket.bytes, ticket.device, static_cast<Category>(ticket.category)};
    State& st = S();
    if (KVREMAP_UNLIKELY(!ok)) {
      // The driver kept the object, so nobody can have been handed its key meanwhile.
      if (std::optional<Live> other = map_of(st, ticket.held).put(ticket.key, live))
        account_free(st, other->device, other->category, other->bytes);
      return;
    }
    account_free(st, live.device, live.category, live.bytes);
    if (KVREMAP_UNLIKELY(live.bytes >= stack_min_bytes_option()))
      forget_caller(static_cast<int>(ticket.held), ticket.key);
    if (KVREMAP_UNLIKELY(ticket.held == Held::kGraphExec)) {
      trace_events::held_object_destroyed(trace_events::HeldObject::graph_exec, api, ticket.key, live.bytes,
                                          live.device);
      emit_counter(live.device, false);
      return;
    }
    if (KVREMAP_UNLIKELY(ticket.held == Held::kModule)) {
      trace_events::held_object_destroyed(trace_events::HeldObject::module, api, ticket.key, live.bytes, live.device);
      emit_counter(live.device, false);
      return;
    }
    const std::uint64_t now = ticks();
    write_free_record(ticket.key, live, ticket.category, api, now);
    emit_counter(st, live.device, false, now);  // frees never move the phase: no tracker call on this hot path
  });
}

void rearm_kv_recognition(int device) {
  guarded("rearm_kv_recognition", [&] {
    std::optional<policy::PhaseChange> change;
    const auto di = static_cast<std::size_t>(device_index(device));
    {
      std::lock_guard<std::mutex> g(S().lock);
      auto& tracker = S().phases[di];
      if (!tracker) return;
      change = tracker->rearm_kv(trace_now_ns());
      publish_phase(di, *tracker);
    }
    if (change) announce_phase_change(static_cast<int>(di), *change);
  });
}

bool on_free(std::uint64_t ptr, AllocKind kind, const char* api) {
  const FreeTicket ticket = begin_free(ptr, held_of(kind));
  end_free(ticket, true, api);
  return ticket.tracked;
}

void on_memory_query(const char* api, std::size_t driver_free, std::size_t driver_total, std::size_t returned_free,
                     std::size_t returned_total) {
  guarded("on_memory_query", [&] {
    const int device = tracked_device();
    see_device(device);
    DeviceStats& d = S().devices[static_cast<std::size_t>(device)];
    // Plain allocations, wherever they were placed (large ones may sit in the KV arena).
    const std::int64_t other_now =
        d.categories[index_of(Category::other)].live.load() + d.categories[index_of(Category::kv)].live.load();
    // What came and went since the previous query: a forward pass's activations (weights stay).
    const std::int64_t transient = d.other_max_since_query.load() - other_now;
    d.last_transient_peak.store(transient > 0 ? static_cast<std::uint64_t>(transient) : 0);
    d.other_max_since_query.store(other_now);
    trace_events::MemoryQuery query;
    {
      std::lock_guard<std::mutex> g(S().lock);
      const auto& tracker = S().phases[static_cast<std::size_t>(device)];
      // The query the engine may size its KV cache from (policy/phases.h, next_query_may_size_kv).
      const bool sizing = !d.post_kv.load() && (tracker ? tracker->next_query_may_size_kv() : true);
      if (sizing) {
        d.sizing_free.store(returned_free);
        d.sizing_index.store(static_cast<std::int64_t>(S().checkpoints.size()));
        d.sizing_phase.store(static_cast<std::uint8_t>(tracker ? tracker->current() : policy::Phase::init));
        d.sizing_driver_free.store(driver_free);
        d.sizing_beside_kv.store(live_beside_kv(d));
      }
      query = {
          S().checkpoints.size(), api,           device,         driver_free,
          driver_total,           returned_free, returned_total, tracker ? tracker->current() : policy::Phase::init,
          trace_now_ns()};
      S().checkpoints.push_back(query);
    }
    trace_events::memory_query(query);
    emit_counter(device, true);
    const std::uint64_t copied_now = S().copied_to_device.load(std::memory_order_relaxed);
    const std::uint64_t copied = copied_now - d.copied_at_query.exchange(copied_now);
    feed_phase(device, policy::MemoryQuery{driver_free, driver_total, returned_free, returned_total, copied});
    // After feed_phase, which shows the tracker the launches since the last event: the query that
    // ends the profiling forward is the one that moves the phase to profiling.
    if (static_cast<policy::Phase>(d.phase_now.load()) == policy::Phase::profiling && transient > 0)
      d.profiling_transient_max.store(
          std::max(d.profiling_transient_max.load(), static_cast<std::uint64_t>(transient)));
  });
}

void on_capture_begin(std::uint64_t stream, int mode) {
  guarded("on_capture_begin", [&] {
    const int device = tracked_device();
    std::uint64_t id = 0;
    // The window is a slice on this thread's track, which allocation lifetimes share.
    const std::uint64_t begin_ns = trace().fence_thread(trace_now_ns());
    OwnCaptures* own = this_threads_captures();
    own->open.fetch_add(1);
    own->refs.fetch_add(1, std::memory_order_relaxed);  // the ActiveCapture's, dropped when it ends
    {
      std::lock_guard<std::mutex> g(S().lock);
      id = S().next_capture_id++;
      S().captures.push_back(ActiveCapture{stream, id, mode, current_tid(), begin_ns, 0, own});
    }
    if (mode == 0) S().global_captures.fetch_add(1);
    S().capture_count.fetch_add(1, std::memory_order_relaxed);
    const policy::CaptureMode m = mode == 0   ? policy::CaptureMode::global
                                  : mode == 1 ? policy::CaptureMode::per_thread
                                              : policy::CaptureMode::relaxed;
    feed_phase(device, policy::CaptureBegin{id, m});
  });
}

void on_capture_end(std::uint64_t stream, bool ok) {
  guarded("on_capture_end", [&] {
    const int device = tracked_device();
    std::optional<ActiveCapture> ended;
    bool interleaved = false;  // another window on the same track began later and is still open
    {
      std::lock_guard<std::mutex> g(S().lock);
      for (auto it = S().captures.begin(); it != S().captures.end(); ++it) {
        if (it->stream == stream) {
          ended = *it;
          S().captures.erase(it);
          break;
        }
      }
      if (ended)
        for (const ActiveCapture& c : S().captures) interleaved |= c.tid == ended->tid && c.begin_ns > ended->begin_ns;
    }
    if (!ended) return;
    if (ended->owner) {
      if (ended->owner->open.load() > 0) ended->owner->open.fetch_sub(1);
      release_own_captures(ended->owner);
    }
    if (ended->mode == 0) S().global_captures.fetch_sub(1);
    const std::uint64_t end_ns = std::max(trace().fence_thread(trace_now_ns(), ended->tid), ended->begin_ns);
    trace_events::capture_ended(
        {ended->id, stream, ended->mode, ok, ended->allocated, ended->tid, ended->begin_ns, end_ns, interleaved});
    feed_phase(device, policy::CaptureEnd{ended->id, ok});
  });
}

bool free_device_bytes(std::uint64_t* free_bytes) {
  std::size_t f = 0, t = 0;
  if (!real_memory_info(&f, &t)) return false;
  *free_bytes = f;
  return true;
}

void on_graph_instantiate(std::uint64_t exec, std::uint64_t bytes, const char* api) {
  guarded("on_graph_instantiate", [&] {
    const int device =
        held_object_loaded(S().execs, Category::graph_exec, trace_events::HeldObject::graph_exec, exec, bytes, api);
    feed_phase(device, policy::GraphInstantiate{bytes});
  });
}

void on_graph_launch() {
  S().graph_launches.fetch_add(1, std::memory_order_relaxed);
  if (S().all_serving.load(std::memory_order_relaxed)) return;
  guarded("on_graph_launch", [&] { feed_phase(tracked_device(), policy::GraphLaunch{}); });
}

void on_kernel_launch() {
  S().kernel_launches.fetch_add(1, std::memory_order_relaxed);
  if (S().all_serving.load(std::memory_order_relaxed)) return;
  S().devices[static_cast<std::size_t>(t_hot.last_device)].pending_launches.fetch_add(1, std::memory_order_relaxed);
}

void on_copy_into_device(std::uint64_t bytes) {
  // Only the loading phase asks (the weights rule): later copies cost one load.
  const auto phase = static_cast<policy::Phase>(
      S().devices[static_cast<std::size_t>(t_hot.last_device)].phase_now.load(std::memory_order_relaxed));
  if (phase > policy::Phase::loading) return;
  S().copied_to_device.fetch_add(bytes, std::memory_order_relaxed);
}

void on_module_load(std::uint64_t handle, std::uint64_t bytes, const char* api) {
  guarded("on_module_load", [&] {
    S().module_loads.fetch_add(1, std::memory_order_relaxed);
    const int device =
        held_object_loaded(S().modules, Category::module, trace_events::HeldObject::module, handle, bytes, api);
    feed_phase(device, policy::ModuleLoad{bytes});
  });
}

void set_tracking_start_hook(void (*hook)()) {
  g_tracking_start_hook.store(hook, std::memory_order_release);
  // A hook that ran before this library's constructor (another library's constructor using CUDA)
  // may have started tracking already.
  const State* st = g_state.peek();
  if (hook && st && st->trace_opened.load(std::memory_order_acquire)) hook();
}

void tracker_child_after_fork() {
  // The child starts afresh: its own trace (opened at its first CUDA call), nothing tracked.
  auto* fresh = new State;
  fresh->forked_from = g_state.peek();
  g_state.replace(fresh);
  g_disabled.store(false);
  g_finished.store(false);
  // The parent's open captures are not the child's; their ActiveCaptures stay in the parent's
  // state, each still holding its reference.
  if (t_hot.own_captures) t_hot.own_captures->open.store(0);
  refresh_process_id();
}

}  // namespace kvremap::interpose