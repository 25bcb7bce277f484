// The KVREMAP_METRICS_FILE text: each process's KV cache per device in the Prometheus text exposition format,
// several processes' series merged into one file, and read back (`kvremap status`).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvremap::policy {

// What one device of one process holds and did, as the metrics show it.
struct DeviceMetrics {
  int device = 0;
  std::uint64_t kv_requested_bytes = 0;  // the KV cache the engine asked for (deferred or committed)
  std::uint64_t kv_device_bytes = 0;     // of it, on device memory
  std::uint64_t kv_scratch_bytes = 0;    // of it, deferred on the aliased scratch (before the commit)
  std::uint64_t kv_host_bytes = 0;       // of it, on host memory
  std::uint64_t headroom_bytes = 0;      // kept free at the commit
  std::string phase = "init";            // to_string(Phase)
  std::uint64_t overflow_bytes = 0;      // serving allocations carried on host memory, in all
  std::uint64_t overflows = 0;           // how many
  std::optional<std::int64_t> committed_at;  // seconds since the epoch
};

struct ProcessMetrics {
  std::int64_t pid = 0;
  std::string title;  // the process's name as `ps` shows it (a renamed engine's title)
  std::vector<DeviceMetrics> devices;
};

// The sample lines of one process (no HELP/TYPE lines), each `name{pid="…",title="…",device="…"} value`.
std::string metrics_samples(const ProcessMetrics& process);

// The whole file: `own` (metrics_samples of this process) replacing this process's earlier lines in
// `existing`, the lines of other processes kept while `alive(pid)` says they run, every family grouped under
// its HELP and TYPE lines as the format requires. Lines that are not kvremap's samples are dropped.
std::string merged_metrics_file(std::string_view existing, std::int64_t own_pid, std::string_view own,
                                const std::function<bool(std::int64_t)>& alive);

// The processes a metrics file describes, in the order their pids first appear; lines that do not parse are
// skipped.
std::vector<ProcessMetrics> parse_metrics_file(std::string_view text);

}  // namespace kvremap::policy
