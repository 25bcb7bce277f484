// Recomputes live and peak bytes per device and category from a trace's individual events.
#include <algorithm>
#include <string>
#include <vector>

#include "tools/trace/trace_reader.h"

namespace kvremap::trace {

namespace {

const std::string kGraphExecCategory = "graph_exec";
const std::string kModuleCategory = "module";

}  // namespace

const MemoryTimeline& memory_timeline(const Trace& trace, MemoryTimeline& built) {
  if (trace.memory) return *trace.memory;
  built = MemoryTimeline{};
  using Kind = MemoryStep::Kind;
  for (const MemoryEvent& alloc : trace.allocs)
    built.add(Kind::allocation, alloc.event, false, alloc.ptr, alloc.category, alloc.caller, alloc.bytes, alloc.device,
              false);
  for (const MemoryEvent& free : trace.frees)
    built.add(Kind::allocation, free.event, free.lifetime, free.ptr, free.category, "", free.bytes, free.device, true);
  // Graph-exec and module memory is taken by the driver, not by an allocation call, so the writer
  // records it only as graph/module events; they count towards their own categories.
  for (const GraphExecEvent& exec : trace.graph_execs)
    built.add(Kind::graph_exec, exec.event, false, exec.exec, kGraphExecCategory, "", exec.bytes, exec.device,
              exec.destroyed);
  for (const ModuleEvent& module : trace.modules)
    built.add(Kind::module, module.event, false, module.handle, kModuleCategory, "", module.bytes, module.device,
              module.unloaded);
  built.sort();
  return built;
}

LiveBytesReplay replay_live_bytes(const Trace& trace) {
  MemoryTimeline built;
  const MemoryTimeline& timeline = memory_timeline(trace, built);

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

  for (const MemoryStep& change : timeline.steps) {
    CategoryStats& stats = device_entry(change.device)[timeline.name(change.category)];
    if (change.release) {
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
