// Recomputes live and peak bytes per device and category from a trace's individual events.
#include <algorithm>
#include <string>
#include <vector>

#include "tools/trace/trace_reader.h"

namespace kvremap::trace {

namespace {

// One change to a category's live bytes, wherever in the trace it was recorded.
struct LiveBytesChange {
  std::size_t index;
  double ts_us;
  int device;
  const std::string* category;
  std::uint64_t bytes;
  bool releases;
};

const std::string kGraphExecCategory = "graph_exec";
const std::string kModuleCategory = "module";

}  // namespace

LiveBytesReplay replay_live_bytes(const Trace& trace) {
  std::vector<LiveBytesChange> changes;
  changes.reserve(trace.allocs.size() + trace.frees.size() + trace.graph_execs.size() + trace.modules.size());
  for (const MemoryEvent& alloc : trace.allocs) {
    changes.push_back({alloc.event.index, alloc.event.ts_us, alloc.device, &alloc.category, alloc.bytes, false});
  }
  for (const MemoryEvent& free : trace.frees) {
    changes.push_back({free.event.index, free.event.ts_us, free.device, &free.category, free.bytes, true});
  }
  // Graph-exec and module memory is taken by the driver, not by an allocation call, so the writer
  // records it only as graph/module events; they count towards their own categories here.
  for (const GraphExecEvent& exec : trace.graph_execs) {
    changes.push_back(
        {exec.event.index, exec.event.ts_us, exec.device, &kGraphExecCategory, exec.bytes, exec.destroyed});
  }
  for (const ModuleEvent& module : trace.modules) {
    changes.push_back(
        {module.event.index, module.event.ts_us, module.device, &kModuleCategory, module.bytes, module.unloaded});
  }
  // The writer buffers events per thread, so file order interleaves threads in chunks; a free on one
  // thread can be written before the allocation another thread made. Timestamps come from one
  // monotonic clock, so they restore the real order; file order breaks ties.
  // A lifetime's allocation and free share an index; with a zero duration the allocation goes first.
  std::sort(changes.begin(), changes.end(), [](const LiveBytesChange& a, const LiveBytesChange& b) {
    if (a.ts_us != b.ts_us) return a.ts_us < b.ts_us;
    return a.index != b.index ? a.index < b.index : a.releases < b.releases;
  });

  LiveBytesReplay replay;
  const auto device_entry = [&replay](int device) -> std::map<std::string, CategoryStats>& {
    auto [entry, inserted] = replay.devices.try_emplace(device);
    if (inserted) {
      // Every known category is present, as in the summary, so the two compare entry by entry.
      for (std::string_view category : kCategories) entry->second.try_emplace(std::string(category));
    }
    return entry->second;
  };
  for (const auto& [device, total] : trace.device_total_bytes) device_entry(device);

  for (const LiveBytesChange& change : changes) {
    CategoryStats& stats = device_entry(change.device)[*change.category];
    if (change.releases) {
      ++stats.frees;
      if (change.bytes > stats.live_bytes) {
        ++replay.frees_exceeding_live;
        stats.live_bytes = 0;
      } else {
        stats.live_bytes -= change.bytes;
      }
      continue;
    }
    ++stats.allocations;
    stats.allocated_bytes += change.bytes;
    stats.live_bytes += change.bytes;
    // Strictly greater: the peak's time is when it was first reached.
    if (stats.live_bytes > stats.peak_bytes) {
      stats.peak_bytes = stats.live_bytes;
      stats.peak_ts_us = change.ts_us;
    }
  }
  return replay;
}

}  // namespace kvremap::trace
