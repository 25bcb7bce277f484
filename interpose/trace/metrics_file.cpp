// KVREMAP_METRICS_FILE's writer: the figures of this process, merged under a lock with the other processes'
// series in the same file and renamed into place, so a reader (node_exporter's textfile collector, `kvremap
// status`) only ever sees a whole file.
#include "interpose/trace/metrics_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>

#include "interpose/base/library.h"
#include "interpose/base/no_file_size_signal.h"
#include "interpose/base/process_object.h"
#include "interpose/base/small_file.h"
#include "policy/metrics_text.h"
#include "policy/printable.h"

namespace kvremap::interpose::metrics {
namespace {

// Larger than any file of kvremap's series for a machine's processes: anything bigger is not read back.
constexpr off_t kMaxMetricsFileBytes = off_t{4} << 20;

struct State {
  std::mutex lock;
  policy::ProcessMetrics process;
  bool warned = false;
};
constinit ProcessObject<State> g_state;

policy::DeviceMetrics& device_of(State& s, int device) {
  for (policy::DeviceMetrics& d : s.process.devices)
    if (d.device == device) return d;
  s.process.devices.push_back(policy::DeviceMetrics{});
  s.process.devices.back().device = device;
  return s.process.devices.back();
}

// The process's title now (setproctitle renames engines after load): the first word of /proc/self/cmdline.
std::string current_title() {
  const int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buffer[256];
  const ssize_t n = read(fd, buffer, sizeof buffer - 1);
  close(fd);
  if (n <= 0) return {};
  buffer[n] = '\0';
  std::string title(buffer);  // up to the first NUL
  while (!title.empty() && title.back() == ' ') title.pop_back();  // setproctitle's padding
  return policy::printable(title);
}

bool write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// Requires s.lock. Merges this process's series into the file under `<file>.lock` and renames the result
// into place; the reason on failure.
std::string rewrite(State& s, const std::string& path) {
  NoFileSizeSignal no_sigxfsz;
  const int lock = open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock < 0) return "cannot open its lock file " + path + ".lock: " + std::strerror(errno);
  while (flock(lock, LOCK_EX) != 0 && errno == EINTR) {
  }
  s.process.pid = getpid();
  s.process.title = current_title();
  const auto alive = [](std::int64_t pid) {
    return pid > 0 && (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
  };
  const std::string text = policy::merged_metrics_file(read_small_file(path, kMaxMetricsFileBytes, false).value_or(""), s.process.pid,
                                                       policy::metrics_samples(s.process), alive);
  const std::string temporary = path + ".tmp." + std::to_string(s.process.pid);
  std::string problem;
  // Readable by others: the node's metrics collector may run as another user. No command line is in it.
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    problem = "cannot create " + temporary + ": " + std::strerror(errno);
  } else {
    const bool written = write_all(fd, text);
    const int error = errno;
    close(fd);
    if (!written) {
      problem = "cannot write " + temporary + ": " + std::strerror(error);
      unlink(temporary.c_str());
    } else if (rename(temporary.c_str(), path.c_str()) != 0) {
      problem = "cannot rename it into place: " + std::string(std::strerror(errno));
      unlink(temporary.c_str());
    }
  }
  close(lock);
  return problem;
}

template <typename Change>
void update(Change&& change) {
  try {
    const std::string& path = options().metrics_file;
    if (path.empty()) return;
    State& s = g_state.get();
    std::lock_guard<std::mutex> g(s.lock);
    change(s);
    const std::string problem = rewrite(s, path);
    if (!problem.empty() && !s.warned) {
      s.warned = true;
      log().warn("KVREMAP_METRICS_FILE={}: {}; the metrics stop here, the engine goes on",
                 policy::printable(path), policy::printable(problem));
    }
  } catch (...) {
    // Metrics never cost the engine anything.
  }
}

}  // namespace

void on_deferred(int device, std::uint64_t kv_bytes, std::uint64_t scratch_bytes) {
  update([&](State& s) {
    policy::DeviceMetrics& d = device_of(s, device);
    d.kv_requested_bytes = kv_bytes;
    d.kv_scratch_bytes = scratch_bytes != 0 ? kv_bytes : 0;
    d.kv_device_bytes = 0;
  });
}

void on_committed(int device, std::uint64_t kv_bytes, std::uint64_t device_bytes, std::uint64_t host_bytes,
                  std::uint64_t headroom_bytes) {
  update([&](State& s) {
    policy::DeviceMetrics& d = device_of(s, device);
    d.kv_requested_bytes = kv_bytes;
    d.kv_device_bytes = device_bytes;
    d.kv_host_bytes = host_bytes;
    d.kv_scratch_bytes = 0;
    d.headroom_bytes = headroom_bytes;
    d.committed_at = static_cast<std::int64_t>(std::time(nullptr));
  });
}

void on_overflow(int device, std::uint64_t bytes) {
  update([&](State& s) {
    policy::DeviceMetrics& d = device_of(s, device);
    d.overflow_bytes += bytes;
    ++d.overflows;
  });
}

void on_phase(int device, policy::Phase phase) {
  update([&](State& s) { device_of(s, device).phase = std::string(policy::to_string(phase)); });
}

void child_after_fork() { g_state.replace(nullptr); }

}  // namespace kvremap::interpose::metrics
