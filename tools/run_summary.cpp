// Formats `kvremap run`'s closing summary from the "kv" events of each process's trace.
#include "tools/run_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>

#include "policy/units.h"

namespace kvremap::run {
namespace {

using nlohmann::json;

// Events without a "device" argument concern the whole process.
constexpr int kProcessWide = -1;

// What one device's "kv" events say; the pointers are into the trace's args.
struct DeviceKv {
  const json* deferred = nullptr;   // "kv deferred"
  const json* committed = nullptr;  // "kv committed"
  const json* refused = nullptr;    // "kv arena refused"
  const json* sizing = nullptr;     // "kv sizing adjusted": this start was sized from a profile
  std::string profile_written;      // "kv profile written" (after the commit and again at exit: the last)
  bool restart = false;             // "kv restart"
};

struct ProcessKv {
  std::map<int, DeviceKv> devices;  // devices named by any "kv" event
  const json* nothing_deferred = nullptr;
  bool restart = false;  // a "kv restart" without a device
};

// A trace cut short by a kill, or written by another library version, may lack a field or type it
// differently: such a field prints as "?" instead of stopping the summary.
std::optional<std::uint64_t> unsigned_field(const json& args, const char* name) {
  const auto it = args.find(name);
  if (it == args.end() || !it->is_number_integer()) return std::nullopt;
  if (it->is_number_unsigned()) return it->get<std::uint64_t>();
  const std::int64_t value = it->get<std::int64_t>();
  if (value < 0) return std::nullopt;
  return static_cast<std::uint64_t>(value);
}

std::optional<std::int64_t> signed_field(const json& args, const char* name) {
  const auto it = args.find(name);
  if (it == args.end() || !it->is_number_integer()) return std::nullopt;
  if (it->is_number_unsigned() && it->get<std::uint64_t>() > std::numeric_limits<std::int64_t>::max())
    return std::nullopt;
  return it->get<std::int64_t>();
}

std::string string_field(const json& args, const char* name) {
  const auto it = args.find(name);
  return it != args.end() && it->is_string() ? it->get<std::string>() : std::string();
}

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

ProcessKv collect(const trace::Trace& trace) {
  ProcessKv process;
  for (const trace::OtherEvent& event : trace.other_events) {
    if (event.cat != "kv") continue;
    const json& args = event.args;
    const auto device_field = signed_field(args, "device");
    const int device = device_field && *device_field >= 0 && *device_field <= std::numeric_limits<int>::max()
                           ? static_cast<int>(*device_field)
                           : kProcessWide;
    if (event.name == "kv nothing deferred") {
      process.nothing_deferred = &args;
      continue;
    }
    if (event.name == "kv restart" && device == kProcessWide) {
      process.restart = true;
      continue;
    }
    if (device == kProcessWide) continue;
    DeviceKv& kv = process.devices[device];
    if (event.name == "kv deferred") kv.deferred = &args;
    if (event.name == "kv committed") kv.committed = &args;
    if (event.name == "kv arena refused") kv.refused = &args;
    if (event.name == "kv sizing adjusted") kv.sizing = &args;
    if (event.name == "kv restart") kv.restart = true;
    if (event.name == "kv profile written") kv.profile_written = string_field(args, "path");
  }
  return process;
}

// The two categories that rose most above their level at the end of the KV burst, before the
// commit: what the start-up's own work needed beside the KV cache.
std::string post_kv_peaks(const json& committed) {
  const auto it = committed.find("post_kv_peaks");
  if (it == committed.end() || !it->is_object()) return "";
  std::vector<std::pair<std::uint64_t, std::string>> rises;
  for (const auto& [category, figures] : it->items()) {
    const auto above = unsigned_field(figures, "peak_above");
    if (above && *above > 0) rises.emplace_back(*above, category);
  }
  if (rises.empty()) return "post-KV peaks: none";
  std::stable_sort(rises.begin(), rises.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out = "post-KV peaks:";
  for (std::size_t i = 0; i < rises.size() && i < 2; ++i)
    out += fmt::format("{} {} +{}", i == 0 ? "" : ",", rises[i].second, policy::format_bytes(rises[i].first));
  return out;
}

std::string sizing(const json& adjusted) {
  const auto shift = signed_field(adjusted, "shift_bytes");
  std::string profile = string_field(adjusted, "profile");
  if (profile.empty()) profile = "?";
  // A positive shift reported less free memory than the device had: a smaller KV cache.
  std::string change = "?";
  if (shift && *shift == 0) change = "unchanged";
  if (shift && *shift != 0) change = policy::format_bytes(magnitude(*shift)) + (*shift > 0 ? " lower" : " higher");
  return fmt::format("sized from profile {} (free memory reported {})", profile, change);
}

std::vector<std::string> device_parts(const DeviceKv& kv) {
  std::vector<std::string> parts;
  const std::string requested =
      "KV requested " + (kv.deferred ? bytes(unsigned_field(*kv.deferred, "deferred_bytes")) : std::string("?"));
  if (kv.committed) {
    const json& c = *kv.committed;
    parts.push_back(fmt::format("{}, committed {} on device + {} on host, margin {}", requested,
                                bytes(unsigned_field(c, "device_bytes")), bytes(unsigned_field(c, "host_bytes")),
                                signed_bytes(signed_field(c, "margin_bytes"))));
    if (std::string peaks = post_kv_peaks(c); !peaks.empty()) parts.push_back(std::move(peaks));
  } else if (kv.restart) {
    parts.push_back(requested);
  } else if (kv.deferred) {
    parts.push_back(requested + ", stopped before its commit");
  } else if (kv.refused) {
    parts.push_back("no KV commit: KV arena refused (" + string_field(*kv.refused, "reason") + ")");
  } else {
    parts.push_back("no KV commit: no KV cache deferred");
  }
  if (kv.restart) parts.push_back("restart requested");
  if (kv.sizing) parts.push_back(sizing(*kv.sizing));
  if (!kv.profile_written.empty()) parts.push_back("profile written: " + kv.profile_written);
  if (kv.committed) {
    const std::string flags = string_field(*kv.committed, "same_start_flags");
    if (!flags.empty()) parts.push_back("same start without kvremap: " + flags);
  }
  return parts;
}

std::string process_wide_part(const trace::Trace& trace, const ProcessKv& kv) {
  const auto mode = trace.header.options.find("KVREMAP_MODE");
  if (mode == trace.header.options.end() || mode->second != "defer") return "no KV commit: observe mode";
  if (kv.restart) return "restart requested";
  if (kv.nothing_deferred) {
    const std::string reason = string_field(*kv.nothing_deferred, "reason");
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
    out += fmt::format("kvremap run: attempt {}: {}\n", process.attempt, process.read_error);
    return;
  }
  const trace::Trace& trace = *process.trace;
  const ProcessKv kv = collect(trace);
  // A killed process's figures stop where its trace does.
  const std::string ending = trace.complete ? "" : "; trace incomplete (the process did not exit cleanly)";
  const std::string prefix = fmt::format("kvremap run: attempt {}, pid {}", process.attempt, trace.header.pid);
  if (kv.devices.empty()) {
    out += fmt::format("{}: {}{}\n", prefix, process_wide_part(trace, kv), ending);
    return;
  }
  for (const auto& [device, device_kv] : kv.devices)
    out += fmt::format("{}, device {}: {}{}\n", prefix, device, join(device_parts(device_kv)), ending);
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

}  // namespace kvremap::run
