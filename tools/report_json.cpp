// Renders analysis::ProcessFigures as report --json and as the text report's phase attribution table.
#include "tools/report_json.h"

#include <fmt/format.h>

#include <iterator>

#include "tools/report.h"
#include "tools/start_up_work.h"
#include "tools/text.h"

namespace kvremap::report {
namespace {

nlohmann::json categories_json(const std::map<std::string, trace::CategoryStats>& table) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, s] : table) {
    out[name] = {{"live_bytes", s.live_bytes},           {"peak_bytes", s.peak_bytes},   {"peak_ts_us", s.peak_ts_us},
                 {"allocated_bytes", s.allocated_bytes}, {"allocations", s.allocations}, {"frees", s.frees}};
  }
  return out;
}

nlohmann::json by_category_json(const analysis::ByCategory& bytes) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, value] : bytes)
    if (value != 0) out[name] = value;
  return out;
}

nlohmann::json phase_json(const analysis::PhaseFigures& p) {
  nlohmann::json callers = nlohmann::json::array();
  for (const auto& c : p.top_callers) callers.push_back({{"caller", c.caller}, {"bytes", c.bytes}});
  return {{"phase", p.phase},
          {"start_us", p.start_us},
          {"end_us", p.end_us},
          {"peak_bytes", p.peak_bytes},
          {"peak_ts_us", p.peak_ts_us},
          {"peak_by_category", by_category_json(p.peak_by_category)},
          {"live_at_end", by_category_json(p.live_at_end)},
          {"allocated", by_category_json(p.allocated)},
          {"allocated_live_at_end", by_category_json(p.allocated_live_at_end)},
          {"top_callers_at_peak", callers}};
}

nlohmann::json kv_json(const analysis::KvFigures& kv) {
  if (!kv.deferred && !kv.planned && !kv.committed) return nullptr;
  return {{"deferred", kv.deferred},
          {"planned", kv.planned},
          {"committed", kv.committed},
          {"commit_ts_us", kv.commit_ts_us},
          {"tensors", kv.tensors},
          {"kv_bytes", kv.kv_bytes},
          {"device_bytes", kv.device_bytes},
          {"host_bytes", kv.host_bytes},
          {"scratch_bytes", kv.scratch_bytes},
          {"granularity", kv.granularity},
          {"device_free_bytes", kv.device_free_bytes},
          {"headroom_bytes", kv.headroom_bytes},
          {"post_kv_transient_bytes", kv.post_kv_transient_bytes},
          {"margin_bytes", kv.margin_bytes},
          {"deficit_bytes", kv.deficit_bytes},
          {"verdict", kv.verdict},
          {"trigger", kv.trigger}};
}

nlohmann::json oom_json(const analysis::OomSnapshot& s) {
  nlohmann::json callers = nlohmann::json::array();
  for (const auto& c : s.top_callers)
    callers.push_back({{"caller", c.caller}, {"bytes", c.bytes}, {"allocations", c.allocations}});
  return {{"ts_us", s.ts_us},
          {"phase", s.phase},
          {"api", s.api},
          {"caller", s.caller},
          {"requested_bytes", s.requested_bytes},
          {"device_free_bytes", s.device_free_bytes ? nlohmann::json(*s.device_free_bytes) : nlohmann::json()},
          {"live_bytes", by_category_json(s.live)},
          {"live_total_bytes", s.live_total_bytes},
          {"top_callers", callers},
          {"other_bytes", s.other_bytes}};
}

// Per device: what the start-up work after the KV cache needed, by name, and — where kvremap deferred the KV
// cache — that the kv category's peak counts the cache at its reserved size, and where it lay.
void append_start_up_work(std::string& out, const analysis::DeviceFigures& device) {
  const std::vector<std::string> lines = analysis::start_up_work_lines(analysis::start_up_work(device));
  const analysis::KvFigures& kv = device.kv;
  if (lines.empty() && !kv.deferred) return;
  cli::append(out, "\nstart-up work after the KV cache, device {}:\n", device.device);
  for (const std::string& line : lines) cli::append(out, "  {}\n", line);
  if (!kv.deferred) return;
  std::string where = fmt::format("deferred, it lay on a {} scratch", format_bytes(kv.scratch_bytes));
  if (kv.committed)
    where += fmt::format("; committed, {} on the device and {} on host memory", format_bytes(kv.device_bytes),
                         format_bytes(kv.host_bytes));
  cli::append(out, "  the peaks above count the KV cache at its reserved size, {}: {}\n", format_bytes(kv.kv_bytes),
              where);
}

// What the start-up work after the KV cache needed (tools/start_up_work.h); null for a phase not seen.
nlohmann::json start_up_work_json(const analysis::DeviceFigures& d) {
  const analysis::StartUpWork w = analysis::start_up_work(d);
  nlohmann::json out = {{"post_kv_warmup", nullptr}, {"capture", nullptr}};
  if (w.warmup.seen)
    out["post_kv_warmup"] = {{"seconds", w.warmup.seconds},
                             {"peak_above_bytes", w.warmup.peak_above_bytes},
                             {"resident_bytes", w.warmup.resident_bytes},
                             {"modules_bytes", w.warmup.modules_bytes}};
  if (w.capture.seen)
    out["capture"] = {{"seconds", w.capture.seconds},
                      {"graph_pool_bytes", w.capture.graph_pool_bytes},
                      {"graph_exec_bytes", w.capture.graph_exec_bytes},
                      {"peak_above_bytes", w.capture.peak_above_bytes}};
  return out;
}

}  // namespace

nlohmann::json report_json(const analysis::ProcessFigures& process) {
  const trace::Header& h = process.header;
  nlohmann::json devices = nlohmann::json::array();
  for (const analysis::DeviceFigures& d : process.devices) {
    nlohmann::json phases = nlohmann::json::array();
    for (const auto& p : d.phases) phases.push_back(phase_json(p));
    nlohmann::json oom = nlohmann::json::array();
    for (const auto& s : d.oom_snapshots) oom.push_back(oom_json(s));
    devices.push_back({{"device", d.device},
                       {"total_bytes", d.total_bytes},
                       {"categories_source", d.categories_source},
                       {"events_agree", d.events_agree},
                       {"categories", categories_json(d.categories)},
                       {"phases", phases},
                       {"kv", kv_json(d.kv)},
                       {"start_up_work", start_up_work_json(d)},
                       {"oom_snapshots", oom}});
  }
  nlohmann::json checkpoints = nlohmann::json::array();
  for (const trace::Checkpoint& c : process.checkpoints) {
    checkpoints.push_back({{"index", c.index},
                           {"ts_us", c.event.ts_us},
                           {"api", c.api},
                           {"device", c.device},
                           {"phase", c.phase},
                           {"driver_free", c.driver_free},
                           {"driver_total", c.driver_total},
                           {"returned_free", c.returned_free},
                           {"returned_total", c.returned_total}});
  }
  nlohmann::json phase_changes = nlohmann::json::array();
  for (const trace::PhaseChange& p : process.phase_changes)
    phase_changes.push_back(
        {{"ts_us", p.event.ts_us}, {"phase", p.phase}, {"previous", p.previous}, {"reason", p.reason}});
  return {{"source", process.source},
          {"process",
           {{"pid", h.pid},
            {"ppid", h.ppid},
            {"hostname", h.hostname},
            {"cmdline", h.cmdline},
            {"engine_cmdline", h.engine_cmdline},
            {"process_name", h.process_name},
            {"library_version", h.library_version},
            {"schema_version", h.schema_version},
            {"start_unix_ns", h.start_unix_ns},
            {"options", h.options}}},
          {"ended",
           {{"summary", process.has_summary},
            {"exit", process.exit},
            {"complete", process.complete},
            {"truncated", process.truncated},
            {"stopped", process.stopped.empty() ? nlohmann::json(nullptr)
                                                : nlohmann::json{{"at_us", process.stopped_at_us},
                                                                 {"error", process.stopped}}},
            {"end_us", process.end_us}}},
          {"devices", devices},
          {"checkpoints", checkpoints},
          {"phase_changes", phase_changes},
          {"counts", process.counts}};
}

std::string render_phase_attribution(const analysis::ProcessFigures& process) {
  std::string out;
  for (const analysis::DeviceFigures& d : process.devices) {
    cli::append(out,
                   "\nphase attribution, device {}: allocated in the phase and still live at its end\n", d.device);
    cli::append(out, "  {:<15} {:>12} {:>10}  {}\n", "phase", "peak", "peak at",
                   "by category (allocated in phase, live at its end)");
    for (const analysis::PhaseFigures& p : d.phases) {
      std::string held;
      for (const std::string_view name : trace::kCategories) {
        const auto found = p.allocated_live_at_end.find(std::string(name));
        if (found == p.allocated_live_at_end.end() || found->second == 0) continue;
        held += fmt::format("{}{} {}", held.empty() ? "" : ", ", name, format_bytes(found->second));
      }
      for (const auto& [name, bytes] : p.allocated_live_at_end)
        if (!trace::is_known_category(name) && bytes != 0)
          held += fmt::format("{}{} {}", held.empty() ? "" : ", ", name, format_bytes(bytes));
      cli::append(out, "  {:<15} {:>12} {:>9.3f}s  {}\n", p.phase, format_bytes(p.peak_bytes),
                     p.peak_ts_us / 1e6, held.empty() ? std::string("-") : held);
      if (p.top_callers.empty()) continue;
      std::string callers;
      for (const auto& c : p.top_callers)
        callers += fmt::format("{}{} {}", callers.empty() ? "" : ", ", c.caller, format_bytes(c.bytes));
      cli::append(out, "  {:<15} at the peak: {}\n", "", callers);
    }
    append_start_up_work(out, d);
  }
  return out;
}

std::string render_oom_snapshots(const analysis::ProcessFigures& process) {
  std::string out;
  for (const analysis::DeviceFigures& d : process.devices) {
    for (const analysis::OomSnapshot& s : d.oom_snapshots) {
      cli::append(out, "\nout of memory, device {}, phase {}, at {:.3f} s: {} of {}{}", d.device,
                     s.phase, s.ts_us / 1e6, s.api, format_bytes(s.requested_bytes),
                     s.caller.empty() ? std::string() : " by " + s.caller);
      if (s.device_free_bytes) cli::append(out, ", {} free", format_bytes(*s.device_free_bytes));
      std::string live;
      for (const auto& [name, bytes] : s.live)
        if (bytes != 0) live += fmt::format("{}{} {}", live.empty() ? "" : ", ", name, format_bytes(bytes));
      cli::append(out, "\n  live {}: {}\n", format_bytes(s.live_total_bytes),
                     live.empty() ? std::string("-") : live);
      std::string held;
      for (const auto& c : s.top_callers)
        held += fmt::format("{}{} {} ({} allocations)", held.empty() ? "" : ", ", c.caller, format_bytes(c.bytes),
                            c.allocations);
      cli::append(out, "  held by: {}{}{}\n", held, held.empty() ? "" : ", ",
                     fmt::format("the rest {}", format_bytes(s.other_bytes)));
    }
  }
  return out;
}

}  // namespace kvremap::report
