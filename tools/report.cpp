// Text rendering of a trace for `kvremap report`: what was allocated where, when, and what the engine was told.
#include "tools/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "tools/text.h"
#include "tools/trace/kv_events.h"

namespace kvremap::report {

using trace::CategoryStats;
using trace::Trace;

std::string format_bytes(std::uint64_t bytes) {
  constexpr std::string_view kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double scaled = static_cast<double>(bytes) / 1024.0;
  std::size_t unit = 0;
  while (scaled >= 1024.0 && unit + 1 < std::size(kUnits)) {
    scaled /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", scaled, kUnits[unit]);
}

std::string format_signed_bytes(std::int64_t bytes) {
  if (bytes == 0) return "0 B";
  const std::uint64_t magnitude =
      bytes < 0 ? static_cast<std::uint64_t>(-(bytes + 1)) + 1 : static_cast<std::uint64_t>(bytes);
  return (bytes < 0 ? "-" : "+") + format_bytes(magnitude);
}

namespace {

std::string format_seconds(double microseconds) { return fmt::format("{:.3f} s", microseconds / 1e6); }

// Signed difference of two unsigned byte counts without overflow for any realistic device size.
std::int64_t difference(std::uint64_t minuend, std::uint64_t subtrahend) {
  return minuend >= subtrahend ? static_cast<std::int64_t>(minuend - subtrahend)
                               : -static_cast<std::int64_t>(subtrahend - minuend);
}

using CategoryTable = std::map<std::string, CategoryStats>;

// Known categories in their fixed order, then any a newer writer added, alphabetically.
std::vector<std::string> display_order(const CategoryTable& table) {
  std::vector<std::string> names;
  for (const auto& [name, stats] : table) names.push_back(name);
  std::stable_sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return trace::category_rank(a) < trace::category_rank(b);
  });
  return names;
}

// A command line without the spaces after its end: a process title read by an older library kept the
// padding of the argv area setproctitle cleared.
std::string_view without_padding(std::string_view line) {
  while (!line.empty() && line.back() == ' ') line.remove_suffix(1);
  return line;
}

void append_identity(std::string& out, const Trace& trace) {
  const trace::Header& header = trace.header;
  cli::append(out, "== {}\n", trace.source);
  cli::append(out, "process   {} (parent {}) on {}: {}\n", header.pid, header.ppid,
                 header.hostname.empty() ? "?" : header.hostname, without_padding(header.cmdline));
  if (without_padding(header.engine_cmdline) != without_padding(header.cmdline))
    cli::append(out, "engine    {}\n", without_padding(header.engine_cmdline));
  std::string options;
  for (const auto& [name, value] : header.options) options += fmt::format(" {}={}", name, value);
  cli::append(out, "library   {} (schema {}); options:{}\n", header.library_version,
                 header.schema_version, options.empty() ? " (none)" : options);

  std::string ending;
  if (trace.summary) {
    ending = fmt::format("cleanly ({}) after {}", trace.summary->exit, format_seconds(trace.summary->duration_us));
  } else {
    // Threads' events reach the file in chunks, so the latest one need not be the last written.
    double last_ts = 0;
    const auto latest = [&last_ts](const auto& records) {
      for (const auto& record : records) last_ts = std::max(last_ts, record.event.ts_us);
    };
    trace::MemoryTimeline built;
    const trace::MemoryTimeline& timeline = trace::memory_timeline(trace, built);
    if (!timeline.steps.empty()) last_ts = timeline.steps.back().ts_us;  // in time order
    latest(trace.counters);
    latest(trace.checkpoints);
    latest(trace.graph_execs);
    latest(trace.modules);
    const std::string last = trace.event_count == trace.metadata_events
                                 ? std::string("no event after the header")
                                 : "last memory event at " + format_seconds(last_ts);
    ending = trace.stopped.empty()
                 ? fmt::format("without a summary (killed or crashed?); {}", last)
                 : fmt::format("early, stopped at {}: {} (the trace file could not grow); {}",
                               format_seconds(trace.stopped_at_us), trace.stopped, last);
  }
  if (trace.truncated) ending += "; an incomplete last line was ignored";
  if (!trace.complete && trace.summary) ending += "; the closing ']' is missing";
  cli::append(out, "ended     {}\n", ending);
}

// Lists where the replayed events disagree with the summary the library wrote; agreement is the
// evidence that the events alone are enough to reconstruct memory use of killed processes.
std::vector<std::string> summary_mismatches(const CategoryTable& summary, const CategoryTable& replay) {
  std::vector<std::string> mismatches;
  const CategoryStats none;
  std::set<std::string> names;
  for (const auto& [name, stats] : summary) names.insert(name);
  for (const auto& [name, stats] : replay) names.insert(name);
  for (const std::string& name : names) {
    const auto in_summary = summary.find(name);
    const auto in_replay = replay.find(name);
    const CategoryStats& written = in_summary == summary.end() ? none : in_summary->second;
    const CategoryStats& replayed = in_replay == replay.end() ? none : in_replay->second;
    if (written.live_bytes != replayed.live_bytes) {
      mismatches.push_back(fmt::format("{} live {} in events, {} in summary", name, format_bytes(replayed.live_bytes),
                                       format_bytes(written.live_bytes)));
    }
    if (written.peak_bytes != replayed.peak_bytes) {
      mismatches.push_back(fmt::format("{} peak {} in events, {} in summary", name, format_bytes(replayed.peak_bytes),
                                       format_bytes(written.peak_bytes)));
    }
    if (written.allocations != replayed.allocations || written.frees != replayed.frees) {
      mismatches.push_back(fmt::format("{} {} allocations/{} frees in events, {}/{} in summary", name,
                                       replayed.allocations, replayed.frees, written.allocations, written.frees));
    }
  }
  return mismatches;
}

void append_device(std::string& out, int device, std::uint64_t total_bytes, const CategoryTable& table,
                   std::string_view source) {
  cli::append(out, "\ndevice {}: {} total; categories {}\n", device,
                 total_bytes == 0 ? std::string("?") : format_bytes(total_bytes), source);
  cli::append(out, "  {:<12} {:>12} {:>12} {:>11} {:>12} {:>8} {:>8}\n", "category", "live",
                 "peak", "peak at", "allocated", "allocs", "frees");
  std::uint64_t live_total = 0;
  for (const std::string& name : display_order(table)) {
    const CategoryStats& stats = table.at(name);
    live_total += stats.live_bytes;
    cli::append(out, "  {:<12} {:>12} {:>12} {:>11} {:>12} {:>8} {:>8}\n", name,
                   format_bytes(stats.live_bytes), format_bytes(stats.peak_bytes),
                   stats.peak_bytes == 0 ? std::string("-") : format_seconds(stats.peak_ts_us),
                   format_bytes(stats.allocated_bytes), stats.allocations, stats.frees);
  }
  cli::append(out, "  {:<12} {:>12}\n", "all live", format_bytes(live_total));
}

void append_devices(std::string& out, const Trace& trace) {
  const trace::LiveBytesReplay replay = trace::replay_live_bytes(trace);
  std::map<int, std::uint64_t> totals = trace.device_total_bytes;
  std::map<int, const trace::DeviceSummary*> summaries;
  if (trace.summary) {
    for (const trace::DeviceSummary& device : trace.summary->devices) {
      summaries[device.device] = &device;
      if (device.total_bytes != 0) totals[device.device] = device.total_bytes;
    }
  }
  std::set<int> devices;
  for (const auto& [device, total] : totals) devices.insert(device);
  for (const auto& [device, table] : replay.devices) devices.insert(device);
  if (devices.empty()) out += "\nno device memory recorded\n";

  const CategoryTable no_categories;
  for (int device : devices) {
    const auto replayed = replay.devices.find(device);
    const CategoryTable& replay_table = replayed == replay.devices.end() ? no_categories : replayed->second;
    const auto total = totals.find(device);
    const std::uint64_t total_bytes = total == totals.end() ? 0 : total->second;
    const auto summarised = summaries.find(device);
    if (summarised == summaries.end()) {
      append_device(out, device, total_bytes, replay_table,
                    trace.summary ? "replayed from events (device missing from the summary)"
                                  : "replayed from events (no summary)");
      continue;
    }
    const std::vector<std::string> mismatches = summary_mismatches(summarised->second->categories, replay_table);
    // Threads still inside a hook when the exit's wait ended counted their operations in the summary
    // before their events were written: a disagreement of that many operations is expected.
    const auto in_flight = trace.summary->counts.find("hooks_in_flight");
    const std::uint64_t hooks_in_flight = in_flight == trace.summary->counts.end() ? 0 : in_flight->second;
    const std::string disagree =
        hooks_in_flight == 0
            ? std::string("from the summary (events disagree)")
            : fmt::format("from the summary (events disagree: {} thread{} still inside a hook at exit, whose last "
                          "operations the summary counts and the events may lack)",
                          hooks_in_flight, hooks_in_flight == 1 ? " was" : "s were");
    append_device(out, device, total_bytes, summarised->second->categories,
                  mismatches.empty() ? std::string("from the summary (events agree)") : disagree);
    for (const std::string& mismatch : mismatches) cli::append(out, "  ! {}\n", mismatch);
  }
  if (replay.frees_exceeding_live != 0) {
    cli::append(out, "  ! {} frees released more than the category held\n",
                   replay.frees_exceeding_live);
  }
}

void append_checkpoints(std::string& out, const Trace& trace) {
  // Events carry timestamps; the summary's copy only matters if the events were lost.
  const bool from_events = !trace.checkpoints.empty() || !trace.summary;
  const std::vector<trace::Checkpoint>& checkpoints = from_events ? trace.checkpoints : trace.summary->checkpoints;
  cli::append(out, "\ncheckpoints: {} memory queries\n", checkpoints.size());
  if (checkpoints.empty()) return;
  cli::append(out, "  {:>4} {:>10} {:<20} {:<15} {:>6} {:>12} {:>13} {:>15}\n", "#", "at", "api",
                 "phase", "device", "driver free", "returned free", "returned-driver");
  for (const trace::Checkpoint& checkpoint : checkpoints) {
    cli::append(out, "  {:>4} {:>10} {:<20} {:<15} {:>6} {:>12} {:>13} {:>15}\n",
                   checkpoint.index, from_events ? format_seconds(checkpoint.event.ts_us) : std::string("-"),
                   checkpoint.api, checkpoint.phase, checkpoint.device, format_bytes(checkpoint.driver_free),
                   format_bytes(checkpoint.returned_free),
                   format_signed_bytes(difference(checkpoint.returned_free, checkpoint.driver_free)));
  }
}

void append_phases(std::string& out, const Trace& trace) {
  if (trace.phase_changes.empty()) {
    out += "\nphases: no phase changes recorded\n";
    return;
  }
  out += "\nphases:\n";
  for (const trace::PhaseChange& change : trace.phase_changes) {
    cli::append(out, "  {:>10}  {} -> {}{}\n", format_seconds(change.event.ts_us),
                   change.previous, change.phase, change.reason.empty() ? std::string() : " (" + change.reason + ")");
  }
}

void append_captures_graphs_modules(std::string& out, const Trace& trace) {
  double total_dur_us = 0;
  std::uint64_t allocated = 0;
  std::map<std::string, std::size_t> by_status;
  for (const trace::CaptureWindow& capture : trace.captures) {
    total_dur_us += capture.dur_us;
    allocated += capture.allocated_bytes;
    ++by_status[capture.status];
  }
  std::string statuses;
  for (const auto& [status, count] : by_status)
    statuses += fmt::format("{}{} {}", statuses.empty() ? "" : ", ", status, count);
  cli::append(out,
                 "\ncaptures:   {} windows, {:.3f} ms in total{}, {} allocated while capturing\n",
                 trace.captures.size(), total_dur_us / 1e3, statuses.empty() ? std::string() : " (" + statuses + ")",
                 format_bytes(allocated));

  std::size_t instantiated = 0;
  std::size_t destroyed = 0;
  std::uint64_t instantiated_bytes = 0;
  std::uint64_t destroyed_bytes = 0;
  for (const trace::GraphExecEvent& exec : trace.graph_execs) {
    (exec.destroyed ? destroyed : instantiated) += 1;
    (exec.destroyed ? destroyed_bytes : instantiated_bytes) += exec.bytes;
  }
  cli::append(out, "graph exec: {} instantiated ({}), {} destroyed ({})\n", instantiated,
                 format_bytes(instantiated_bytes), destroyed, format_bytes(destroyed_bytes));

  std::size_t loaded = 0;
  std::size_t unloaded = 0;
  std::uint64_t loaded_bytes = 0;
  std::uint64_t unloaded_bytes = 0;
  for (const trace::ModuleEvent& module : trace.modules) {
    (module.unloaded ? unloaded : loaded) += 1;
    (module.unloaded ? unloaded_bytes : loaded_bytes) += module.bytes;
  }
  cli::append(out, "modules:    {} loaded ({}), {} unloaded ({})\n", loaded,
                 format_bytes(loaded_bytes), unloaded, format_bytes(unloaded_bytes));

  if (trace.summary && !trace.summary->counts.empty()) {
    std::string counts;
    for (const auto& [name, count] : trace.summary->counts)
      counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", name, count);
    cli::append(out, "counts:     {}\n", counts);
  }
}

// The KV deferral's decisions (cat "kv", KVREMAP_MODE=defer), per device: what was deferred, the
// plan's inputs and verdict, the commit as placed, and what post-KV start-up work needed.
void append_kv(std::string& out, const Trace& trace) {
  using Kind = trace::KvEvent::Kind;
  const auto bytes = [](const std::optional<std::uint64_t>& value) { return format_bytes(value.value_or(0)); };
  std::map<std::int64_t, std::vector<trace::KvEvent>> by_device;
  for (trace::KvEvent& event : trace::kv_events(trace)) by_device[event.device.value_or(0)].push_back(std::move(event));
  for (const auto& [device, events] : by_device) {
    cli::append(out, "\nkv cache, device {}:\n", device);
    for (const trace::KvEvent& e : events) {
      const std::string at = format_seconds(e.event.ts_us);
      if (e.kind == Kind::deferred) {
        cli::append(out, "  deferred   at {}: {} tensors of {}, {} on a {} scratch\n", at,
                       e.regions.value_or(0), bytes(e.tensor_bytes), bytes(e.deferred_bytes), bytes(e.scratch_bytes));
      } else if (e.kind == Kind::commit_plan) {
        cli::append(out,
                       "  plan       at {}: {} of KV in {} tensors; {} free, {} headroom, {} post-KV transient\n", at,
                       bytes(e.kv_bytes), e.tensors.value_or(0), bytes(e.device_free_bytes), bytes(e.headroom_bytes),
                       bytes(e.post_kv_transient_bytes));
        cli::append(out,
                       "             {}: margin {}, deficit {}; device {}, host {} ({} at the end of each tensor; "
                       "granularity {})\n",
                       e.verdict, format_signed_bytes(e.margin_bytes.value_or(0)), bytes(e.deficit_bytes),
                       bytes(e.device_bytes), bytes(e.host_bytes), bytes(e.host_bytes_per_tensor),
                       bytes(e.granularity));
      } else if (e.kind == Kind::committed) {
        cli::append(out,
                       "  committed  at {} by {}: device {}, host {} ({} per tensor), margin {}\n", at, e.trigger,
                       bytes(e.device_bytes), bytes(e.host_bytes), bytes(e.host_bytes_per_tensor),
                       format_signed_bytes(e.margin_bytes.value_or(0)));
        if (e.post_kv_peaks.empty()) continue;
        cli::append(out, "  post-KV peaks: {:<12} {:>12} {:>12} {:>12}\n", "category",
                       "at KV end", "peak since", "difference");
        std::vector<trace::KvPostKvPeak> peaks = e.post_kv_peaks;
        std::stable_sort(peaks.begin(), peaks.end(), [](const auto& x, const auto& y) {
          return trace::category_rank(x.category) < trace::category_rank(y.category);
        });
        for (const trace::KvPostKvPeak& p : peaks) {
          const std::uint64_t start = p.at_kv_end.value_or(0);
          const std::uint64_t peak = p.peak.value_or(0);
          cli::append(out, "                 {:<12} {:>12} {:>12} {:>12}\n", p.category,
                         format_bytes(start), format_bytes(peak), format_signed_bytes(difference(peak, start)));
        }
      }
    }
  }
}

// Internal events explain gaps: after "tracking disabled" the numbers above stop being complete.
void append_notes(std::string& out, const Trace& trace) {
  for (const trace::OtherEvent& event : trace.other_events) {
    if (event.cat != "kvremap") continue;
    const auto text = [&event](const char* key) {
      auto found = event.args.find(key);
      return found != event.args.end() && found->is_string() ? found->get<std::string>() : std::string();
    };
    if (event.name == "tracking disabled") {
      cli::append(out, "note: tracking disabled at {}: {}\n", format_seconds(event.event.ts_us),
                     text("reason"));
    } else if (event.name == "trace stopped") {
      cli::append(out, "note: trace stopped at {}: {} (the trace file could not grow)\n",
                  format_seconds(event.event.ts_us), text("error"));
    } else if (event.name == "option error") {
      cli::append(out, "note: option error: {}={}: {}\n", text("variable"), text("value"),
                     text("message"));
    } else {
      cli::append(out, "note: {} at {}\n", event.name, format_seconds(event.event.ts_us));
    }
  }
}

}  // namespace

std::string render_report(const Trace& trace) {
  std::string out;
  append_identity(out, trace);
  append_devices(out, trace);
  append_checkpoints(out, trace);
  append_phases(out, trace);
  append_captures_graphs_modules(out, trace);
  append_kv(out, trace);
  append_notes(out, trace);
  return out;
}

}  // namespace kvremap::report
