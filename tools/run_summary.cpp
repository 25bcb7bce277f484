// Formats `kvremap run`'s closing summary from the "kv" events of each process's trace.
#include "tools/run_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "policy/units.h"
#include "tools/start_up_work.h"
#include "tools/text.h"
#include "tools/trace/kv_events.h"

namespace kvremap::run {
namespace {

// Events without a "device" argument concern the whole process.
constexpr int kProcessWide = -1;

using trace::KvEvent;

// What one device's "kv" events say; the pointers are into ProcessKv::events.
struct DeviceKv {
  const KvEvent* deferred = nullptr;   // "kv deferred"
  const KvEvent* committed = nullptr;  // "kv committed"
  const KvEvent* refused = nullptr;    // "kv arena refused"
  const KvEvent* sizing = nullptr;     // "kv sizing adjusted": this start was sized from a profile
  std::string profile_written;         // "kv profile written" (after the commit and again at exit: the last)
  bool restart = false;                // "kv restart"
  std::uint64_t overflows = 0;         // "kv serving overflow": serving allocations carried on host memory
  std::uint64_t overflow_bytes = 0;
};

struct ProcessKv {
  std::vector<KvEvent> events;
  std::map<int, DeviceKv> devices;  // devices named by any "kv" event
  const KvEvent* nothing_deferred = nullptr;
  bool restart = false;  // a "kv restart" without a device
};

std::string bytes(const std::optional<std::uint64_t>& value) {
  return value ? policy::format_bytes(*value) : std::string("?");
}

// Negating through unsigned arithmetic: INT64_MIN has no positive counterpart.
std::uint64_t magnitude(std::int64_t value) {
  return value < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(value) : static_cast<std::uint64_t>(value);
}

// "+1.00 GiB", "-512 B", "0 B".
std::string signed_bytes(const std::optional<std::int64_t>& value) {
  if (!value) return "?";
  if (*value == 0) return "0 B";
  return (*value < 0 ? "-" : "+") + policy::format_bytes(magnitude(*value));
}

// Filled in place: DeviceKv's pointers are into `process.events`.
void collect(const trace::Trace& trace, ProcessKv& process) {
  using Kind = KvEvent::Kind;
  process.events = trace::kv_events(trace);
  for (const KvEvent& event : process.events) {
    const int device = event.device && *event.device >= 0 && *event.device <= std::numeric_limits<int>::max()
                           ? static_cast<int>(*event.device)
                           : kProcessWide;
    if (event.kind == Kind::nothing_deferred) {
      process.nothing_deferred = &event;
      continue;
    }
    if (event.kind == Kind::restart && device == kProcessWide) {
      process.restart = true;
      continue;
    }
    if (device == kProcessWide) continue;
    DeviceKv& kv = process.devices[device];
    if (event.kind == Kind::deferred) kv.deferred = &event;
    if (event.kind == Kind::committed) kv.committed = &event;
    if (event.kind == Kind::arena_refused) kv.refused = &event;
    if (event.kind == Kind::sizing_adjusted) kv.sizing = &event;
    if (event.kind == Kind::restart) kv.restart = true;
    if (event.kind == Kind::profile_written) kv.profile_written = event.path;
    if (event.kind == Kind::serving_overflow) {
      ++kv.overflows;
      kv.overflow_bytes += event.bytes.value_or(0);
    }
  }
}

// The two categories that rose most above their level at the end of the KV burst, before the
// commit: what the start-up's own work needed beside the KV cache.
std::string post_kv_peaks(const KvEvent& committed) {
  std::vector<std::pair<std::uint64_t, std::string>> rises;
  for (const trace::KvPostKvPeak& peak : committed.post_kv_peaks) {
    if (peak.peak_above && *peak.peak_above > 0) rises.emplace_back(*peak.peak_above, peak.category);
  }
  if (rises.empty()) return committed.has_post_kv_peaks ? "post-KV peaks: none" : "";
  std::stable_sort(rises.begin(), rises.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out = "post-KV peaks:";
  for (std::size_t i = 0; i < rises.size() && i < 2; ++i)
    out += fmt::format("{} {} +{}", i == 0 ? "" : ",", rises[i].second, policy::format_bytes(rises[i].first));
  return out;
}

std::string sizing(const KvEvent& adjusted) {
  const std::optional<std::int64_t>& shift = adjusted.shift_bytes;
  std::string profile = adjusted.profile;
  if (profile.empty()) profile = "?";  // A positive shift reported less free memory than the device had: a smaller KV cache.
  std::string change = "?";
  if (shift && *shift == 0) change = "unchanged";
  if (shift && *shift != 0) change = policy::format_bytes(magnitude(*shift)) + (*shift > 0 ? " lower" : " higher");
  return fmt::format("sized from profile {} (free memory reported {})", profile, change);
}

// `named`: what start-up work needed, by name (tools/start_up_work.h), when the trace's phases say; the commit's
// per-category rises stand in for it otherwise.
std::vector<std::string> device_parts(const DeviceKv& kv, bool named) {
  std::vector<std::string> parts;
  const std::string requested =
      "KV requested " + (kv.deferred ? bytes(kv.deferred->deferred_bytes) : std::string("?"));
  if (kv.committed) {
    const KvEvent& c = *kv.committed;
    parts.push_back(fmt::format("{}, committed {} on device + {} on host, margin {}", requested, bytes(c.device_bytes),
                                bytes(c.host_bytes), signed_bytes(c.margin_bytes)));
    if (std::string peaks = post_kv_peaks(c); !peaks.empty() && !named) parts.push_back(std::move(peaks));
    if (kv.overflows > 0)
      parts.push_back(fmt::format("serving overflows: {} in {} allocation{} on host memory (restart to hold them on "
                                  "the device)",
                                  policy::format_bytes(kv.overflow_bytes), kv.overflows, kv.overflows == 1 ? "" : "s"));
  } else if (kv.restart) {
    parts.push_back(requested);
  } else if (kv.deferred) {
    parts.push_back(requested + ", stopped before its commit");
  } else if (kv.refused) {
    parts.push_back("no KV commit: KV arena refused (" + kv.refused->reason + ")");
  } else {
    parts.push_back("no KV commit: no KV cache deferred");
  }
  if (kv.restart) parts.push_back("restart requested");
  if (kv.sizing) parts.push_back(sizing(*kv.sizing));
  if (!kv.profile_written.empty()) parts.push_back("profile written: " + kv.profile_written);
  if (kv.committed) {
    const std::string& flags = kv.committed->same_start_flags;
    if (!flags.empty()) parts.push_back("same start without kvremap: " + flags);
  }
  return parts;
}

std::string process_wide_part(const trace::Trace& trace, const ProcessKv& kv) {
  const auto mode = trace.header.options.find("KVREMAP_MODE");
  if (mode == trace.header.options.end() || mode->second != "defer") return "no KV commit: observe mode";
  if (kv.restart) return "restart requested";
  if (kv.nothing_deferred) {
    const std::string& reason = kv.nothing_deferred->reason;
    return "no KV commit: nothing deferred" + (reason.empty() ? std::string() : " (" + reason + ")");
  }
  return "no KV commit: no KV cache deferred";
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : "; ") + part;
  return out;
}

void append_process(std::string& out, const ProcessTrace& process) {
  if (!process.trace) {
    out += cli::text("kvremap run: attempt {}: {}\n", process.attempt, process.read_error);
    return;
  }
  const trace::Trace& trace = *process.trace;
  ProcessKv kv;
  collect(trace, kv);
  // A killed process's figures stop where its trace does.
  const std::string ending = trace.complete ? "" : "; trace incomplete (the process did not exit cleanly)";
  const std::string prefix = fmt::format("kvremap run: attempt {}, pid {}", process.attempt, trace.header.pid);
  if (kv.devices.empty()) {
    out += cli::text("{}: {}{}\n", prefix, process_wide_part(trace, kv), ending);
    return;
  }
  const analysis::ProcessFigures figures = analysis::analyse(trace);
  for (const auto& [device, device_kv] : kv.devices) {
    const analysis::DeviceFigures* found = analysis::find_device(figures, device);
    const std::vector<std::string> work =
        found ? analysis::start_up_work_lines(analysis::start_up_work(*found)) : std::vector<std::string>{};
    out += cli::text("{}, device {}: {}{}\n", prefix, device, join(device_parts(device_kv, !work.empty())), ending);
    for (const std::string& line : work) out += cli::text("  {}\n", line);
  }
}

}  // namespace

std::string render_run_summary(std::vector<ProcessTrace> traces) {
  // Within an attempt, ranks in the order they started; unreadable traces after the readable ones.
  const auto order = [](const ProcessTrace& p) {
    return p.trace ? std::make_tuple(p.attempt, 0, p.trace->header.start_unix_ns, p.trace->header.pid, p.path)
                   : std::make_tuple(p.attempt, 1, std::int64_t{0}, std::int64_t{0}, p.path);
  };
  std::stable_sort(traces.begin(), traces.end(),
                   [&](const ProcessTrace& a, const ProcessTrace& b) { return order(a) < order(b); });
  std::string out;
  for (const ProcessTrace& process : traces) append_process(out, process);
  return out;
}

std::string render_option_fallbacks(const std::vector<ProcessTrace>& traces) {
  // Message -> the processes whose trace holds it, in the order first seen: one engine's ranks share their options.
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> fallbacks;
  for (const ProcessTrace& process : traces) {
    if (!process.trace) continue;
    for (const trace::OtherEvent& event : process.trace->other_events) {
      if (event.cat != "kvremap" || event.name != "option error") continue;
      std::string message = "?";
      if (const auto found = event.args.find("message"); event.args.is_object() && found != event.args.end() &&
                                                          found->is_string())
        message = found->get<std::string>();
      if (message.starts_with("kvremap: ")) message.erase(0, 9);
      auto known = std::find_if(fallbacks.begin(), fallbacks.end(), [&](const auto& f) { return f.first == message; });
      if (known == fallbacks.end()) known = fallbacks.insert(fallbacks.end(), {message, {}});
      known->second.push_back(process.trace->header.pid);
    }
  }
  std::string out;
  for (const auto& [message, pids] : fallbacks) {
    std::string listed;
    for (const std::int64_t pid : pids) listed += (listed.empty() ? "" : ", ") + std::to_string(pid);
    cli::append(out, "kvremap run: an option fell back in pid {}: {}\n", listed, message);
  }
  return out;
}

}  // namespace kvremap::run
