// Decides once per process whether KV deferral is observe-only because the engine maps its KV cache itself.
#include "interpose/kv/kv_observe_only.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "interpose/base/library.h"
#include "interpose/driver/driver_api.h"
#include "interpose/process/exit_handlers.h"
#include "interpose/trace/kv_events.h"
#include "interpose/track/tracker.h"
#include "policy/allocator_config.h"
#include "policy/engine_mapped_kv.h"

namespace kvremap::interpose {
namespace {

// Plain pointers and atomics, constant-initialised: read by hooks that may run at exit.
constinit std::atomic<bool> g_observe_only{false};
constinit std::atomic<bool> g_said{false};
constinit std::mutex g_lock;
constinit std::string* g_reason = nullptr;              // under g_lock; set once
constinit policy::EngineMappedKv* g_signals = nullptr;  // under g_lock

std::string notice(const std::string& why) {
  return "KV deferral is observe-only in this process: the engine maps its KV cache itself (" + why +
         "), so no cudaMalloc of its KV cache exists to defer, and its pages are shared with other tensors; kvremap "
         "defers nothing and places nothing in its arena, and traces every allocation as in KVREMAP_MODE=observe";
}

// Says it once: the info line and the trace event. `direct`: from the tracking-start hook, where the
// trace is open and the tracker's guard must not be taken again.
void say_once(bool direct) {
  if (g_said.exchange(true)) return;
  std::string why;
  {
    std::lock_guard<std::mutex> g(g_lock);
    if (g_reason) why = *g_reason;
  }
  log().info("{}", notice(why));
  if (direct) {
    trace_events::kv_observe_only(why);
  } else {
    kv_event([&] { trace_events::kv_observe_only(why); });
  }
}

// Tracking starts (the first CUDA call kvremap sees): the exit handlers as always, then the notice.
void at_tracking_start() {
  tracker_detail::install_exit_handlers();
  say_once(true);
}

void become_observe_only(std::string why) {
  {
    std::lock_guard<std::mutex> g(g_lock);
    if (g_reason) return;
    g_reason = new std::string(std::move(why));
  }
  g_observe_only.store(true, std::memory_order_release);
}

// Whether the engine's VMM calls still need following: in defer mode, until the process is observe-only (a
// decision that stays; expandable segments map and unmap pages for as long as the process runs).
bool watching() {
  return mode_option() == policy::Mode::defer && !g_observe_only.load(std::memory_order_acquire);
}

std::optional<std::string> environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::optional<std::string>(value) : std::nullopt;
}

}  // namespace

void kv_observe_only_at_load() {
  if (mode_option() != policy::Mode::defer) return;
  const policy::AllocatorConfig c =
      policy::allocator_config(environment("PYTORCH_ALLOC_CONF"), environment("PYTORCH_CUDA_ALLOC_CONF"));
  if (!c.problem.empty()) log().warn("{}", c.problem);
  if (!c.expandable_segments) return;
  become_observe_only(c.variable +
                      " sets expandable_segments:True: PyTorch maps every tensor into its own "
                      "segments, page by page");
  // Said when tracking starts, so a process that never reaches CUDA (a compiler the engine runs) says nothing.
  set_tracking_start_hook(&at_tracking_start);
}

void kv_note_engine_reserve(std::uint64_t va, std::uint64_t bytes, int device) {
  if (!watching()) return;
  const std::uint64_t total = real_device_total(device);
  std::lock_guard<std::mutex> g(g_lock);
  if (!g_signals) g_signals = new policy::EngineMappedKv;
  g_signals->on_reserve(va, bytes, total);
}

void kv_note_engine_address_free(std::uint64_t va) {
  if (!watching()) return;
  std::lock_guard<std::mutex> g(g_lock);
  if (g_signals) g_signals->on_address_free(va);
}

void kv_note_engine_map(std::uint64_t va, std::uint64_t bytes, std::uint64_t handle) {
  if (!watching()) return;
  std::lock_guard<std::mutex> g(g_lock);
  if (!g_signals) g_signals = new policy::EngineMappedKv;
  g_signals->on_map(va, bytes, handle);
}

void kv_note_engine_unmap(std::uint64_t va, std::uint64_t bytes) {
  if (!watching()) return;
  std::lock_guard<std::mutex> g(g_lock);
  if (g_signals) g_signals->on_unmap(va, bytes);
}

bool kv_observe_only() {
  if (!g_observe_only.load(std::memory_order_acquire)) {
    std::string why;
    {
      std::lock_guard<std::mutex> g(g_lock);
      if (!g_signals || g_signals->seen() == policy::MappedKv::none) return false;
      why = g_signals->why();
    }
    become_observe_only(std::move(why));
  }
  say_once(false);
  return true;
}

std::string kv_observe_only_reason() {
  if (!g_observe_only.load(std::memory_order_acquire)) return {};
  std::lock_guard<std::mutex> g(g_lock);
  return g_reason ? "the engine maps its KV cache itself (" + *g_reason + "): kvremap only observes this process"
                  : std::string();
}

}  // namespace kvremap::interpose
