// The Prometheus text of KVREMAP_METRICS_FILE: composing, merging and reading it (see metrics_text.h).
#include "policy/metrics_text.h"

#include <array>
#include <charconv>
#include <map>
#include <set>

namespace kvremap::policy {
namespace {

struct Family {
  std::string_view name;
  std::string_view type;
  std::string_view help;
};

// Every family kvremap writes, in the file's order.
constexpr std::array<Family, 10> kFamilies{{
    {"kvremap_kv_requested_bytes", "gauge", "KV cache the engine allocated, deferred or committed"},
    {"kvremap_kv_device_bytes", "gauge", "KV cache bytes on device memory"},
    {"kvremap_kv_scratch_bytes", "gauge", "KV cache bytes deferred on the aliased scratch, before the commit"},
    {"kvremap_kv_host_bytes", "gauge", "KV cache bytes on host memory"},
    {"kvremap_headroom_bytes", "gauge", "device memory kept free beside the KV cache at the commit"},
    {"kvremap_phase", "gauge", "1 for the start-up phase the device is in (label phase)"},
    {"kvremap_serving_overflow_bytes_total", "counter", "serving allocations carried on host memory, bytes"},
    {"kvremap_serving_overflows_total", "counter", "serving allocations carried on host memory"},
    {"kvremap_commit_time_seconds", "gauge", "when the KV cache was committed, seconds since the epoch"},
    {"kvremap_up", "gauge", "1 while the process runs under kvremap"},
}};

// A label value as the format escapes it: backslash, double quote and newline.
std::string escaped(std::string_view value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

// The family name of a sample line, or empty.
std::string_view family_of(std::string_view line) {
  const std::size_t brace = line.find('{');
  if (brace == std::string_view::npos) return {};
  const std::string_view name = line.substr(0, brace);
  for (const Family& f : kFamilies)
    if (f.name == name) return f.name;
  return {};
}

// The value of label `key` in a sample line (unescaped), or nothing.
std::optional<std::string> label(std::string_view line, std::string_view key) {
  const std::size_t open = line.find('{'), close = line.rfind('}');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return std::nullopt;
  std::string_view labels = line.substr(open + 1, close - open - 1);
  while (!labels.empty()) {
    const std::size_t eq = labels.find("=\"");
    if (eq == std::string_view::npos) return std::nullopt;
    const std::string_view name = labels.substr(0, eq);
    std::string value;
    std::size_t i = eq + 2;
    for (; i < labels.size() && labels[i] != '"'; ++i) {
      if (labels[i] == '\\' && i + 1 < labels.size()) {
        ++i;
        value += labels[i] == 'n' ? '\n' : labels[i];
      } else {
        value += labels[i];
      }
    }
    if (i >= labels.size()) return std::nullopt;
    if (name == key) return value;
    labels.remove_prefix(i + 1);
    if (!labels.empty() && labels.front() == ',') labels.remove_prefix(1);
  }
  return std::nullopt;
}

// A label's whole value as an integer. An out parameter rather than std::optional: GCC at -O2
// reports the optional's payload as maybe-uninitialized once it is inlined into std::map's
// lookups here (a false report, fatal under the CI's -Werror).
bool integer_label(std::string_view line, std::string_view name, std::int64_t& value) {
  const auto text = label(line, name);
  if (!text) return false;
  const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
  return error == std::errc() && end == text->data() + text->size();
}

std::optional<std::uint64_t> sample_value(std::string_view line) {
  const std::size_t space = line.rfind(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view text = line.substr(space + 1);
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::string metrics_samples(const ProcessMetrics& process) {
  std::string out;
  const std::string process_labels = "pid=\"" + std::to_string(process.pid) + "\",title=\"" + escaped(process.title) + "\"";
  const auto sample = [&](std::string_view name, const std::string& labels, auto value) {
    out.append(name).append("{").append(labels).append("} ").append(std::to_string(value)).push_back('\n');
  };
  sample("kvremap_up", process_labels, 1);
  for (const DeviceMetrics& d : process.devices) {
    const std::string labels = process_labels + ",device=\"" + std::to_string(d.device) + "\"";
    sample("kvremap_kv_requested_bytes", labels, d.kv_requested_bytes);
    sample("kvremap_kv_device_bytes", labels, d.kv_device_bytes);
    sample("kvremap_kv_scratch_bytes", labels, d.kv_scratch_bytes);
    sample("kvremap_kv_host_bytes", labels, d.kv_host_bytes);
    sample("kvremap_headroom_bytes", labels, d.headroom_bytes);
    sample("kvremap_phase", labels + ",phase=\"" + escaped(d.phase) + "\"", 1);
    sample("kvremap_serving_overflow_bytes_total", labels, d.overflow_bytes);
    sample("kvremap_serving_overflows_total", labels, d.overflows);
    if (d.committed_at) sample("kvremap_commit_time_seconds", labels, *d.committed_at);
  }
  return out;
}

std::string merged_metrics_file(std::string_view existing, std::int64_t own_pid, std::string_view own,
                                const std::function<bool(std::int64_t)>& alive) {
  std::map<std::string_view, std::string> lines_of;  // family -> its sample lines, in order
  std::map<std::int64_t, bool> running;              // asked once per pid
  const auto take = [&](std::string_view text, bool others_only) {
    while (!text.empty()) {
      const std::size_t newline = text.find('\n');
      const std::string_view line = text.substr(0, newline);
      text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
      const std::string_view family = family_of(line);
      if (family.empty()) continue;
      if (others_only) {
        std::int64_t pid = 0;
        if (!integer_label(line, "pid", pid) || pid == own_pid) continue;
        const auto known = running.find(pid);
        const bool runs = known != running.end() ? known->second : (running[pid] = alive(pid));
        if (!runs) continue;
      }
      lines_of[family].append(line).push_back('\n');
    }
  };
  take(existing, true);
  take(own, false);
  std::string out;
  for (const Family& f : kFamilies) {
    const auto it = lines_of.find(f.name);
    if (it == lines_of.end()) continue;
    out.append("# HELP ").append(f.name).append(" ").append(f.help).append("\n# TYPE ").append(f.name).append(" ");
    out.append(f.type).push_back('\n');
    out += it->second;
  }
  return out;
}

std::vector<ProcessMetrics> parse_metrics_file(std::string_view text) {
  std::vector<ProcessMetrics> processes;
  std::map<std::int64_t, std::size_t> index_of;
  while (!text.empty()) {
    const std::size_t newline = text.find('\n');
    const std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    const std::string_view family = family_of(line);
    std::int64_t pid = 0;
    if (family.empty() || !integer_label(line, "pid", pid)) continue;
    const auto value = sample_value(line);
    if (!value) continue;
    auto [at, inserted] = index_of.try_emplace(pid, processes.size());
    if (inserted) processes.push_back(ProcessMetrics{pid, label(line, "title").value_or(""), {}});
    ProcessMetrics& p = processes[at->second];
    std::int64_t device = 0;
    if (!integer_label(line, "device", device)) continue;
    DeviceMetrics* d = nullptr;
    for (DeviceMetrics& existing : p.devices)
      if (existing.device == device) d = &existing;
    if (d == nullptr) {
      p.devices.push_back(DeviceMetrics{});
      d = &p.devices.back();
      d->device = static_cast<int>(device);
    }
    if (family == "kvremap_kv_requested_bytes") d->kv_requested_bytes = *value;
    else if (family == "kvremap_kv_device_bytes") d->kv_device_bytes = *value;
    else if (family == "kvremap_kv_scratch_bytes") d->kv_scratch_bytes = *value;
    else if (family == "kvremap_kv_host_bytes") d->kv_host_bytes = *value;
    else if (family == "kvremap_headroom_bytes") d->headroom_bytes = *value;
    else if (family == "kvremap_phase") d->phase = label(line, "phase").value_or("");
    else if (family == "kvremap_serving_overflow_bytes_total") d->overflow_bytes = *value;
    else if (family == "kvremap_serving_overflows_total") d->overflows = *value;
    else if (family == "kvremap_commit_time_seconds") d->committed_at = static_cast<std::int64_t>(*value);
  }
  return processes;
}

}  // namespace kvremap::policy
