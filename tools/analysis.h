// One process's trace condensed into the figures report --json, plot, diff and what-if share: per device
// category peaks, per-phase attribution, the KV cache's placement, the memory queries and a timeline.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tools/trace/trace_reader.h"

namespace kvremap::analysis {

using ByCategory = std::map<std::string, std::uint64_t>;

// Who held memory at a phase's peak: bytes live by the allocating library (the trace's `caller`,
// recorded for allocations of at least KVREMAP_STACK_MIN_BYTES); kUnrecordedCaller for the rest.
inline constexpr const char* kUnrecordedCaller = "(caller not recorded)";
struct CallerBytes {
  std::string caller;
  std::uint64_t bytes = 0;
};

// One phase on one device, from its phase marker to the next one (or the end of the trace).
struct PhaseFigures {
  std::string phase;
  double start_us = 0;
  double end_us = 0;
  std::uint64_t peak_bytes = 0;  // all categories together, the highest within the phase
  double peak_ts_us = 0;
  ByCategory peak_by_category;           // each category's own highest within the phase
  ByCategory live_at_start;              // live at the phase's start
  std::uint64_t peak_beside_kv_bytes = 0;  // every category but kv together, the highest within the phase
  ByCategory live_at_end;                // live at the phase's end, whenever allocated
  ByCategory allocated;                  // allocated within the phase, frees not subtracted
  ByCategory allocated_live_at_end;      // allocated within the phase and still live at its end
  std::vector<CallerBytes> top_callers;  // at the phase's peak, largest first (at most kTopCallers)
};
inline constexpr std::size_t kTopCallers = 5;

// The KV deferral's decisions on one device (defer mode), from the trace's "kv" events.
struct KvFigures {
  bool deferred = false;
  bool planned = false;
  bool committed = false;
  double reserved_ts_us = -1;  // "kv arena reserved": from here the KV cache sits on the scratch
  double commit_ts_us = -1;
  double plan_ts_us = -1;
  ByCategory live_at_plan;  // live bytes per category when the plan was made (the KV's virtual size included)
  std::int64_t sizing_shift_bytes = 0;  // how far a profile moved the engine's sizing query (kv committed)
  std::uint64_t tensors = 0;
  std::uint64_t kv_bytes = 0;
  std::uint64_t device_bytes = 0;
  std::uint64_t host_bytes = 0;
  std::uint64_t scratch_bytes = 0;
  std::uint64_t granularity = 0;
  std::uint64_t device_free_bytes = 0;
  std::uint64_t headroom_bytes = 0;
  std::uint64_t post_kv_transient_bytes = 0;
  std::int64_t margin_bytes = 0;
  std::uint64_t deficit_bytes = 0;
  std::string verdict;
  std::string trigger;
  std::string headroom_source;
};

// Live bytes per category after an event; the plot's timeline, thinned to kTimelinePoints per device
// (each kept point is the highest total within its time slot, so no peak is lost).
struct TimelinePoint {
  double ts_us = 0;
  ByCategory live;
};
inline constexpr std::size_t kTimelinePoints = 2000;

// An allocation that failed for want of memory, the first in its phase: what was live then and who
// held it (the trace's "oom snapshot").
struct OomCaller {
  std::string caller;
  std::uint64_t bytes = 0;
  std::uint64_t allocations = 0;
};
struct OomSnapshot {
  double ts_us = 0;
  std::string phase;
  std::string api;
  std::string caller;  // of the failing call, or empty
  std::uint64_t requested_bytes = 0;
  std::optional<std::uint64_t> device_free_bytes;
  ByCategory live;
  std::uint64_t live_total_bytes = 0;
  std::vector<OomCaller> top_callers;  // largest first
  std::uint64_t other_bytes = 0;       // live beyond the named callers
};

struct DeviceFigures {
  int device = 0;
  std::uint64_t total_bytes = 0;
  std::string categories_source;  // "summary" or "events"
  bool events_agree = true;       // with a summary: the replayed events give the same figures
  std::map<std::string, trace::CategoryStats> categories;
  std::vector<PhaseFigures> phases;
  KvFigures kv;
  std::vector<OomSnapshot> oom_snapshots;  // in time order
  std::vector<TimelinePoint> timeline;
};

struct ProcessFigures {
  std::string source;
  trace::Header header;
  bool complete = false;
  bool truncated = false;
  bool has_summary = false;
  std::string stopped;        // the writer's error where the trace file could not grow (Trace::stopped), or empty
  double stopped_at_us = 0;   // and when
  std::string exit;   // the summary's, or empty
  double end_us = 0;  // the summary's time, else the last event's
  std::vector<DeviceFigures> devices;
  std::vector<trace::Checkpoint> checkpoints;
  std::vector<trace::PhaseChange> phase_changes;
  std::map<std::string, std::uint64_t> counts;
};

// Every category but kv together: what the engine held beside its KV cache.
std::uint64_t beside_kv(const ByCategory& live);

// Pure: everything from the typed records of one trace.
ProcessFigures analyse(const trace::Trace& trace);

// Figures for one device number, or nullptr.
const DeviceFigures* find_device(const ProcessFigures& process, int device);

}  // namespace kvremap::analysis
