// `kvremap status`: reads KVREMAP_METRICS_FILE and shows the live processes' KV caches as one table.
#include "tools/status.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "policy/metrics_text.h"
#include "policy/units.h"
#include "tools/exit_status.h"
#include "tools/text.h"

namespace kvremap::cli {
namespace {

bool runs(std::int64_t pid) { return pid > 0 && (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

std::string table(const std::vector<policy::ProcessMetrics>& processes) {
  std::string out;
  append(out, "{:>8}  {:<24} {:>3}  {:<14} {:>12} {:>12} {:>12}  {}\n", "PID", "TITLE", "DEV", "PHASE", "KV DEVICE",
         "KV SCRATCH", "KV HOST", "SERVING OVERFLOW");
  std::size_t shown = 0;
  for (const policy::ProcessMetrics& p : processes) {
    if (!runs(p.pid)) continue;
    for (const policy::DeviceMetrics& d : p.devices) {
      ++shown;
      const std::string overflow =
          d.overflows == 0 ? std::string("none")
                           : text("{} in {} allocation{}", policy::format_bytes(d.overflow_bytes), d.overflows,
                                  d.overflows == 1 ? "" : "s");
      append(out, "{:>8}  {:<24} {:>3}  {:<14} {:>12} {:>12} {:>12}  {}\n", p.pid, p.title.substr(0, 24), d.device,
             d.phase, policy::format_bytes(d.kv_device_bytes), policy::format_bytes(d.kv_scratch_bytes),
             policy::format_bytes(d.kv_host_bytes), overflow);
    }
  }
  if (shown == 0) out += "no process under kvremap with a KV cache runs now\n";
  return out;
}

}  // namespace

int run_status(const std::string& metrics_file, double watch_seconds) {
  if (metrics_file.empty()) {
    say("status", "no metrics file: set KVREMAP_METRICS_FILE (as the engines were started with) or pass --metrics-file FILE");
    return kExitUsage;
  }
  for (;;) {
    std::ifstream in(metrics_file);
    if (!in) {
      say("status", text("cannot read {}: {}; the engines write it once they defer or commit a KV cache",
                         metrics_file, std::strerror(errno)));
      return kExitUsage;
    }
    std::stringstream contents;
    contents << in.rdbuf();
    const std::string shown = table(policy::parse_metrics_file(contents.str()));
    if (watch_seconds > 0) std::printf("\033[H\033[2J");  // a terminal's clear, as watch(1) does
    std::printf("%s", shown.c_str());
    std::fflush(stdout);
    if (watch_seconds <= 0) return kExitOk;
    std::this_thread::sleep_for(std::chrono::duration<double>(watch_seconds));
  }
}

}  // namespace kvremap::cli
