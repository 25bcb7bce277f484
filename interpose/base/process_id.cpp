// The cached process id.
#include "interpose/base/process_id.h"

#include <unistd.h>

#include <atomic>

namespace kvremap::interpose {
namespace {
constinit std::atomic<int> g_pid{0};
}  // namespace

int process_id() {
  int pid = g_pid.load(std::memory_order_relaxed);
  if (pid == 0) {
    pid = getpid();
    g_pid.store(pid, std::memory_order_relaxed);
  }
  return pid;
}

void refresh_process_id() { g_pid.store(getpid(), std::memory_order_relaxed); }

}  // namespace kvremap::interpose
