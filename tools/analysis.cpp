// Replays one trace's memory events in time order to attribute memory to phases and callers (tools/analysis.h).
#include "tools/analysis.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>

#include "tools/trace/json_access.h"

namespace kvremap::analysis {
namespace {

using trace::detail::int_at;
using trace::detail::string_at;
using trace::detail::uint_at;

// One change of live bytes: an allocation, a free, a graph exec or a module coming or going.
struct Step {
  double ts_us;
  std::size_t order;  // file order, to keep equal timestamps stable
  int device;
  const std::string* category;
  const std::string* key;  // what a release is matched to its allocation by
  const std::string* caller;
  std::uint64_t bytes;
  bool release;
  char kind;  // 'a' allocation, 'g' graph exec, 'm' module: keys of different kinds never match
};

struct LiveAllocation {
  std::uint64_t bytes;
  const std::string* category;
  std::size_t phase;
  const std::string* caller;
};

const std::string kGraphExec = "graph_exec";
const std::string kModule = "module";
const std::string kNoCaller;

std::vector<Step> steps_of(const trace::Trace& trace) {
  std::vector<Step> steps;
  steps.reserve(trace.allocs.size() + trace.frees.size() + trace.graph_execs.size() + trace.modules.size());
  for (const auto& a : trace.allocs)
    steps.push_back({a.event.ts_us, a.event.index * 2, a.device, &a.category, &a.ptr, &a.caller, a.bytes, false, 'a'});
  // A lifetime's free shares its allocation's index; *2+1 keeps it after the allocation.
  for (const auto& f : trace.frees)
    steps.push_back(
        {f.event.ts_us, f.event.index * 2 + 1, f.device, &f.category, &f.ptr, &kNoCaller, f.bytes, true, 'a'});
  for (const auto& g : trace.graph_execs)
    steps.push_back(
        {g.event.ts_us, g.event.index * 2, g.device, &kGraphExec, &g.exec, &kNoCaller, g.bytes, g.destroyed, 'g'});
  for (const auto& m : trace.modules)
    steps.push_back(
        {m.event.ts_us, m.event.index * 2, m.device, &kModule, &m.handle, &kNoCaller, m.bytes, m.unloaded, 'm'});
  std::stable_sort(steps.begin(), steps.end(), [](const Step& x, const Step& y) {
    return x.ts_us != y.ts_us ? x.ts_us < y.ts_us : x.order < y.order;
  });
  return steps;
}

std::uint64_t sum(const ByCategory& live) {
  std::uint64_t total = 0;
  for (const auto& [name, bytes] : live) total += bytes;
  return total;
}

struct PhaseSpan {
  std::string phase;
  double start_us;
  double end_us;
};

std::vector<PhaseSpan> phase_spans(const trace::Trace& trace, double end_us) {
  std::vector<trace::PhaseChange> changes = trace.phase_changes;
  std::stable_sort(changes.begin(), changes.end(),
                   [](const auto& x, const auto& y) { return x.event.ts_us < y.event.ts_us; });
  std::vector<PhaseSpan> spans;
  spans.push_back({changes.empty() || changes.front().previous.empty() ? "init" : changes.front().previous, 0, end_us});
  for (const auto& change : changes) {
    double start = change.event.ts_us;
    // The library recognises a KV burst after a few of its tensors and marks the phase then; the
    // phase began at the burst's first KV allocation (policy/phases.h dates it so too).
    if (change.phase == "kv_allocation") {
      for (const auto& a : trace.allocs)
        if (a.category == "kv" && a.event.ts_us >= spans.back().start_us && a.event.ts_us < start)
          start = a.event.ts_us;
    }
    spans.back().end_us = start;
    spans.push_back({change.phase, start, end_us});
  }
  return spans;
}

// Replay state of one device.
struct DeviceReplay {
  ByCategory live;
  std::unordered_map<std::string, LiveAllocation> allocations;
  std::vector<std::ptrdiff_t> peak_step;  // per phase: the step after which the peak stood (-1: before any)
  std::ptrdiff_t last_step = -1;
  std::size_t slot = SIZE_MAX;
  std::optional<TimelinePoint> slot_best;
  bool plan_seen = false;
};

std::string key_of(const Step& step) { return std::string(1, step.kind) + *step.key; }

void apply(const Step& step, DeviceReplay& d, std::size_t phase) {
  std::uint64_t& live = d.live[*step.category];
  const std::string key = key_of(step);
  if (!step.release) {
    live += step.bytes;
    d.allocations[key] = {step.bytes, step.category, phase, step.caller};
    return;
  }
  live -= std::min(live, step.bytes);
  d.allocations.erase(key);
}

void close_phase(PhaseFigures& figures, const DeviceReplay& d, std::size_t phase) {
  figures.live_at_end = d.live;
  for (const auto& [key, allocation] : d.allocations)
    if (allocation.phase == phase) figures.allocated_live_at_end[*allocation.category] += allocation.bytes;
}

void open_phase(PhaseFigures& figures, DeviceReplay& d, const PhaseSpan& span) {
  figures.phase = span.phase;
  figures.start_us = span.start_us;
  figures.end_us = span.end_us;
  figures.peak_bytes = sum(d.live);
  figures.peak_ts_us = span.start_us;
  figures.peak_by_category = d.live;
  d.peak_step.push_back(d.last_step);
}

std::vector<CallerBytes> callers_of(const DeviceReplay& d) {
  std::map<std::string, std::uint64_t> by_caller;
  for (const auto& [key, allocation] : d.allocations)
    by_caller[allocation.caller->empty() ? kUnrecordedCaller : *allocation.caller] += allocation.bytes;
  std::vector<CallerBytes> callers;
  for (const auto& [caller, bytes] : by_caller) callers.push_back({caller, bytes});
  std::stable_sort(callers.begin(), callers.end(), [](const auto& x, const auto& y) { return x.bytes > y.bytes; });
  if (callers.size() > kTopCallers) callers.resize(kTopCallers);
  return callers;
}

KvFigures kv_figures(const trace::Trace& trace, int device) {
  KvFigures kv;
  for (const trace::OtherEvent& event : trace.other_events) {
    if (event.cat != "kv" || int_at(event.args, "device") != device) continue;
    const nlohmann::json& a = event.args;
    if (event.name == "kv arena reserved") {
      if (kv.reserved_ts_us < 0) kv.reserved_ts_us = event.event.ts_us;
      kv.granularity = uint_at(a, "granularity");
    } else if (event.name == "kv deferred") {
      kv.deferred = true;
      kv.scratch_bytes = uint_at(a, "scratch_bytes");
      kv.kv_bytes = uint_at(a, "deferred_bytes");
      kv.tensors = uint_at(a, "regions");
      if (kv.reserved_ts_us < 0) kv.reserved_ts_us = event.event.ts_us;
    } else if (event.name == "kv commit plan" || event.name == "kv committed") {
      const bool commit = event.name == "kv committed";
      (commit ? kv.committed : kv.planned) = true;
      kv.kv_bytes = uint_at(a, "kv_bytes");
      kv.device_bytes = uint_at(a, "device_bytes");
      kv.host_bytes = uint_at(a, "host_bytes");
      kv.tensors = uint_at(a, "tensors");
      kv.granularity = uint_at(a, "granularity");
      kv.headroom_bytes = uint_at(a, "headroom_bytes");
      kv.margin_bytes = int_at(a, "margin_bytes");
      kv.deficit_bytes = uint_at(a, "deficit_bytes");
      if (commit) {
        kv.commit_ts_us = event.event.ts_us;
        kv.sizing_shift_bytes = int_at(a, "sizing_shift_bytes");
        kv.trigger = string_at(a, "trigger");
      } else {
        kv.plan_ts_us = event.event.ts_us;
        kv.device_free_bytes = uint_at(a, "device_free_bytes");
        kv.post_kv_transient_bytes = uint_at(a, "post_kv_transient_bytes");
        kv.verdict = string_at(a, "verdict");
        kv.headroom_source = string_at(a, "headroom_source");
      }
    }
  }
  return kv;
}

double last_event_us(const trace::Trace& trace, const std::vector<Step>& steps) {
  if (trace.summary) return trace.summary->event.ts_us;
  double last = steps.empty() ? 0 : steps.back().ts_us;
  for (const auto& c : trace.checkpoints) last = std::max(last, c.event.ts_us);
  for (const auto& p : trace.phase_changes) last = std::max(last, p.event.ts_us);
  for (const auto& c : trace.counters) last = std::max(last, c.event.ts_us);
  for (const auto& o : trace.other_events) last = std::max(last, o.event.ts_us);
  return last;
}

bool agree(const std::map<std::string, trace::CategoryStats>& summary,
           const std::map<std::string, trace::CategoryStats>& replay) {
  std::set<std::string> names;
  for (const auto& [name, stats] : summary) names.insert(name);
  for (const auto& [name, stats] : replay) names.insert(name);
  const trace::CategoryStats none;
  for (const std::string& name : names) {
    const auto s = summary.find(name);
    const auto r = replay.find(name);
    const trace::CategoryStats& a = s == summary.end() ? none : s->second;
    const trace::CategoryStats& b = r == replay.end() ? none : r->second;
    if (a.live_bytes != b.live_bytes || a.peak_bytes != b.peak_bytes || a.allocations != b.allocations ||
        a.frees != b.frees)
      return false;
  }
  return true;
}

}  // namespace

const DeviceFigures* find_device(const ProcessFigures& process, int device) {
  for (const DeviceFigures& d : process.devices)
    if (d.device == device) return &d;
  return nullptr;
}

ProcessFigures analyse(const trace::Trace& trace) {
  ProcessFigures out;
  out.source = trace.source;
  out.header = trace.header;
  out.complete = trace.complete;
  out.truncated = trace.truncated;
  out.has_summary = trace.summary.has_value();
  const bool checkpoints_from_events = !trace.checkpoints.empty() || !trace.summary;
  out.checkpoints = checkpoints_from_events ? trace.checkpoints : trace.summary->checkpoints;
  out.phase_changes = trace.phase_changes;
  std::stable_sort(out.phase_changes.begin(), out.phase_changes.end(),
                   [](const auto& x, const auto& y) { return x.event.ts_us < y.event.ts_us; });
  if (trace.summary) {
    out.exit = trace.summary->exit;
    out.counts = trace.summary->counts;
  }

  const std::vector<Step> steps = steps_of(trace);
  out.end_us = last_event_us(trace, steps);
  const std::vector<PhaseSpan> spans = phase_spans(trace, out.end_us);

  // Devices: every one the trace names.
  std::map<int, std::uint64_t> totals = trace.device_total_bytes;
  const trace::LiveBytesReplay replay = trace::replay_live_bytes(trace);
  std::map<int, const trace::DeviceSummary*> summaries;
  if (trace.summary) {
    for (const auto& device : trace.summary->devices) {
      summaries[device.device] = &device;
      if (device.total_bytes != 0) totals[device.device] = device.total_bytes;
    }
  }
  std::set<int> device_ids;
  for (const auto& [device, total] : totals) device_ids.insert(device);
  for (const auto& [device, table] : replay.devices) device_ids.insert(device);
  for (const Step& step : steps) device_ids.insert(step.device);

  std::map<int, DeviceReplay> replays;
  std::map<int, DeviceFigures> figures;
  for (int id : device_ids) {
    DeviceFigures& f = figures[id];
    f.device = id;
    const auto total = totals.find(id);
    f.total_bytes = total == totals.end() ? 0 : total->second;
    const auto replayed = replay.devices.find(id);
    const auto summarised = summaries.find(id);
    if (summarised != summaries.end()) {
      f.categories = summarised->second->categories;
      f.categories_source = "summary";
      f.events_agree =
          replayed != replay.devices.end() ? agree(f.categories, replayed->second) : agree(f.categories, {});
    } else {
      if (replayed != replay.devices.end()) f.categories = replayed->second;
      f.categories_source = "events";
    }
    f.kv = kv_figures(trace, id);
    f.phases.resize(spans.size());
    open_phase(f.phases[0], replays[id], spans[0]);
  }

  // Pass 1: live bytes in time order, phase by phase; each phase's peak and the step it stood after.
  const double span_us = std::max(out.end_us, steps.empty() ? 0.0 : steps.back().ts_us);
  std::size_t phase = 0;
  const auto advance_phase_to = [&](double ts_us) {
    while (phase + 1 < spans.size() && spans[phase + 1].start_us <= ts_us) {
      for (auto& [id, f] : figures) close_phase(f.phases[phase], replays[id], phase);
      ++phase;
      for (auto& [id, f] : figures) open_phase(f.phases[phase], replays[id], spans[phase]);
    }
  };
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    advance_phase_to(step.ts_us);
    DeviceReplay& d = replays[step.device];
    DeviceFigures& f = figures[step.device];
    if (f.kv.planned && !d.plan_seen && step.ts_us > f.kv.plan_ts_us) {
      f.kv.live_at_plan = d.live;
      d.plan_seen = true;
    }
    PhaseFigures& p = f.phases[phase];
    apply(step, d, phase);
    d.last_step = static_cast<std::ptrdiff_t>(i);
    if (!step.release) p.allocated[*step.category] += step.bytes;
    const std::uint64_t total = sum(d.live);
    if (total > p.peak_bytes) {
      p.peak_bytes = total;
      p.peak_ts_us = step.ts_us;
      d.peak_step[phase] = static_cast<std::ptrdiff_t>(i);
    }
    std::uint64_t& category_peak = p.peak_by_category[*step.category];
    category_peak = std::max(category_peak, d.live[*step.category]);
    // The timeline: the highest point of each time slot.
    const std::size_t slot =
        span_us <= 0 ? 0 : static_cast<std::size_t>(step.ts_us / span_us * static_cast<double>(kTimelinePoints - 1));
    if (slot != d.slot && d.slot_best) {
      f.timeline.push_back(*d.slot_best);
      d.slot_best.reset();
    }
    d.slot = slot;
    if (!d.slot_best || total >= sum(d.slot_best->live)) d.slot_best = TimelinePoint{step.ts_us, d.live};
  }
  advance_phase_to(out.end_us);
  while (phase + 1 < spans.size()) advance_phase_to(spans[phase + 1].start_us);
  for (auto& [id, f] : figures) {
    close_phase(f.phases[phase], replays[id], phase);
    DeviceReplay& d = replays[id];
    if (f.kv.planned && !d.plan_seen) f.kv.live_at_plan = d.live;
    if (d.slot_best) f.timeline.push_back(*d.slot_best);
    f.timeline.push_back({out.end_us, d.live});
  }

  // Pass 2: the callers holding memory at each phase's peak.
  std::multimap<std::ptrdiff_t, std::pair<int, std::size_t>> wanted;  // step -> (device, phase)
  for (auto& [id, d] : replays)
    for (std::size_t ph = 0; ph < d.peak_step.size(); ++ph) wanted.emplace(d.peak_step[ph], std::make_pair(id, ph));
  std::map<int, DeviceReplay> again;
  std::size_t replay_phase = 0;
  for (std::ptrdiff_t i = 0; i < static_cast<std::ptrdiff_t>(steps.size()) && !wanted.empty(); ++i) {
    const Step& step = steps[static_cast<std::size_t>(i)];
    while (replay_phase + 1 < spans.size() && spans[replay_phase + 1].start_us <= step.ts_us) ++replay_phase;
    apply(step, again[step.device], replay_phase);
    const auto [first, last] = wanted.equal_range(i);
    for (auto it = first; it != last; ++it)
      figures[it->second.first].phases[it->second.second].top_callers = callers_of(again[it->second.first]);
  }

  for (auto& [id, f] : figures) out.devices.push_back(std::move(f));
  return out;
}

}  // namespace kvremap::analysis
