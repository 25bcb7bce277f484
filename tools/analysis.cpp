// Replays one trace's memory events in time order to attribute memory to phases and callers (tools/analysis.h).
#include "tools/analysis.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <set>
#include <unordered_map>

#include "tools/trace/kv_events.h"

namespace kvremap::analysis {
namespace {


using trace::MemoryStep;
using trace::MemoryTimeline;

struct LiveAllocation {
  std::uint64_t bytes;
  std::uint32_t category;
  std::size_t phase;
  std::uint32_t caller;
};

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

std::vector<PhaseSpan> phase_spans(const trace::Trace& trace, const MemoryTimeline& timeline, double end_us) {
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
      // Steps are in time order: the first KV allocation since the previous phase began, if before `start`.
      for (const MemoryStep& step : timeline.steps) {
        if (step.ts_us >= start) break;
        if (step.kind == MemoryStep::Kind::allocation && !step.release && step.ts_us >= spans.back().start_us &&
            timeline.name(step.category) == "kv") {
          start = step.ts_us;
          break;
        }
      }
    }
    spans.back().end_us = start;
    spans.push_back({change.phase, start, end_us});
  }
  return spans;
}

// Replay state of one device.
struct DeviceReplay {
  ByCategory live;
  std::unordered_map<std::uint64_t, LiveAllocation> allocations;  // by key_of()
  std::vector<std::ptrdiff_t> peak_step;  // per phase: the step after which the peak stood (-1: before any)
  std::ptrdiff_t last_step = -1;
  std::size_t slot = SIZE_MAX;
  std::optional<TimelinePoint> slot_best;
  bool plan_seen = false;
};

// What a release is matched to its allocation by: the key within its kind (keys of different kinds never match).
std::uint64_t key_of(const MemoryStep& step) {
  return std::uint64_t{step.key} << 8 | static_cast<std::uint64_t>(step.kind);
}

void apply(const MemoryStep& step, const MemoryTimeline& timeline, DeviceReplay& d, std::size_t phase) {
  std::uint64_t& live = d.live[timeline.name(step.category)];
  if (!step.release) {
    live += step.bytes;
    d.allocations[key_of(step)] = {step.bytes, step.category, phase, step.caller};
    return;
  }
  live -= std::min(live, step.bytes);
  d.allocations.erase(key_of(step));
}

void close_phase(PhaseFigures& figures, const MemoryTimeline& timeline, const DeviceReplay& d, std::size_t phase) {
  figures.live_at_end = d.live;
  for (const auto& [key, allocation] : d.allocations)
    if (allocation.phase == phase) figures.allocated_live_at_end[timeline.name(allocation.category)] += allocation.bytes;
}

void open_phase(PhaseFigures& figures, DeviceReplay& d, const PhaseSpan& span) {
  figures.phase = span.phase;
  figures.start_us = span.start_us;
  figures.end_us = span.end_us;
  figures.peak_bytes = sum(d.live);
  figures.peak_ts_us = span.start_us;
  figures.peak_by_category = d.live;
  figures.live_at_start = d.live;
  figures.peak_beside_kv_bytes = beside_kv(d.live);
  d.peak_step.push_back(d.last_step);
}

std::vector<CallerBytes> callers_of(const MemoryTimeline& timeline, const DeviceReplay& d) {
  std::map<std::string, std::uint64_t> by_caller;
  for (const auto& [key, allocation] : d.allocations)
    by_caller[allocation.caller == 0 ? kUnrecordedCaller : timeline.name(allocation.caller)] += allocation.bytes;
  std::vector<CallerBytes> callers;
  for (const auto& [caller, bytes] : by_caller) callers.push_back({caller, bytes});
  std::stable_sort(callers.begin(), callers.end(), [](const auto& x, const auto& y) { return x.bytes > y.bytes; });
  if (callers.size() > kTopCallers) callers.resize(kTopCallers);
  return callers;
}

KvFigures kv_figures(const std::vector<trace::KvEvent>& events, int device) {
  using Kind = trace::KvEvent::Kind;
  KvFigures kv;
  for (const trace::KvEvent& event : events) {
    if (event.device.value_or(0) != device) continue;
    if (event.kind == Kind::arena_reserved) {
      if (kv.reserved_ts_us < 0) kv.reserved_ts_us = event.event.ts_us;
      kv.granularity = event.granularity.value_or(0);
    } else if (event.kind == Kind::deferred) {
      kv.deferred = true;
      kv.scratch_bytes = event.scratch_bytes.value_or(0);
      kv.kv_bytes = event.deferred_bytes.value_or(0);
      kv.tensors = event.regions.value_or(0);
      if (kv.reserved_ts_us < 0) kv.reserved_ts_us = event.event.ts_us;
    } else if (event.kind == Kind::commit_plan || event.kind == Kind::committed) {
      const bool commit = event.kind == Kind::committed;
      (commit ? kv.committed : kv.planned) = true;
      kv.kv_bytes = event.kv_bytes.value_or(0);
      kv.device_bytes = event.device_bytes.value_or(0);
      kv.host_bytes = event.host_bytes.value_or(0);
      kv.tensors = event.tensors.value_or(0);
      kv.granularity = event.granularity.value_or(0);
      kv.headroom_bytes = event.headroom_bytes.value_or(0);
      kv.margin_bytes = event.margin_bytes.value_or(0);
      kv.deficit_bytes = event.deficit_bytes.value_or(0);
      if (commit) {
        kv.commit_ts_us = event.event.ts_us;
        kv.sizing_shift_bytes = event.sizing_shift_bytes.value_or(0);
        kv.trigger = event.trigger;
      } else {
        kv.plan_ts_us = event.event.ts_us;
        kv.device_free_bytes = event.device_free_bytes.value_or(0);
        kv.post_kv_transient_bytes = event.post_kv_transient_bytes.value_or(0);
        kv.verdict = event.verdict;
        kv.headroom_source = event.headroom_source;
      }
    }
  }
  return kv;
}

double last_event_us(const trace::Trace& trace, const MemoryTimeline& timeline) {
  if (trace.summary) return trace.summary->event.ts_us;
  double last = timeline.steps.empty() ? 0 : timeline.steps.back().ts_us;
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

std::uint64_t beside_kv(const ByCategory& live) {
  std::uint64_t sum = 0;
  for (const auto& [category, bytes] : live)
    if (category != "kv") sum += bytes;
  return sum;
}

const DeviceFigures* find_device(const ProcessFigures& process, int device) {
  for (const DeviceFigures& d : process.devices)
    if (d.device == device) return &d;
  return nullptr;
}

namespace {

// The trace's out-of-memory snapshots of one device; a field of the wrong type reads as absent.
std::vector<OomSnapshot> oom_snapshots(const trace::Trace& trace, int device) {
  const auto unsigned_at = [](const nlohmann::json& object, const char* key) -> std::optional<std::uint64_t> {
    const auto found = object.find(key);
    if (found == object.end() || !found->is_number_unsigned()) return std::nullopt;
    return found->get<std::uint64_t>();
  };
  const auto text_at = [](const nlohmann::json& object, const char* key) {
    const auto found = object.find(key);
    return found != object.end() && found->is_string() ? found->get<std::string>() : std::string();
  };
  std::vector<OomSnapshot> out;
  for (const trace::OtherEvent& e : trace.other_events) {
    if (e.cat != "oom" || e.name != "oom snapshot" || !e.args.is_object()) continue;
    if (unsigned_at(e.args, "device").value_or(UINT64_MAX) != static_cast<std::uint64_t>(device)) continue;
    OomSnapshot s;
    s.ts_us = e.event.ts_us;
    s.phase = text_at(e.args, "phase");
    s.api = text_at(e.args, "api");
    s.caller = text_at(e.args, "caller");
    s.requested_bytes = unsigned_at(e.args, "requested_bytes").value_or(0);
    s.device_free_bytes = unsigned_at(e.args, "device_free_bytes");
    s.live_total_bytes = unsigned_at(e.args, "live_total_bytes").value_or(0);
    s.other_bytes = unsigned_at(e.args, "other_bytes").value_or(0);
    if (const auto live = e.args.find("live_bytes"); live != e.args.end() && live->is_object())
      for (const auto& [name, bytes] : live->items())
        if (bytes.is_number_unsigned()) s.live[name] = bytes.get<std::uint64_t>();
    if (const auto callers = e.args.find("top_callers"); callers != e.args.end() && callers->is_array())
      for (const auto& c : *callers)
        if (c.is_object())
          s.top_callers.push_back(
              {text_at(c, "caller"), unsigned_at(c, "bytes").value_or(0), unsigned_at(c, "allocations").value_or(0)});
    out.push_back(std::move(s));
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.ts_us < b.ts_us; });
  return out;
}

}  // namespace

ProcessFigures analyse(const trace::Trace& trace) {
  ProcessFigures out;
  out.source = trace.source;
  out.header = trace.header;
  out.complete = trace.complete;
  out.truncated = trace.truncated;
  out.has_summary = trace.summary.has_value();
  out.stopped = trace.stopped;
  out.stopped_at_us = trace.stopped_at_us;
  const bool checkpoints_from_events = !trace.checkpoints.empty() || !trace.summary;
  out.checkpoints = checkpoints_from_events ? trace.checkpoints : trace.summary->checkpoints;
  out.phase_changes = trace.phase_changes;
  std::stable_sort(out.phase_changes.begin(), out.phase_changes.end(),
                   [](const auto& x, const auto& y) { return x.event.ts_us < y.event.ts_us; });
  if (trace.summary) {
    out.exit = trace.summary->exit;
    out.counts = trace.summary->counts;
  }

  MemoryTimeline built;
  const MemoryTimeline& timeline = trace::memory_timeline(trace, built);
  const std::deque<MemoryStep>& steps = timeline.steps;
  out.end_us = last_event_us(trace, timeline);
  const std::vector<PhaseSpan> spans = phase_spans(trace, timeline, out.end_us);

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
  for (const MemoryStep& step : steps) device_ids.insert(step.device);

  const std::vector<trace::KvEvent> kv_events = trace::kv_events(trace);
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
    f.kv = kv_figures(kv_events, id);
    f.oom_snapshots = oom_snapshots(trace, id);
    f.phases.resize(spans.size());
    open_phase(f.phases[0], replays[id], spans[0]);
  }

  // Pass 1: live bytes in time order, phase by phase; each phase's peak and the step it stood after.
  const double span_us = std::max(out.end_us, steps.empty() ? 0.0 : steps.back().ts_us);
  std::size_t phase = 0;
  const auto advance_phase_to = [&](double ts_us) {
    while (phase + 1 < spans.size() && spans[phase + 1].start_us <= ts_us) {
      for (auto& [id, f] : figures) close_phase(f.phases[phase], timeline, replays[id], phase);
      ++phase;
      for (auto& [id, f] : figures) open_phase(f.phases[phase], replays[id], spans[phase]);
    }
  };
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const MemoryStep& step = steps[i];
    const std::string& category = timeline.name(step.category);
    advance_phase_to(step.ts_us);
    DeviceReplay& d = replays[step.device];
    DeviceFigures& f = figures[step.device];
    if (f.kv.planned && !d.plan_seen && step.ts_us > f.kv.plan_ts_us) {
      f.kv.live_at_plan = d.live;
      d.plan_seen = true;
    }
    PhaseFigures& p = f.phases[phase];
    apply(step, timeline, d, phase);
    d.last_step = static_cast<std::ptrdiff_t>(i);
    if (!step.release) p.allocated[category] += step.bytes;
    const std::uint64_t total = sum(d.live);
    if (total > p.peak_bytes) {
      p.peak_bytes = total;
      p.peak_ts_us = step.ts_us;
      d.peak_step[phase] = static_cast<std::ptrdiff_t>(i);
    }
    p.peak_beside_kv_bytes = std::max(p.peak_beside_kv_bytes, beside_kv(d.live));
    std::uint64_t& category_peak = p.peak_by_category[category];
    category_peak = std::max(category_peak, d.live[category]);
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
    close_phase(f.phases[phase], timeline, replays[id], phase);
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
    const MemoryStep& step = steps[static_cast<std::size_t>(i)];
    while (replay_phase + 1 < spans.size() && spans[replay_phase + 1].start_us <= step.ts_us) ++replay_phase;
    apply(step, timeline, again[step.device], replay_phase);
    const auto [first, last] = wanted.equal_range(i);
    for (auto it = first; it != last; ++it)
      figures[it->second.first].phases[it->second.second].top_callers = callers_of(timeline, again[it->second.first]);
  }

  for (auto& [id, f] : figures) out.devices.push_back(std::move(f));
  return out;
}

}  // namespace kvremap::analysis
